// ExtendedQuantFormat.QDQ's marking rules (Quark's ExtendedQDQQuantizer, FoldRelu): FoldRelu
// removes a Relu whose producer's quantized output then clips at 0, initializers take the weight
// type unless AlignEltwiseQuantType gives those of Mul/Div/Add/Sub/Min/Max the activation type.
// ONNX Runtime runs the exported models (their 8/16-bit Q/DQ are com.microsoft's).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/npy.h"
#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/plan.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
using testing::add_step_initializer;
using testing::expect_bit_equal;

// x -> Conv(w, b) -> c -> Relu -> r (graph output too) -> Conv(w2, b2) -> y
ir::Model conv_relu_conv() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.name = "test";  // the ONNX checker wants one
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1, 2, 6, 6});
  g.add_input(x);
  ir::Value *c = g.add_value("c"), *r = g.add_value("r"), *y = g.add_value("y");
  ir::Node* conv = g.add_node(
      "Conv", {x, add_step_initializer(g, "w", {4, 2, 3, 3}, 0.1f), add_step_initializer(g, "b", {4}, 0.05f)}, {c},
      "conv");
  conv->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("Relu", {c}, {r}, "relu");
  g.add_node("Conv", {r, add_step_initializer(g, "w2", {3, 4, 1, 1}, 0.2f), add_step_initializer(g, "b2", {3}, 0.1f)},
             {y}, "conv2");
  r->type = ir::ValueType::tensor(DataType::Float, {1, 4, 6, 6});
  y->type = ir::ValueType::tensor(DataType::Float, {1, 3, 6, 6});
  g.add_output(r);
  g.add_output(y);
  return m;
}

QuantConfig extended_minmax(DataType activation, bool symmetric) {
  QuantConfig c;
  c.format = QuantFormat::ExtendedQDQ;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_type = activation;
  c.activation_symmetric = symmetric;
  c.calib.threads = 2;
  check_config(c);
  return c;
}

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("onnxptq_plan_extended_" + std::to_string(getpid()) + "_" + name);
}

// ONNX Runtime with its graph optimizations off (every node as the spec defines it).
std::vector<ir::Tensor> ort_literal(const ir::Model& model, const std::map<std::string, ir::Tensor>& feeds,
                                    const std::string& name) {
  fs::path dir = temp_path(name + "_ort");
  fs::create_directories(dir);
  fs::path file = dir / "model.onnx";
  ir::save_model(model, file);
  EXPECT_EQ(testing::onnx_check(file), "") << name;
  std::string command = "node " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/oracle/ort_run.js").string() + " " +
                        file.string() + " --literal --threads 2 --outputs " + dir.string() + " --inputs";
  for (const auto& [input, t] : feeds) {
    fs::path npy = dir / ("input_" + input + ".npy");
    ir::save_npy(t, npy);
    command += " " + input + "=" + npy.string();
  }
  std::vector<ir::Tensor> out;
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "ONNX Runtime failed: " << command;
    return out;
  }
  for (const ir::Value* v : model.graph->outputs()) out.push_back(ir::load_npy(dir / (v->name() + ".npy")));
  fs::remove_all(dir);
  return out;
}

TEST(ExtendedPlan, FoldReluRemovesTheReluAndItsProducersQuantizedOutputClipsAtZero) {
  ir::Model m = conv_relu_conv();
  QuantConfig fold = extended_minmax(DataType::Int8, false);
  fold.fold_relu = true;
  Plan folded = testing::calibrated_plan(m, fold);
  EXPECT_EQ(folded.removed_activations, std::set<std::string>{"r"});
  EXPECT_EQ(folded.find("c"), nullptr);
  ASSERT_TRUE(folded.find("r"));
  // The calibrated range of the Relu's output starts at 0: int8 zero point -128, the grid's lowest value 0.
  EXPECT_EQ(folded.find("r")->params.at(0).zero_point, -128);

  QuantConfig keep = extended_minmax(DataType::Int8, false);  // ExtendedQuantFormat.QDQ keeps Relu without FoldRelu
  Plan kept = testing::calibrated_plan(m, keep);
  EXPECT_TRUE(kept.removed_activations.empty());
  ASSERT_TRUE(kept.find("c"));
  EXPECT_EQ(kept.find("c")->range_from, "r");

  ir::Model a = export_model(m, folded, fold), b = export_model(m, kept, keep);
  EXPECT_EQ(testing::count_ops(a, "Relu"), 0);
  EXPECT_EQ(testing::count_ops(b, "Relu"), 1);
  EXPECT_EQ(a.graph->find_value("r_QuantizeLinear_Input")->producer()->name,
            "conv");  // the Conv writes the Relu's output

  // ONNX Runtime: both compute the same numbers, and the folded Relu output is never negative.
  auto feeds = testing::random_feeds(m, 5);
  std::vector<ir::Tensor> fa = ort_literal(a, feeds, "folded"), fb = ort_literal(b, feeds, "kept");
  expect_bit_equal(fa, fb, "folded vs kept Relu");
  ASSERT_FALSE(fa.empty());
  size_t zeros = 0;
  for (float v : fa[0].values<float>()) {
    EXPECT_GE(v, 0.0f);
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 0u);  // the Conv does produce negative values, which the quantization clips
  expect_bit_equal(testing::run_model(a, feeds, false), fa, "engine vs ONNX Runtime");
}

TEST(ExtendedPlan, FoldReluKeepsTheReluWithSymmetricActivationsAndSaysSo) {
  ir::Model m = conv_relu_conv();
  QuantConfig c = extended_minmax(DataType::Int8, true);
  c.fold_relu = true;
  Plan p = testing::calibrated_plan(m, c);
  EXPECT_TRUE(p.removed_activations.empty());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("FoldRelu: 1 Relu/Clip kept"), std::string::npos) << p.warnings[0];

  QuantConfig qdq = c;  // QuantFormat.QDQ removes it by ORT's rule, FoldRelu or not (asymmetric only)
  qdq.format = QuantFormat::QDQ;
  qdq.activation_symmetric = false;
  qdq.fold_relu = false;
  EXPECT_EQ(testing::calibrated_plan(m, qdq).removed_activations, std::set<std::string>{"r"});
}

// x -> Mul(cm) -> Add(ca) -> Sub(cs) -> y
ir::Model eltwise_chain() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.name = "test";  // the ONNX checker wants one
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {2, 8});
  g.add_input(x);
  ir::Value *mu = g.add_value("mu"), *ad = g.add_value("ad"), *y = g.add_value("y");
  g.add_node("Mul", {x, add_step_initializer(g, "cm", {8}, 0.3f)}, {mu}, "mul");
  g.add_node("Add", {mu, add_step_initializer(g, "ca", {8}, 0.11f)}, {ad}, "add");
  g.add_node("Sub", {ad, add_step_initializer(g, "cs", {8}, 0.07f)}, {y}, "sub");
  y->type = ir::ValueType::tensor(DataType::Float, {2, 8});
  g.add_output(y);
  return m;
}

TEST(ExtendedPlan, AlignEltwiseQuantTypeGivesElementwiseInitializersTheActivationType) {
  ir::Model m = eltwise_chain();
  QuantConfig a16w8 = extended_minmax(DataType::Int16, true);  // A16W8
  Plan plain = testing::calibrated_plan(m, a16w8);
  for (const char* name : {"cm", "ca", "cs"}) {  // Sub is quantized: Quark's NPU CNN registry
    ASSERT_TRUE(plain.find(name)) << name;
    EXPECT_EQ(plain.find(name)->role, Role::Weight);
    EXPECT_EQ(plain.find(name)->type, DataType::Int8) << name << ": Quark quantizes initializers with the weight type";
  }
  a16w8.align_eltwise_quant_type = true;
  Plan aligned = testing::calibrated_plan(m, a16w8);
  for (const char* name : {"cm", "ca", "cs"}) {
    EXPECT_EQ(aligned.find(name)->type, DataType::Int16) << name;
    EXPECT_TRUE(aligned.find(name)->symmetric) << name << ": the weights' symmetry";
  }
  ir::Model exported = export_model(m, aligned, a16w8);
  EXPECT_EQ(exported.graph->find_value("cm_quantized")->initializer().dtype(), DataType::Int16);
  EXPECT_EQ(exported.graph->find_value("cm_zero_point")->initializer().dtype(), DataType::Int16);
  EXPECT_EQ(exported.graph->find_value("cm_DequantizeLinear_Output")->producer()->domain, "com.microsoft");
  auto feeds = testing::random_feeds(m, 9);
  expect_bit_equal(testing::run_model(exported, feeds, false), ort_literal(exported, feeds, "eltwise"),
                   "engine vs ONNX Runtime");

  QuantConfig qdq = a16w8;  // QuantFormat.QDQ: initializers of these ops have the activation type anyway (ORT)
  qdq.format = QuantFormat::QDQ;
  qdq.align_eltwise_quant_type.reset();
  Plan ort = testing::calibrated_plan(m, qdq);
  EXPECT_EQ(ort.find("cm")->type, DataType::Int16);
  EXPECT_EQ(ort.find("cs"), nullptr);  // Sub is not in QDQ's default op types
}

TEST(ExtendedPlan, OptionsParseAndRefuse) {
  QuantConfig c;
  EXPECT_EQ(parse_quant_format("ExtendedQuantFormat.QDQ"), QuantFormat::ExtendedQDQ);
  EXPECT_EQ(parse_quant_format("ExtendedQuantFormat.QOperator"), QuantFormat::QOperator);
  EXPECT_STREQ(quant_format_name(QuantFormat::ExtendedQDQ), "ExtendedQuantFormat.QDQ");
  apply_extra_option(c, "FoldRelu", true);
  apply_extra_option(c, "AlignEltwiseQuantType", true);
  apply_extra_option(c, "AlignConcat", true);
  apply_extra_option(c, "AlignPool", false);
  apply_extra_option(c, "AlignPad", true);
  apply_extra_option(c, "AlignSlice", false);
  apply_extra_option(c, "AlignTranspose", true);
  apply_extra_option(c, "AlignReshape", true);
  apply_extra_option(c, "AdjustBiasScale", false);
  EXPECT_TRUE(c.fold_relu && *c.align_eltwise_quant_type && *c.align_concat && !*c.align_pool && *c.align_pad &&
              !*c.align_slice && *c.align_transpose && *c.align_reshape && !c.adjust_bias_scale);
  EXPECT_EQ(testing::error_of([&] { apply_extra_option(c, "FoldRelu", 1); }),
            "extra option FoldRelu: expected true or false, got 1");
  c.enable_dpu = true;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("AlignEltwiseQuantType does not apply with enable_dpu"),
            std::string::npos);
  QuantConfig wide;
  wide.format = QuantFormat::ExtendedQDQ;
  wide.calibrate_method = calib::Method::MinMax;
  for (DataType t : {DataType::Int32, DataType::UInt32, DataType::Float16, DataType::BFloat16, DataType::UInt16}) {
    wide.activation_type = wide.weight_type = t;
    EXPECT_EQ(testing::error_of([&] { check_config(wide); }), "") << quant_type_name(t);
  }
}

}  // namespace
}  // namespace onnxptq::quant
