// upgrade_opset: opset-9 models (PP-OCR recognizer and classifier, and one tiny graph per op whose
// meaning changes between opsets 9 and 13) converted to opset 13. Checked against things nobody
// here wrote: libonnx's checker, and ONNX Runtime (npm onnxruntime-node) running the original and
// the upgraded model on the same inputs; the engine must give the same outputs before and after.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "engine/session.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "passes/onnx_bridge.h"
#include "passes/pipeline.h"
#include "support/one_node.h"
#include "support/pass_check.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::attrs;
using testing::kOcr;
using testing::kSource;
using testing::random_float;

using Feeds = std::map<std::string, ir::Tensor>;

// max |a - b| / (max(a) - min(a)): 0 for equal tensors, NaN anywhere is infinite.
double upgrade_relative_error(const ir::Tensor& expected, const ir::Tensor& got) {
  EXPECT_EQ(expected.dims(), got.dims());
  if (expected.dims() != got.dims()) return INFINITY;
  if (expected.dtype() == ir::DataType::Int64) {
    auto e = expected.values<int64_t>(), g = got.values<int64_t>();
    return std::equal(e.begin(), e.end(), g.begin()) ? 0 : INFINITY;
  }
  auto e = expected.values<float>(), g = got.values<float>();
  if (e.empty()) return 0;
  auto [lo, hi] = std::minmax_element(e.begin(), e.end());
  double range = std::max(static_cast<double>(*hi - *lo), 1e-12), worst = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    double d = std::fabs(static_cast<double>(e[i]) - g[i]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst / range;
}

std::vector<ir::Tensor> run_engine(const ir::Model& model, const Feeds& feeds) {
  engine::SessionOptions options;
  options.threads = 2;
  return engine::Session(model, options).run(feeds);
}

// ONNX Runtime's outputs for `model` on `feeds`, in graph output order.
std::vector<ir::Tensor> run_ort(const ir::Model& model, const Feeds& feeds, const std::string& label) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_upgrade_" + std::to_string(getpid()) + "_" + label);
  fs::remove_all(dir);
  fs::create_directories(dir);
  ir::save_model(model, dir / "model.onnx");
  std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " + (dir / "model.onnx").string();
  for (const auto& [name, t] : feeds) {
    ir::save_npy(t, dir / (name + ".npy"));
    command += " --inputs " + name + "=" + (dir / (name + ".npy")).string();
  }
  command += " --threads 2 --outputs " + (dir / "out").string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::vector<ir::Tensor> outputs;
  for (const ir::Value* v : model.graph->outputs()) {
    fs::path file = dir / "out" / (v->name() + ".npy");
    if (!fs::exists(file)) return {};
    outputs.push_back(ir::load_npy(file));
  }
  fs::remove_all(dir);
  return outputs;
}

// Upgrades a copy of `model` to opset 13 and checks, on `feeds`: the opset, libonnx's checker,
// the engine before and after (<= 1e-5 of the range), ONNX Runtime on the upgraded model against
// ONNX Runtime on the original and against the engine (<= 1e-5 and 1e-4 of the range).
ir::Model expect_upgrade_exact(const ir::Model& original, const Feeds& feeds, const std::string& label) {
  ir::Model model = ir::clone_model(original);
  passes::PassContext context;
  EXPECT_TRUE(passes::upgrade_opset(model, context)) << label;
  EXPECT_EQ(model.opset(""), 13) << label;
  EXPECT_EQ(testing::error_of([&] { passes::onnx_check_model(model); }), "") << label;

  std::vector<ir::Tensor> before = run_engine(original, feeds);
  std::vector<ir::Tensor> after = run_engine(model, feeds);
  std::vector<ir::Tensor> ort_before = run_ort(original, feeds, label + "_before");
  std::vector<ir::Tensor> ort_after = run_ort(model, feeds, label + "_after");
  EXPECT_EQ(after.size(), before.size());
  EXPECT_EQ(ort_after.size(), before.size()) << "ONNX Runtime did not run the upgraded " << label;
  EXPECT_EQ(ort_before.size(), before.size()) << "ONNX Runtime did not run the original " << label;
  for (size_t i = 0; i < before.size() && i < after.size() && i < ort_after.size() && i < ort_before.size(); ++i) {
    double engine_diff = upgrade_relative_error(before[i], after[i]);
    double ort_diff = upgrade_relative_error(ort_before[i], ort_after[i]);
    double vs_ort = upgrade_relative_error(ort_after[i], after[i]);
    std::cout << label << " output " << i << ": engine before/after " << engine_diff << ", ORT before/after "
              << ort_diff << ", engine vs ORT after " << vs_ort << "\n";
    EXPECT_LE(engine_diff, 1e-5) << label;
    EXPECT_LE(ort_diff, 1e-5) << label;
    EXPECT_LE(vs_ort, 1e-4) << label;
  }
  return model;
}

TEST(OpsetUpgrade, PaddleOcrRecognizer) {
  ir::Model model = ir::load_model(kOcr / "ch_PP-OCRv4_rec_infer.onnx");
  ASSERT_EQ(model.opset(""), 9);
  ir::Model upgraded = expect_upgrade_exact(model, {{"x", random_float({1, 3, 48, 192}, 7, 0, 1)}}, "ppocr_rec");
  // Width is dynamic: the upgraded model still runs at another width.
  Feeds wide{{"x", random_float({1, 3, 48, 320}, 8, 0, 1)}};
  EXPECT_LE(upgrade_relative_error(run_engine(model, wide)[0], run_engine(upgraded, wide)[0]), 1e-5);
}

TEST(OpsetUpgrade, PaddleOcrClassifier) {
  ir::Model model = ir::load_model(kOcr / "ch_ppocr_mobile_v2.0_cls_infer.onnx");
  ASSERT_EQ(model.opset(""), 9);
  expect_upgrade_exact(model, {{"x", random_float({1, 3, 48, 192}, 7, 0, 1)}}, "ppocr_cls");
}

TEST(OpsetUpgrade, ModelAtTargetIsLeftAlone) {
  ir::Model model = ir::load_model(kOcr / "ch_PP-OCRv4_det_infer.onnx");  // opset 11
  passes::PassContext context;
  context.target_opset = 11;
  EXPECT_FALSE(passes::upgrade_opset(model, context));
  EXPECT_EQ(model.opset(""), 11);
}

// ---------------------------------------------------------------- one op per model, opset 9

struct TinyInput {
  TinyInput(std::string n, ir::Tensor v, bool c = false, std::vector<ir::Dim> d = {})
      : name(std::move(n)), value(std::move(v)), constant(c), declared(std::move(d)) {}
  std::string name;
  ir::Tensor value;
  bool constant;
  std::vector<ir::Dim> declared;  // the input's declared shape; empty: the value's dims
};

ir::Model tiny_model(const std::string& op, const std::vector<TinyInput>& inputs, std::vector<ir::Attribute> attrs,
                     std::vector<ir::DataType> outputs = {ir::DataType::Float}, int64_t opset = 9) {
  ir::Model model;
  model.ir_version = 4;
  model.set_opset("", opset);
  ir::Graph& g = *model.graph;
  g.name = op;
  std::vector<ir::Value*> in;
  for (const TinyInput& i : inputs) {
    ir::Value* v = g.add_value(i.name);
    v->type = ir::ValueType::tensor(i.value.dtype(), i.value.dims());
    if (!i.declared.empty()) v->type.shape = i.declared;
    if (i.constant)
      g.set_initializer(v, i.value);
    else
      g.add_input(v);
    in.push_back(v);
  }
  std::vector<ir::Value*> out;
  for (size_t k = 0; k < outputs.size(); ++k) {
    ir::Value* v = g.add_value("y" + std::to_string(k));
    v->type = ir::ValueType::tensor(outputs[k]);
    g.add_output(v);
    out.push_back(v);
  }
  ir::Node* node = g.add_node(op, in, out, "n0");
  for (ir::Attribute& a : attrs) node->set_attribute(std::move(a));
  return model;
}

Feeds feeds_of(const std::vector<TinyInput>& inputs) {
  Feeds f;
  for (const TinyInput& i : inputs)
    if (!i.constant) f[i.name] = i.value;
  return f;
}

void expect_tiny_upgrade(const std::string& label, const std::string& op, const std::vector<TinyInput>& inputs,
                         std::vector<ir::Attribute> attrs, std::vector<ir::DataType> outputs = {ir::DataType::Float},
                         int64_t opset = 9) {
  ir::Model model = tiny_model(op, inputs, std::move(attrs), outputs, opset);
  expect_upgrade_exact(model, feeds_of(inputs), label);
}

ir::Tensor floats(std::vector<float> values) {
  return ir::Tensor::from_values<float>({static_cast<int64_t>(values.size())}, values);
}

std::vector<ir::Dim> dynamic(std::vector<int64_t> dims, std::vector<size_t> symbolic) {
  std::vector<ir::Dim> out;
  for (int64_t d : dims) out.push_back(ir::Dim::of(d));
  for (size_t i : symbolic) out[i] = ir::Dim::symbol("d" + std::to_string(i));
  return out;
}

TEST(OpsetUpgradeTiny, SoftmaxInnerAxisWithDynamicDims) {
  // Axis 1 of a rank-4 input with three dynamic dims: libonnx's own adapter would write a Reshape
  // to [-1,-1,-1,6]; ours reshapes to the input's run-time shape.
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
    expect_tiny_upgrade(std::string(op) + "_axis1", op,
                        {{"x", random_float({2, 3, 5, 6}, 1), false, dynamic({2, 3, 5, 6}, {0, 2, 3})}},
                        attrs(ir::Attribute::of_int("axis", 1)));
}

TEST(OpsetUpgradeTiny, SoftmaxDefaultAndLastAxis) {
  expect_tiny_upgrade("softmax_default", "Softmax", {{"x", random_float({2, 3, 4}, 2)}}, {});
  expect_tiny_upgrade("softmax_last", "Softmax", {{"x", random_float({2, 3, 4}, 3)}},
                      attrs(ir::Attribute::of_int("axis", 2)));
  expect_tiny_upgrade("softmax_axis0", "Softmax", {{"x", random_float({2, 3, 4}, 4)}},
                      attrs(ir::Attribute::of_int("axis", 0)));
}

TEST(OpsetUpgradeTiny, UpsampleNearestGrowsAndResize10Shrinks) {
  expect_tiny_upgrade("upsample_grow", "Upsample",
                      {{"x", random_float({1, 2, 3, 4}, 5)}, {"scales", floats({1, 1, 2, 3}), true}},
                      attrs(ir::Attribute::of_string("mode", "nearest")));
  // Upsample only grows (ONNX Runtime refuses scales below 1); Resize-10 shrinks too.
  expect_tiny_upgrade("resize10_shrink", "Resize",
                      {{"x", random_float({1, 2, 7, 9}, 6)}, {"scales", floats({1, 1, 0.5f, 0.4f}), true}},
                      attrs(ir::Attribute::of_string("mode", "nearest")), {ir::DataType::Float}, 10);
}

TEST(OpsetUpgradeTiny, UpsampleLinear) {
  expect_tiny_upgrade("upsample_linear", "Upsample",
                      {{"x", random_float({1, 2, 3, 4}, 7)}, {"scales", floats({1, 1, 2, 2.5f}), true}},
                      attrs(ir::Attribute::of_string("mode", "linear")));
}

TEST(OpsetUpgradeTiny, AttributesThatBecomeInputs) {
  expect_tiny_upgrade("clip", "Clip", {{"x", random_float({3, 4}, 8)}},
                      attrs(ir::Attribute::of_float("min", -0.5f), ir::Attribute::of_float("max", 0.7f)));
  expect_tiny_upgrade("slice", "Slice", {{"x", random_float({4, 6}, 9)}},
                      attrs(ir::Attribute::of_ints("starts", {1, -4}), ir::Attribute::of_ints("ends", {3, 1000}),
                            ir::Attribute::of_ints("axes", {0, 1})));
  expect_tiny_upgrade("pad", "Pad", {{"x", random_float({2, 3}, 10)}},
                      attrs(ir::Attribute::of_ints("pads", {0, 1, 1, 2}), ir::Attribute::of_float("value", 0.25f)));
  expect_tiny_upgrade("squeeze", "Squeeze", {{"x", random_float({3, 1, 4, 1}, 11)}},
                      attrs(ir::Attribute::of_ints("axes", {1, 3})));
  expect_tiny_upgrade("unsqueeze", "Unsqueeze", {{"x", random_float({3, 4}, 12)}},
                      attrs(ir::Attribute::of_ints("axes", {0, 2})));
  expect_tiny_upgrade("reduce_sum", "ReduceSum", {{"x", random_float({3, 4, 5}, 13)}},
                      attrs(ir::Attribute::of_ints("axes", {1}), ir::Attribute::of_int("keepdims", 0)));
  expect_tiny_upgrade("split", "Split", {{"x", random_float({6, 4}, 14)}},
                      attrs(ir::Attribute::of_int("axis", 0), ir::Attribute::of_ints("split", {2, 4})),
                      {ir::DataType::Float, ir::DataType::Float});
  expect_tiny_upgrade("topk", "TopK", {{"x", random_float({3, 7}, 15)}}, attrs(ir::Attribute::of_int("k", 3)),
                      {ir::DataType::Float, ir::DataType::Int64});
}

TEST(OpsetUpgradeTiny, BatchNormalizationAndDropout) {
  expect_tiny_upgrade("batch_norm", "BatchNormalization",
                      {{"x", random_float({2, 3, 4, 5}, 16)},
                       {"scale", floats({1.5f, 0.5f, -1}), true},
                       {"bias", floats({0.1f, 0.2f, 0.3f}), true},
                       {"mean", floats({0.0f, -0.5f, 0.25f}), true},
                       {"var", floats({1, 2, 0.5f}), true}},
                      attrs(ir::Attribute::of_float("epsilon", 1e-3f)));
  expect_tiny_upgrade("dropout", "Dropout", {{"x", random_float({3, 4}, 17)}},
                      attrs(ir::Attribute::of_float("ratio", 0.3f)));
}

}  // namespace
}  // namespace onnxptq
