// Quark's choice of op types on tiny graphs: QuantizeAllOpTypes (every op type of the graph, the
// generic rule for ops without one: float tensors quantized, integer ones never) and
// enable_npu_transformer (Quark's quantize_static: its NPUTransformerRegistry,
// MatMulConstBOnly on by default, four rewrites on the nodes quantized).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/plan.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "support/export_models.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;

ir::Value* input(ir::Graph& g, const std::string& name, std::vector<int64_t> dims) {
  ir::Value* v = g.add_value(name);
  v->type = ir::ValueType::tensor(DataType::Float, std::move(dims));
  g.add_input(v);
  return v;
}

// A float initializer of values in [first - 0.05, first + 0.11].
ir::Value* initializer_near(ir::Graph& g, const std::string& name, std::vector<int64_t> dims, float first) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = first + 0.01f * static_cast<float>(i % 17) - 0.05f;
  ir::Value* v = g.add_value(name);
  g.set_initializer(v, ir::Tensor::from_values<float>(std::move(dims), values));
  return v;
}

// x -> Abs -> a -> Neg -> y; x -> Shape -> s (int64) -> Gather(0) -> d (int64) -> Neg -> e (int64).
// Abs and Neg are in no registry of ORT, vai_q_onnx or Quark.
ir::Model abs_neg_shape() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.name = "abs_neg_shape";
  ir::Value* x = input(g, "x", {2, 4});
  ir::Value *a = g.add_value("a"), *y = g.add_value("y"), *s = g.add_value("s"), *d = g.add_value("d");
  ir::Value* index = g.add_value("index");
  g.set_initializer(index, ir::Tensor::from_values<int64_t>({}, std::vector<int64_t>{0}));
  g.add_node("Abs", {x}, {a}, "abs");
  g.add_node("Neg", {a}, {y}, "neg");
  g.add_node("Shape", {x}, {s}, "shape");
  g.add_node("Gather", {s, index}, {d}, "gather");
  ir::Value* e = g.add_value("e");
  g.add_node("Neg", {d}, {e}, "int_neg");
  y->type = ir::ValueType::tensor(DataType::Float, {2, 4});
  e->type = ir::ValueType::tensor(DataType::Int64, {});
  g.add_output(y);
  g.add_output(e);
  return m;
}

std::map<std::string, DataType> types_of(const ir::Model& m) {
  std::map<std::string, DataType> types;
  for (const auto& n : m.graph->nodes())
    for (const ir::Value* v : n->outputs())
      types[v->name()] =
          (n->op_type == "Shape" || n->op_type == "Gather" || n->name == "int_neg") ? DataType::Int64 : DataType::Float;
  return types;
}

TEST(PlanQuantizeAllOpTypes, QdqAroundOpsNoRegistryHasNeverAroundIntegers) {
  ir::Model m = abs_neg_shape();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  Plan without = make_plan(m, c, types_of(m));
  EXPECT_EQ(without.float_nodes.at("abs"), "op type Abs is not quantized");
  EXPECT_EQ(without.float_nodes.at("neg"), "op type Neg is not quantized");
  EXPECT_TRUE(without.tensors.empty());

  apply_extra_option(c, "QuantizeAllOpTypes", nlohmann::json(true));
  ASSERT_TRUE(c.quantize_all_op_types);
  EXPECT_EQ(quantized_op_types(c, *m.graph).count("Abs"), 1u);
  EXPECT_EQ(quantized_op_types(c).count("Abs"), 0u);  // without the graph: the registries only
  Plan p = make_plan(m, c, types_of(m));
  for (const char* name : {"x", "a", "y"}) {
    ASSERT_NE(p.find(name), nullptr) << name;
    EXPECT_EQ(p.find(name)->role, Role::Activation) << name;
    EXPECT_EQ(p.find(name)->type, c.activation_type) << name;
  }
  EXPECT_EQ(p.find("s"), nullptr);  // Shape's int64 output
  EXPECT_EQ(p.find("d"), nullptr);
  EXPECT_EQ(p.find("index"), nullptr);
  std::set<std::string> quantized(p.quantized_nodes.begin(), p.quantized_nodes.end());
  EXPECT_EQ(quantized, (std::set<std::string>{"abs", "neg", "shape"}));
  EXPECT_EQ(p.float_nodes.at("gather"), "its data input is not quantized");
  EXPECT_EQ(p.float_nodes.at("int_neg"), "it has no float tensor");
  EXPECT_EQ(p.find("e"), nullptr);

  // Exported as QDQ: a DequantizeLinear in front of Abs and Neg, the int64 path untouched; the
  // ONNX checker takes it (an int64 tensor with a Q/DQ would fail its type inference).
  calib::CalibrationResult ranges;
  for (const char* name : {"x", "a", "y"}) ranges.ranges[name].lo = -2, ranges.ranges[name].hi = 2;
  assign_parameters(p, m, c, ranges);
  ir::Model q = export_model(m, p, c);
  for (const auto& n : q.graph->nodes()) {
    if (n->name == "abs" || n->name == "neg") {
      EXPECT_EQ(n->input(0)->producer()->op_type, "DequantizeLinear") << n->name;
    }
    if (n->op_type == "Gather") {
      EXPECT_EQ(n->input(0)->producer()->op_type, "Shape");
    }
    if (n->name == "int_neg") {
      EXPECT_EQ(n->input(0)->producer()->op_type, "Gather");
    }
  }
  EXPECT_EQ(testing::count_ops(q, "QuantizeLinear"), 3);
  fs::path file = fs::temp_directory_path() / ("onnxptq_all_op_types_" + std::to_string(getpid()) + ".onnx");
  ir::save_model(q, file);
  EXPECT_EQ(testing::onnx_check(file), "");
  fs::remove(file);

  EXPECT_THROW(apply_extra_option(c, "QuantizeAllOpTypes", nlohmann::json(1)), Error);
}

// x -> MatMul(x, W) -> a -> MatMul(a, z: an input) -> y; x -> Gemm(W2, B2) -> g; Add(a, g) -> s.
ir::Model matmuls_gemm_add() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {2, 4});
  ir::Value* z = input(g, "z", {3, 5});
  ir::Value *a = g.add_value("a"), *y = g.add_value("y"), *gm = g.add_value("g"), *s = g.add_value("s");
  g.add_node("MatMul", {x, initializer_near(g, "W", {4, 3}, 0.3f)}, {a}, "mm_const");
  g.add_node("MatMul", {a, z}, {y}, "mm_input");
  g.add_node("Gemm", {x, initializer_near(g, "W2", {4, 3}, -0.2f), initializer_near(g, "B2", {3}, 0.1f)}, {gm}, "gemm");
  g.add_node("Add", {a, gm}, {s}, "add");
  g.add_output(y);
  g.add_output(s);
  return m;
}

TEST(PlanNpuTransformer, QuarksRegistryAndMatMulWithConstantBOnly) {
  ir::Model m = matmuls_gemm_add();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_type = DataType::UInt8;
  Plan plain = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(plain.quantized_nodes.size(), 4u);  // ORT's registry has MatMul, Gemm and Add
  EXPECT_NE(plain.find("z"), nullptr);

  apply_config_json(c, {{"enable_npu_transformer", true}});
  ASSERT_TRUE(c.enable_npu_transformer);
  EXPECT_NO_THROW(check_config(c));
  // Quark's NPUTransformerRegistry is {"Gemm": QDQGemm, "MatMul": QDQMatMul} (quark/onnx registry.py);
  // ConvertBNToConv (on by default) appends BatchNormalization to the op types, as its Optimizer does.
  EXPECT_EQ(npu_transformer_op_types(), (std::set<std::string>{"Gemm", "MatMul"}));
  EXPECT_EQ(quantized_op_types(c), (std::set<std::string>{"BatchNormalization", "Gemm", "MatMul"}));
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(std::set<std::string>(p.quantized_nodes.begin(), p.quantized_nodes.end()),
            (std::set<std::string>{"mm_const", "gemm"}));
  EXPECT_EQ(p.float_nodes.at("mm_input"), "MatMulConstBOnly and B is not a constant");
  EXPECT_EQ(p.float_nodes.at("add"), "op type Add is not quantized");
  for (const char* name : {"x", "W", "a", "W2", "B2", "g"}) EXPECT_NE(p.find(name), nullptr) << name;
  for (const char* name : {"z", "y", "s"}) EXPECT_EQ(p.find(name), nullptr) << name;
  EXPECT_EQ(p.find("W")->role, Role::Weight);
  EXPECT_EQ(p.find("B2")->role, Role::Bias);  // TransformerQDQQuantizer: Int32Bias defaults to True

  // MatMulConstBOnly given false wins over the transformer's default; op_types_to_quantize over its registry.
  QuantConfig any_b = c;
  apply_extra_option(any_b, "MatMulConstBOnly", nlohmann::json(false));
  Plan q = make_plan(m, any_b, testing::all_float(m));
  EXPECT_EQ(q.float_nodes.count("mm_input"), 0u);
  EXPECT_NE(q.find("z"), nullptr);
  QuantConfig only_add = c;
  only_add.op_types_to_quantize = {"Add"};
  EXPECT_EQ(make_plan(m, only_add, testing::all_float(m)).quantized_nodes, (std::vector<std::string>{"add"}));
  // Without ConvertBNToConv, the registry alone.
  apply_extra_option(c, "ConvertBNToConv", nlohmann::json(false));
  EXPECT_NO_THROW(check_config(c));
  EXPECT_EQ(quantized_op_types(c), npu_transformer_op_types());
}

TEST(PlanNpuTransformer, ItsRewriteKeysAndItsRefusals) {
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  auto error = [](QuantConfig c) {
    try {
      check_config(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  apply_extra_option(c, "ConvertSplitToSlice", nlohmann::json(false));
  c.enable_npu_transformer = true;
  EXPECT_EQ(error(c), "");
  apply_extra_option(c, "ConvertSoftmaxToDPUVersion", nlohmann::json(true));  // the NPU CNN quantizer's simulation
  EXPECT_EQ(error(c),
            "extra option ConvertSoftmaxToDPUVersion takes effect only with enable_dpu (the NPU CNN quantizer's)");
  QuantConfig both;
  both.calibrate_method = calib::Method::MinMSE;
  both.activation_symmetric = true;
  both.enable_dpu = true;
  both.enable_npu_transformer = true;
  EXPECT_EQ(error(both), "enable_dpu (enable_npu_cnn) and enable_npu_transformer: choose one NPU path");
}

// x [2, 6] -> Split(sizes 2, 4; axis 1) -> s1, s2 -> MatMul(W1), MatMul(W2) -> y1, y2.
ir::Model split_matmuls() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {2, 6});
  ir::Value* sizes = g.add_value("sizes");
  g.set_initializer(sizes, ir::Tensor::from_values<int64_t>({2}, std::vector<int64_t>{2, 4}));
  ir::Value *s1 = g.add_value("s1"), *s2 = g.add_value("s2"), *y1 = g.add_value("y1"), *y2 = g.add_value("y2");
  g.add_node("Split", {x, sizes}, {s1, s2}, "split")->set_attribute(ir::Attribute::of_int("axis", 1));
  g.add_node("MatMul", {s1, initializer_near(g, "W1", {2, 3}, 0.2f)}, {y1}, "mm1");
  g.add_node("MatMul", {s2, initializer_near(g, "W2", {4, 3}, -0.1f)}, {y2}, "mm2");
  g.add_output(y1);
  g.add_output(y2);
  return m;
}

// Quark runs ConvertSplitToSlice & co. through its Optimizer's should_quantize_node: on the op
// types quantized only. With the transformer registry a Split stays; named in
// op_types_to_quantize, it becomes Slices, and the outputs do not change.
TEST(PlanNpuTransformer, RewritesTouchTheQuantizedOpTypesOnly) {
  ir::Model m = split_matmuls();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.optimize_model = false;
  c.enable_npu_transformer = true;
  calib::RandomReaderOptions ro;
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(m.graph->fed_inputs(), ro);
  std::optional<ir::Model> kept = prepare_float_model(m, *reader, c);
  ASSERT_TRUE(kept);
  EXPECT_EQ(testing::count_ops(*kept, "Split"), 1);

  c.op_types_to_quantize = {"Split", "MatMul"};
  std::optional<ir::Model> sliced = prepare_float_model(m, *reader, c);
  ASSERT_TRUE(sliced);
  EXPECT_EQ(testing::count_ops(*sliced, "Split"), 0);
  EXPECT_EQ(testing::count_ops(*sliced, "Slice"), 2);
  auto feeds = testing::random_feeds(m, 5);
  std::vector<ir::Tensor> before = testing::run_model(m, feeds, false),
                          after = testing::run_model(*sliced, feeds, false);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    auto b = before[i].values<float>(), a = after[i].values<float>();
    ASSERT_EQ(b.size(), a.size());
    for (size_t k = 0; k < b.size(); ++k) EXPECT_EQ(b[k], a[k]);
  }

  apply_extra_option(c, "ConvertSplitToSlice", nlohmann::json(false));
  EXPECT_EQ(testing::count_ops(*prepare_float_model(m, *reader, c), "Split"), 1);
}

}  // namespace
}  // namespace onnxptq::quant
