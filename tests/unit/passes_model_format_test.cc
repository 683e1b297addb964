// The model format conversions (passes/model_format.h) on small built graphs and on real models.
// The reference is ONNX Runtime running the original model: the float16 model in float16, the NCHW
// model on the NCHW data. The converted model is run by the engine and by ONNX Runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "ir/float16.h"
#include "ir/npy.h"
#include "passes/model_format.h"
#include "support/cli_run.h"
#include "support/export_models.h"
#include "support/pass_check.h"
#include "support/test_paths.h"

namespace onnxptq::passes {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
using ir::Tensor;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::random_float;

using testing::kDet;
using testing::kModels;

class ModelFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_model_format_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // ONNX Runtime's outputs of `model` (saved under `name`) on `feeds`.
  std::vector<Tensor> ort(const ir::Model& model, const std::string& name, const testing::Feeds& feeds) {
    fs::path path = dir_ / (name + ".onnx");
    ir::save_model(model, path);
    return testing::ort_run(path, model, feeds, dir_ / (name + "_out"));
  }
  std::vector<Tensor> engine(const ir::Model& model, const testing::Feeds& feeds) {
    return testing::run_model(model, feeds, true);
  }

  fs::path dir_;
};

Tensor narrow(const Tensor& t) {
  Tensor h = Tensor::uninitialized(DataType::Float16, t.dims());
  ir::float_to_half(t.values<float>().data(), h.mutable_values<uint16_t>().data(), static_cast<size_t>(t.size()));
  return h;
}

Tensor widen(const Tensor& t) {
  if (t.dtype() != DataType::Float16) return t;
  Tensor f = Tensor::uninitialized(DataType::Float, t.dims());
  ir::half_to_float(t.values<uint16_t>().data(), f.mutable_values<float>().data(), static_cast<size_t>(t.size()));
  return f;
}

std::vector<Tensor> widen(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(widen(t));
  return out;
}

// [N,C,H,W] -> [N,H,W,C] (floats), written independently of the code under test.
Tensor to_nhwc(const Tensor& t) {
  const auto& d = t.dims();
  Tensor out(DataType::Float, {d[0], d[2], d[3], d[1]});
  auto src = t.values<float>();
  auto dst = out.mutable_values<float>();
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t h = 0; h < d[2]; ++h)
        for (int64_t w = 0; w < d[3]; ++w)
          dst[((n * d[2] + h) * d[3] + w) * d[1] + c] = src[((n * d[1] + c) * d[2] + h) * d[3] + w];
  return out;
}

size_t ops(const ir::Model& m, std::string_view op) {
  size_t n = 0;
  for (const auto& node : m.graph->nodes()) n += node->op_type == op;
  return n;
}

bool has_float16(const ir::Graph& g) {
  auto half = [](const ir::Value* v) {
    return v && ((v->type.is_tensor() && v->type.elem_type == DataType::Float16) ||
                 (v->has_initializer() && v->initializer().dtype() == DataType::Float16));
  };
  for (const ir::Value* v : g.inputs())
    if (half(v)) return true;
  for (const ir::Value* v : g.outputs())
    if (half(v)) return true;
  for (const ir::Value* v : g.initializers())
    if (half(v)) return true;
  for (const ir::Value* v : g.value_info())
    if (half(v)) return true;
  for (const auto& node : g.nodes()) {
    for (const ir::Value* v : node->outputs())
      if (half(v)) return true;
    for (const ir::Attribute& a : node->attributes) {
      if (a.type == ir::AttrType::Tensor && a.t.dtype() == DataType::Float16) return true;
      if (a.type == ir::AttrType::Int && a.i == 10 && (a.name == "to" || a.name == "dtype")) return true;
      if (a.g && has_float16(*a.g)) return true;
    }
  }
  return false;
}

// A float16 copy of a float model, as a float16 export has it: weights, inputs and outputs float16.
ir::Model float16_copy(const ir::Model& model) {
  ir::Model m = ir::clone_model(model);
  for (ir::Value* v : m.graph->initializers())
    if (v->initializer().dtype() == DataType::Float) m.graph->set_initializer(v, narrow(v->initializer()));
  for (ir::Value* v : m.graph->value_info()) v->type = {};
  for (auto* list : {&m.graph->inputs(), &m.graph->outputs()})
    for (ir::Value* v : *list)
      if (v->type.elem_type == DataType::Float) v->type.elem_type = DataType::Float16;
  return m;
}

// max |expected - got| over the largest |expected| (1 when an output is all zeros).
double diff_over_magnitude(const std::vector<Tensor>& expected, const std::vector<Tensor>& got) {
  double worst = 0;
  for (size_t o = 0; o < expected.size(); ++o) {
    auto e = expected[o].values<float>();
    auto g = got[o].values<float>();
    if (e.size() != g.size()) return INFINITY;
    double magnitude = 0, diff = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      magnitude = std::max(magnitude, std::fabs(static_cast<double>(e[i])));
      diff = std::max(diff, std::fabs(static_cast<double>(e[i]) - g[i]));
    }
    worst = std::max(worst, diff / std::max(magnitude, 1e-30));
  }
  return worst;
}

// x (float) -> Cast(to=float16) -> Conv(float16 w, b) -> Mul(Constant float16) -> Add(z, float16
// input) -> Relu -> Cast(to=float) -> y; z -> Sigmoid -> s (float16 output). value_info float16.
ir::Model tiny_float16_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 8, 8});
  ir::Value* z = g.add_value("z");
  z->type = ir::ValueType::tensor(DataType::Float16, {1, 4, 8, 8});
  g.add_input(x);
  g.add_input(z);
  auto half_value = [&](const std::string& name, std::vector<int64_t> dims) {
    ir::Value* v = g.add_value(name);
    v->type = ir::ValueType::tensor(DataType::Float16, dims);
    g.add_value_info(v);
    return v;
  };
  ir::Value *xh = half_value("xh", {1, 3, 8, 8}), *c = half_value("c", {1, 4, 8, 8}), *k = g.add_value("k");
  ir::Value *mul = half_value("mul", {1, 4, 8, 8}), *sum = g.add_value("sum"), *r = g.add_value("r");
  ir::Value *y = add_float_value(g, "y", {1, 4, 8, 8}), *s = g.add_value("s");
  s->type = ir::ValueType::tensor(DataType::Float16, {1, 4, 8, 8});
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, narrow(random_float({4, 3, 3, 3}, 1, -0.5f, 0.5f)));
  ir::Value* b = g.add_value("b");
  g.set_initializer(b, narrow(random_float({4}, 2)));
  g.add_node("Cast", {x}, {xh}, "to_half")->set_attribute(ir::Attribute::of_int("to", 10));
  g.add_node("Conv", {xh, w, b}, {c}, "conv")->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("Constant", {}, {k}, "k")->set_attribute(ir::Attribute::of_tensor("value", narrow(random_float({1}, 3))));
  g.add_node("Mul", {c, k}, {mul}, "mul");
  g.add_node("Add", {mul, z}, {sum}, "add");
  g.add_node("Relu", {sum}, {r}, "relu");
  g.add_node("Cast", {r}, {y}, "to_float")->set_attribute(ir::Attribute::of_int("to", 1));
  g.add_node("Sigmoid", {z}, {s}, "sigmoid");
  g.add_output(y);
  g.add_output(s);
  return m;
}

// The float16 model computes the float model's function with every intermediate tensor rounded to
// float16 (relative error up to 2^-11 each); the converted model computes it in float.
// Tolerance: 2^-9 of the largest output value, two float16 steps (2^-10 relative) at that
// magnitude. Measured: about 2.7e-4 on the tiny model, 2.4e-4 on ResNet-50 (half a step); a wrong
// weight or a lost Cast gives errors of the size of the values.
constexpr double kFloat16Tolerance = 1.0 / 512;

TEST_F(ModelFormat, Fp16ToFp32EveryKindOfFloat16BecomesFloat) {
  ir::Model m = tiny_float16_model();
  Tensor x = random_float({1, 3, 8, 8}, 4), z = random_float({1, 4, 8, 8}, 5);
  std::vector<Tensor> reference = widen(ort(m, "half", {{"x", x}, {"z", narrow(z)}}));

  ir::Model converted = ir::clone_model(m);
  PassContext context;
  ASSERT_TRUE(convert_fp16_to_fp32(converted, context));
  ASSERT_EQ(context.log.size(), 1u);
  EXPECT_NE(context.log[0].find("2 Casts from float to float removed"), std::string::npos) << context.log[0];
  EXPECT_FALSE(has_float16(*converted.graph));
  EXPECT_EQ(ops(converted, "Cast"), 0u);  // the Casts at the edges carried float16 only
  EXPECT_EQ(converted.graph->find_value("z")->type.elem_type, DataType::Float);
  EXPECT_EQ(converted.graph->outputs()[1]->type.elem_type, DataType::Float);

  testing::Feeds feeds = {{"x", x}, {"z", widen(narrow(z))}};  // the same float16 values, widened
  std::vector<Tensor> by_engine = engine(converted, feeds);
  std::vector<Tensor> by_ort = ort(converted, "widened", feeds);
  std::cout << "float16 (ORT) vs converted: engine " << diff_over_magnitude(reference, by_engine) << ", ORT "
            << diff_over_magnitude(reference, by_ort) << " of the largest output\n";
  EXPECT_LE(diff_over_magnitude(reference, by_engine), kFloat16Tolerance);
  EXPECT_LE(diff_over_magnitude(reference, by_ort), kFloat16Tolerance);
  EXPECT_LE(testing::relative_diff(by_ort, by_engine), 1e-5);  // the same float model: float agreement
}

TEST_F(ModelFormat, Fp16ToFp32LeavesAFloatModelAlone) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Value* x = add_float_value(*m.graph, "x", {2, 3});
  ir::Value* y = add_float_value(*m.graph, "y", {2, 3});
  m.graph->add_input(x);
  m.graph->add_node("Relu", {x}, {y});
  m.graph->add_output(y);
  PassContext context;
  EXPECT_FALSE(convert_fp16_to_fp32(m, context));
  ASSERT_EQ(context.log.size(), 1u);
  EXPECT_NE(context.log[0].find("no float16"), std::string::npos);
}

// ResNet-50 made float16 by the test, converted back: ORT on the float16 model vs the engine and
// ORT on the converted one. Then quantized with --convert-fp16-to-fp32 from the float16 file.
TEST_F(ModelFormat, Fp16ToFp32ResNet50CopyConvertedBackAndQuantized) {
  ir::Model half = float16_copy(ir::load_model(kModels / "resnet50.onnx"));
  Tensor x = random_float({1, 3, 224, 224}, 6);
  std::vector<Tensor> reference = widen(ort(half, "resnet50_fp16", {{"input", narrow(x)}}));

  ir::Model converted = ir::clone_model(half);
  PassContext context;
  ASSERT_TRUE(convert_fp16_to_fp32(converted, context));
  EXPECT_FALSE(has_float16(*converted.graph));
  testing::Feeds feeds = {{"input", widen(narrow(x))}};
  double engine_diff = diff_over_magnitude(reference, engine(converted, feeds));
  double ort_diff = diff_over_magnitude(reference, ort(converted, "resnet50_back", feeds));
  std::cout << "resnet50 float16 (ORT) vs converted: engine " << engine_diff << ", ORT " << ort_diff
            << " of the largest output\n";
  EXPECT_LE(engine_diff, kFloat16Tolerance);
  EXPECT_LE(ort_diff, kFloat16Tolerance);

  fs::path q = dir_ / "resnet50_q.onnx";
  cli_test::CliRun r = cli_test::onnxptq("quantize " + (dir_ / "resnet50_fp16.onnx").string() + " -o " + q.string() +
                                         " --convert-fp16-to-fp32 --random 2 --calibrate-method MinMax --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  ir::Model quantized = ir::load_model(q);
  EXPECT_FALSE(has_float16(*quantized.graph));
  EXPECT_GE(ops(quantized, "QuantizeLinear"), 50u);
  std::vector<Tensor> q_out = testing::ort_run(q, quantized, feeds, dir_ / "q_out");
  ASSERT_EQ(q_out.size(), 1u);
  EXPECT_EQ(q_out[0].dims(), (std::vector<int64_t>{1, 1000}));
}

// x [1,3,8,8] -> Sub(mean [1,3,1,1]) -> Div(std [3,1,1]) -> Conv -> Relu -> y [1,4,8,8].
ir::Model normalized_conv_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 8, 8});
  g.add_input(x);
  ir::Value *a = g.add_value("a"), *b = g.add_value("b"), *c = g.add_value("c");
  ir::Value* y = add_float_value(g, "y", {1, 4, 8, 8});
  g.add_node("Sub", {x, add_random_initializer(g, "mean", {1, 3, 1, 1}, 1)}, {a}, "sub");
  g.add_node("Div", {a, add_random_initializer(g, "std", {3, 1, 1}, 2, 0.5f, 1.5f)}, {b}, "div");
  g.add_node("Conv", {b, add_random_initializer(g, "w", {4, 3, 3, 3}, 3)}, {c}, "conv")
      ->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("Relu", {c}, {y}, "relu");
  g.add_output(y);
  return m;
}

TEST_F(ModelFormat, NchwToNhwcMovesTheTransposeIntoTheConstants) {
  ir::Model m = normalized_conv_model();
  Tensor x = random_float({1, 3, 8, 8}, 7);
  std::vector<Tensor> reference = ort(m, "nchw", {{"x", x}});
  reference[0] = to_nhwc(reference[0]);  // the output is converted too (H, W > C)

  ir::Model converted = ir::clone_model(m);
  PassContext context;
  ASSERT_TRUE(convert_nchw_to_nhwc(converted, context));
  ASSERT_EQ(context.log.size(), 1u);
  EXPECT_NE(context.log[0].find("moved below 2 elementwise nodes"), std::string::npos) << context.log[0];
  const ir::Graph& g = *converted.graph;
  EXPECT_EQ(g.inputs()[0]->type.static_shape(), (std::vector<int64_t>{1, 8, 8, 3}));
  EXPECT_EQ(g.outputs()[0]->name(), "y_transpose");
  EXPECT_EQ(g.outputs()[0]->type.static_shape(), (std::vector<int64_t>{1, 8, 8, 4}));
  EXPECT_EQ(ops(converted, "Transpose"), 2u);  // before the Conv, after the output
  const ir::Node* sub = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type == "Sub") sub = n.get();
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->input(0), g.inputs()[0]);  // reads the NHWC input directly
  EXPECT_EQ(sub->input(1)->initializer().dims(), (std::vector<int64_t>{1, 1, 1, 3}));

  testing::Feeds feeds = {{"x", to_nhwc(x)}};
  EXPECT_LE(testing::relative_diff(reference, engine(converted, feeds)), 1e-5);
  EXPECT_LE(testing::relative_diff(reference, ort(converted, "nhwc", feeds)), 1e-5);
}

// A model that transposes its NCHW input to NHWC first keeps no Transpose at all.
TEST_F(ModelFormat, NchwToNhwcCancelsTheModelsOwnTranspose) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 16, 16});
  g.add_input(x);
  ir::Value* t = g.add_value("t");
  ir::Value* y = add_float_value(g, "y", {1, 16, 16, 3});
  g.add_node("Transpose", {x}, {t}, "to_nhwc")->set_attribute(ir::Attribute::of_ints("perm", {0, 2, 3, 1}));
  g.add_node("Mul", {t, add_random_initializer(g, "k", {3}, 1)}, {y}, "mul");
  g.add_output(y);
  Tensor x_data = random_float({1, 3, 16, 16}, 8);
  std::vector<Tensor> reference = ort(m, "own", {{"x", x_data}});

  ir::Model converted = ir::clone_model(m);
  PassContext context;
  ASSERT_TRUE(convert_nchw_to_nhwc(converted, context));
  EXPECT_EQ(ops(converted, "Transpose"), 0u);
  EXPECT_EQ(converted.graph->outputs()[0]->name(), "y");  // [1,16,16,3] looks NHWC: left as it is
  testing::Feeds feeds = {{"x", to_nhwc(x_data)}};
  EXPECT_EQ(testing::relative_diff(reference, engine(converted, feeds)), 0.0);
  EXPECT_EQ(testing::relative_diff(reference, ort(converted, "own_nhwc", feeds)), 0.0);
}

TEST_F(ModelFormat, NchwToNhwcSaysWhyAnInputIsLeftAlone) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* dynamic = add_float_value(g, "dynamic", {1, 3, -1, -1});
  ir::Value* nhwc = add_float_value(g, "nhwc", {1, 224, 224, 3});
  ir::Value* flat = add_float_value(g, "flat", {1, 10});
  int i = 0;
  for (ir::Value* v : {dynamic, nhwc, flat}) {
    g.add_input(v);
    ir::Value* out = g.add_value("out" + std::to_string(i++));
    g.add_node("Relu", {v}, {out});
    g.add_output(out);
  }
  PassContext context;
  EXPECT_FALSE(convert_nchw_to_nhwc(m, context));
  ASSERT_EQ(context.log.size(), 3u);
  EXPECT_NE(context.log[0].find("'dynamic' left as it is: its C, H and W are not all fixed sizes"), std::string::npos);
  EXPECT_NE(context.log[1].find("'nhwc' left as it is: it looks NHWC already"), std::string::npos);
  EXPECT_NE(context.log[2].find("'flat' left as it is: it has rank 2"), std::string::npos);
  EXPECT_EQ(ops(m, "Transpose"), 0u);
  EXPECT_EQ(nhwc->type.static_shape(), (std::vector<int64_t>{1, 224, 224, 3}));
}

TEST_F(ModelFormat, NchwToNhwcResNet18AndPaddleOcrDetector) {
  ir::Model m = ir::load_model(kModels / "resnet18.onnx");
  Tensor x = random_float({1, 3, 224, 224}, 9);
  std::vector<Tensor> reference = ort(m, "resnet18", {{"input", x}});
  ir::Model converted = ir::clone_model(m);
  PassContext context;
  ASSERT_TRUE(convert_nchw_to_nhwc(converted, context));
  EXPECT_EQ(ops(converted, "Transpose"), 1u);  // the first node is a Conv: the transpose stays before it
  testing::Feeds feeds = {{"input", to_nhwc(x)}};
  EXPECT_LE(testing::relative_diff(reference, engine(converted, feeds)), 1e-5);
  EXPECT_LE(testing::relative_diff(reference, ort(converted, "resnet18_nhwc", feeds)), 1e-5);

  ir::Model det = ir::load_model(kDet);  // x [?,3,?,?]: not convertible, left as it is
  PassContext det_context;
  EXPECT_FALSE(convert_nchw_to_nhwc(det, det_context));
  ASSERT_EQ(det_context.log.size(), 1u);
  EXPECT_NE(det_context.log[0].find("not all fixed sizes"), std::string::npos) << det_context.log[0];
  EXPECT_EQ(ops(det, "Transpose"), ops(ir::load_model(kDet), "Transpose"));
}

// `onnxptq quantize --convert-nchw-to-nhwc` takes NCHW samples (transposed for the NHWC input, as
// Quark's reader does) and NHWC samples (vai_q_onnx's way) alike: the same bytes out.
TEST_F(ModelFormat, QuantizeTakesNchwOrNhwcSamples) {
  ir::Model m = normalized_conv_model();
  fs::path model = dir_ / "model.onnx";
  ir::save_model(m, model);
  fs::create_directories(dir_ / "nchw");
  fs::create_directories(dir_ / "nhwc");
  for (uint32_t i = 0; i < 3; ++i) {
    Tensor x = random_float({1, 3, 8, 8}, 20 + i);
    ir::save_npy(x, dir_ / "nchw" / ("s" + std::to_string(i) + ".npy"));
    ir::save_npy(to_nhwc(x), dir_ / "nhwc" / ("s" + std::to_string(i) + ".npy"));
  }
  std::string common = "quantize " + model.string() + " --convert-nchw-to-nhwc --calibrate-method MinMax --quiet";
  cli_test::CliRun a =
      cli_test::onnxptq(common + " -o " + (dir_ / "a.onnx").string() + " --calib-data " + (dir_ / "nchw").string());
  ASSERT_EQ(a.code, 0) << a.err;
  cli_test::CliRun b =
      cli_test::onnxptq(common + " -o " + (dir_ / "b.onnx").string() + " --calib-data " + (dir_ / "nhwc").string());
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(cli_test::slurp(dir_ / "a.onnx"), cli_test::slurp(dir_ / "b.onnx"));
  ir::Model q = ir::load_model(dir_ / "a.onnx");
  EXPECT_EQ(q.graph->inputs()[0]->type.static_shape(), (std::vector<int64_t>{1, 8, 8, 3}));
  EXPECT_GE(ops(q, "QuantizeLinear"), 3u);
}

// `onnxptq preprocess --convert-nchw-to-nhwc` says why it leaves the detector's input alone.
TEST_F(ModelFormat, PreprocessSaysWhatTheConversionSkipped) {
  cli_test::CliRun r = cli_test::onnxptq("preprocess " + kDet.string() + " -o " + (dir_ / "det.onnx").string() +
                                         " --convert-nchw-to-nhwc --skip-optimization");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("convert_nchw_to_nhwc: input 'x' left as it is"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace onnxptq::passes
