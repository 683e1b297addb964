// The model tools (onnxptq/convert.h, dump_model.h) on a built graph and on real models nobody here
// wrote (torchvision's resnet18 and mobilenet_v2, PP-OCRv4 det): ONNX Runtime (npm
// onnxruntime-node) loads and runs every model they write, and its outputs are what the tool
// promises: remove_qdq gives back the float model's outputs exactly; fix_shapes the unfixed
// model's exactly; bias_int32_to_int16 the int32 model's exactly (no bias clipped);
// a8w8_npu_to_cpu the NPU model's within one step; fp32_to_fp16 the float32 model's within
// float16's precision carried through the network; dump_model's integers are ORT's (see there);
// qdq_to_qop the QDQ model's within one quantization step of each output. That step is ORT's
// doing: it fuses a QDQ Conv into QLinearConv only when its int32 bias is in units of s_x * s_w,
// and the QDQ export stores a bias several Convs share (the identical zero biases of these
// untrained networks, merged by dedupe_initializers) once, for the first Conv's scales. ORT ran 15
// of resnet18's 20 Convs in float there (its optimized graph, saved and read), while qdq_to_qop
// quantizes such biases again for each Conv and all 20 run as QLinearConv: float and integer sums
// round a few values a step apart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ir/float16.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "onnxptq/onnxptq.h"
#include "support/export_models.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::fresh_dir;
using testing::kDet;
using testing::kModels;

Model public_model(const ir::Model& m) { return Model(std::make_shared<const ir::Model>(ir::clone_model(m))); }

// The model quantized with `config_json` on `samples` seeded random samples.
Model quantized(const Model& model, const std::string& config_json, size_t samples = 4) {
  RandomData data;
  data.count = samples;
  data.seed = 3;
  std::unique_ptr<DataReader> reader = random_reader(model, data);
  Config config = Config::from_json(config_json);
  config.threads(2);
  if (testing::ort_int8_may_saturate()) config.set("reduce_range", "true");  // ORT's QLinearConv
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
double nth_output_step(const ir::Model& m, size_t i) {
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
    fs::path dir = fresh_dir("tools_ort_remove_qdq_" + source.stem().string());
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
  fs::path dir = fresh_dir("tools_ort_remove_qdq_stored");
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
  fs::path dir = fresh_dir("tools_ort_qop_" + c.label);
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
      double step = nth_output_step(q.ir(), i);
      ASSERT_GT(step, 0) << "output " << i << " is not dequantized";
      double d = testing::max_steps(a[i], b[i], step);
      std::cout << c.label << " seed " << seed << " output " << i << ": |QDQ - QOperator| (both in ORT) <= " << d
                << " steps\n";
      EXPECT_LE(d, 1.001);
    }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, QdqToQopVsOrt,
                         ::testing::Values(QopCase{"built_u8s8", "built",
                                                   R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})"},
                                           QopCase{"resnet18_u8s8", kModels / "resnet18.onnx",
                                                   R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})"},
                                           QopCase{"mobilenet_v2_s8s8_per_channel", kModels / "mobilenet_v2.onnx",
                                                   R"({"calibrate_method": "MinMax", "per_channel": true})"}),
                         [](const ::testing::TestParamInfo<QopCase>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// ------------------------------------------------------------------------------ fix_shapes

TEST(FixShapesVsOrt, PpOcrDetFixedRunsAsBefore) {
  ASSERT_TRUE(fs::exists(kDet)) << kDet;
  fs::path dir = fresh_dir("tools_ort_fix_shapes_det");
  Model model = Model::load(kDet);
  ASSERT_EQ(model.inputs().at(0).dims.at(2), -1);  // a dynamic model
  Converted fixed = fix_shapes(model, parse_fix_shapes("x:[1,3,96,128]"));
  EXPECT_EQ(model.inputs().at(0).dims.at(2), -1);  // the input model is not changed
  EXPECT_EQ(fixed.model.inputs().at(0).dims, (std::vector<int64_t>{1, 3, 96, 128}));
  EXPECT_EQ(fixed.model.outputs().at(0).dims, (std::vector<int64_t>{1, 1, 96, 128}));
  size_t outputs = 0;
  for (const auto& node : fixed.model.ir().graph->nodes())
    for (const ir::Value* v : node->outputs()) {
      ++outputs;
      EXPECT_TRUE(v->type.static_shape().has_value()) << v->name() << " " << v->type.to_string();
    }
  EXPECT_EQ(fixed.result.changed, outputs);
  std::map<std::string, ir::Tensor> feeds = {{"x", ir::Tensor(ir::DataType::Float, {1, 3, 96, 128})}};
  auto values = feeds["x"].mutable_values<float>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  std::vector<ir::Tensor> want = ort(model, dir / "dynamic.onnx", feeds, dir / "dynamic");
  std::vector<ir::Tensor> got = ort(fixed.model, dir / "fixed.onnx", feeds, dir / "fixed");
  EXPECT_EQ(testing::onnx_check(dir / "fixed.onnx"), "");
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(testing::max_steps(want[i], got[i], 1.0), 0.0);
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(FixShapesVsOrt, QuantizeWithFixShapes) {
  fs::path dir = fresh_dir("tools_ort_fix_shapes_quantize");
  Model model = Model::load(kDet);
  RandomData data;
  data.shapes["x"] = {1, 3, 64, 64};
  std::unique_ptr<DataReader> reader = random_reader(model, data);
  Config config = Config::from_json(R"({"calibrate_method": "MinMax", "activation_type": "QUInt8",
                                        "extra_options": {"FixShapes": "x:[1,3,64,64]"}})");
  config.threads(2);
  Model q = quantize(model, *reader, config).model;
  EXPECT_EQ(q.inputs().at(0).dims, (std::vector<int64_t>{1, 3, 64, 64}));
  auto feeds = testing::random_feeds(q.ir(), 7);
  std::vector<ir::Tensor> got = ort(q, dir / "q.onnx", feeds, dir / "q");
  EXPECT_EQ(got.at(0).dims(), (std::vector<int64_t>{1, 1, 64, 64}));
  if (!HasFailure()) fs::remove_all(dir);
}

// ------------------------------------------------------------------------------ bias_int32_to_int16

TEST(BiasInt32ToInt16VsOrt, SameOutputsWhenNothingIsClipped) {
  for (const char* name : {"built", "resnet18"}) {
    fs::path dir = fresh_dir(std::string("tools_ort_bias16_") + name);
    Model model = std::string(name) == "built" ? public_model(testing::export_test_model())
                                               : Model::load(kModels / "resnet18.onnx");
    Model q = quantized(model, R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})");
    Converted out = bias_int32_to_int16(q);
    EXPECT_GT(out.result.changed, 0u);
    EXPECT_EQ(out.model.opset(), q.opset());
    bool clipped = false;
    for (const std::string& line : out.result.log) clipped = clipped || line.rfind("warning:", 0) == 0;
    ASSERT_FALSE(clipped) << "a bias was clipped: the outputs may differ";
    int int16_biases = 0;
    for (const auto& n : out.model.ir().graph->nodes())
      if (n->op_type == "DequantizeLinear" && n->input(0)->has_initializer())
        int16_biases += n->input(0)->initializer().dtype() == ir::DataType::Int16;
    EXPECT_EQ(static_cast<size_t>(int16_biases), out.result.changed);
    for (uint32_t seed : {7u, 8u}) {
      auto feeds = testing::random_feeds(model.ir(), seed);
      std::vector<ir::Tensor> a = ort(q, dir / "int32.onnx", feeds, dir / ("a" + std::to_string(seed)), true);
      std::vector<ir::Tensor> b = ort(out.model, dir / "int16.onnx", feeds, dir / ("b" + std::to_string(seed)), true);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(testing::max_steps(a[i], b[i], 1.0), 0.0) << name;
    }
    if (!HasFailure()) fs::remove_all(dir);
  }
}

// ------------------------------------------------------------------------------ a8w8_npu_to_cpu

TEST(A8w8NpuToCpuVsOrt, Int32BiasesAgreeWithinOneStep) {
  for (const char* name : {"built", "resnet18"}) {
    fs::path dir = fresh_dir(std::string("tools_ort_a8w8_") + name);
    Model model = std::string(name) == "built" ? public_model(testing::export_test_model())
                                               : Model::load(kModels / "resnet18.onnx");
    Config config = Config::preset("A8W8");
    config.set_extra_option("Int32Bias", "false");
    config.threads(2);
    RandomData data;
    data.count = 4;
    data.seed = 3;
    std::unique_ptr<DataReader> reader = random_reader(model, data);
    Model npu = quantize(model, *reader, config).model;
    Converted cpu = a8w8_npu_to_cpu(npu);
    std::cout << name << ": " << cpu.result.log.at(0) << "\n";
    EXPECT_GT(cpu.result.changed, 0u);
    for (const auto& n : cpu.model.ir().graph->nodes())
      if ((n->op_type == "Conv" || n->op_type == "Gemm") && n->inputs().size() > 2) {
        const ir::Node* dq = n->input(2)->producer();
        ASSERT_TRUE(dq && dq->input(0)->has_initializer()) << n->name;
        EXPECT_EQ(dq->input(0)->initializer().dtype(), ir::DataType::Int32) << n->name;
      }
    for (uint32_t seed : {7u, 8u}) {
      auto feeds = testing::random_feeds(model.ir(), seed);
      std::vector<ir::Tensor> a = ort(npu, dir / "npu.onnx", feeds, dir / ("npu" + std::to_string(seed)), true);
      std::vector<ir::Tensor> b = ort(cpu.model, dir / "cpu.onnx", feeds, dir / ("cpu" + std::to_string(seed)), true);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        double step = nth_output_step(npu.ir(), i);
        ASSERT_GT(step, 0);
        double d = testing::max_steps(a[i], b[i], step);
        std::cout << name << " seed " << seed << " output " << i << ": |NPU - CPU| <= " << d << " steps\n";
        EXPECT_LE(d, 1.001) << name;
      }
    }
    if (!HasFailure()) fs::remove_all(dir);
  }
}

// ------------------------------------------------------------------------------ u16u8_to_u8u8

// Every uint16 activation pair of `u16` is uint8 in `u8` with scale x 257 and zero point / 257.
void expect_parameters_converted(const ir::Model& u16, const ir::Model& u8) {
  size_t pairs = 0;
  for (const auto& n : u16.graph->nodes()) {
    if (n->op_type != "QuantizeLinear" || n->input(0)->has_initializer()) continue;
    const ir::Value* s = n->input(1);
    const ir::Value* z = n->input(2);
    if (!z || z->initializer().dtype() != ir::DataType::UInt16) continue;
    const ir::Node* m = nullptr;
    for (const auto& k : u8.graph->nodes())
      if (k->name == n->name) m = k.get();
    ASSERT_TRUE(m) << n->name;
    const ir::Tensor& s8 = m->input(1)->initializer();
    const ir::Tensor& z8 = m->input(2)->initializer();
    ASSERT_EQ(z8.dtype(), ir::DataType::UInt8) << n->name;
    EXPECT_EQ(s8.values<float>()[0], static_cast<float>(double{s->initializer().values<float>()[0]} * 257.0));
    EXPECT_EQ(z8.values<uint8_t>()[0],
              static_cast<uint8_t>(std::lround(z->initializer().values<uint16_t>()[0] / 257.0)));
    ++pairs;
  }
  EXPECT_GT(pairs, 0u);
}

TEST(U16u8ToU8u8VsOrt, SameRangesInUint8) {
  for (const char* name : {"built", "resnet18"}) {
    fs::path dir = fresh_dir(std::string("tools_ort_u16u8_") + name);
    Model model = std::string(name) == "built" ? public_model(testing::export_test_model())
                                               : Model::load(kModels / "resnet18.onnx");
    Model u16 =
        quantized(model, R"({"calibrate_method": "MinMax", "activation_type": "QUInt16", "weight_type": "QUInt8"})");
    Converted u8 = u16u8_to_u8u8(u16);
    expect_parameters_converted(u16.ir(), u8.model.ir());
    for (const auto& n : u8.model.ir().graph->nodes())
      if (n->op_type == "QuantizeLinear") {
        EXPECT_NE(n->input(2)->initializer().dtype(), ir::DataType::UInt16);
      }
    auto feeds = testing::random_feeds(model.ir(), 7);
    std::vector<ir::Tensor> a = ort(u8.model, dir / "u8.onnx", feeds, dir / "u8", true);
    std::vector<ir::Tensor> e = testing::run_model(u8.model.ir(), feeds);
    ASSERT_EQ(a.size(), e.size());
    for (size_t i = 0; i < a.size(); ++i) {
      double step = nth_output_step(u8.model.ir(), i);
      double d = testing::max_steps(a[i], e[i], step);
      std::cout << name << " output " << i << ": |ORT - onnxptq| <= " << d << " uint8 steps\n";
      EXPECT_LE(d, 1.001);
    }
    if (!HasFailure()) fs::remove_all(dir);
  }
}

// ------------------------------------------------------------------------------ fp32_to_fp16

// How far apart the float16 model's outputs are from the float32 one's: within 8 float16 epsilons
// (2^-11) of the output's largest magnitude, a few roundings carried through the network (measured:
// resnet18 0.7, mobilenet_v2 1.2, PP-OCR det's logits 5.3). PP-OCR det's probabilities are not
// held to it: a sigmoid near 0.5 turns a logit's rounding into 1/4 of it, and its logits reach 50,
// so it is its logits (the Sigmoid's input, made a graph output) that are compared.
constexpr double kFloat16Epsilon = 1.0 / 2048;
constexpr double kBfloat16Epsilon = 1.0 / 256;

class Fp32ToFp16VsOrt : public ::testing::TestWithParam<fs::path> {};

TEST_P(Fp32ToFp16VsOrt, WithinFloat16Precision) {
  const fs::path source = GetParam();
  ASSERT_TRUE(fs::exists(source)) << source;
  fs::path dir = fresh_dir("tools_ort_fp16_" + source.stem().string());
  Model model = Model::load(source);
  if (source == kDet) {  // its logits as a second output
    ir::Model m = ir::clone_model(model.ir());
    for (const auto& n : m.graph->nodes())
      if (n->op_type == "Sigmoid") m.graph->add_output(n->input(0));
    model = public_model(m);
  }
  Fp16Options options;
  options.keep_io_types = true;
  Converted half = fp32_to_fp16(model, options);
  for (const std::string& line : half.result.log) std::cout << source.stem() << ": " << line << "\n";
  EXPECT_EQ(half.model.inputs().at(0).dtype, DataType::Float);
  int float16_tensors = 0;  // initializers, or Constant nodes (PP-OCR det)
  for (const ir::Value* v : half.model.ir().graph->initializers())
    float16_tensors += v->initializer().dtype() == ir::DataType::Float16;
  for (const auto& n : half.model.ir().graph->nodes())
    if (const ir::Attribute* a = n->op_type == "Constant" ? n->find_attribute("value") : nullptr)
      float16_tensors += a->t.dtype() == ir::DataType::Float16;
  EXPECT_GT(float16_tensors, 10);
  std::map<std::string, ir::Tensor> feeds;
  if (source == kDet) {  // a rendered text image (tests/models/render_text_input.py)
    std::string command = "/usr/bin/python3 " +
                          (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/models/render_text_input.py").string() +
                          " 160 160 7 " + (dir / "x.npy").string();
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    feeds["x"] = ir::load_npy(dir / "x.npy");
  } else {
    feeds = testing::random_feeds(model.ir(), 7);
  }
  std::vector<ir::Tensor> a = ort(model, dir / "fp32.onnx", feeds, dir / "fp32");
  std::vector<ir::Tensor> b = ort(half.model, dir / "fp16.onnx", feeds, dir / "fp16");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    double d = testing::max_steps(a[i], b[i], max_abs(a[i]));
    std::cout << source.stem() << " output " << i << ": |fp32 - fp16| <= " << d / kFloat16Epsilon
              << " float16 epsilons of max |output|\n";
    if (source == kDet && i == 0) continue;  // the probabilities: see above
    EXPECT_LE(d, 8 * kFloat16Epsilon);
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, Fp32ToFp16VsOrt,
                         ::testing::Values(kModels / "resnet18.onnx", kModels / "mobilenet_v2.onnx", kDet),
                         [](const ::testing::TestParamInfo<fs::path>& info) {
                           return info.param == kDet ? std::string("ppocr_det") : info.param.stem().string();
                         });

// A float32 copy of a float16 tensor (other tensors as they are).
ir::Tensor widened(const ir::Tensor& t) {
  if (t.dtype() != ir::DataType::Float16) return t;
  std::vector<float> v(static_cast<size_t>(t.size()));
  ir::half_to_float(t.values<uint16_t>().data(), v.data(), v.size());
  return ir::Tensor::from_values<float>(t.dims(), v);
}

ir::Tensor narrowed(const ir::Tensor& t) {
  std::vector<uint16_t> v(static_cast<size_t>(t.size()));
  ir::float_to_half(t.values<float>().data(), v.data(), v.size());
  return ir::Tensor(ir::DataType::Float16, t.dims(), Bytes::copy_of(v.data(), v.size() * sizeof(uint16_t)));
}

// Without keep_io_types the model takes and gives float16; fp16_to_bf16 keeps that interface.
TEST(Fp16ToBf16VsOrt, Float16InterfaceKept) {
  fs::path dir = fresh_dir("tools_ort_fp16_to_bf16");
  Model model = Model::load(kModels / "resnet18.onnx");
  auto feeds = testing::random_feeds(model.ir(), 7);
  feeds.begin()->second = widened(narrowed(feeds.begin()->second));  // the values float16 can feed
  std::map<std::string, ir::Tensor> half_feeds = {{feeds.begin()->first, narrowed(feeds.begin()->second)}};
  std::vector<ir::Tensor> want = ort(model, dir / "fp32.onnx", feeds, dir / "fp32");
  Converted half = fp32_to_fp16(model);
  EXPECT_EQ(half.model.inputs().at(0).dtype, DataType::Float16);
  std::vector<ir::Tensor> got = ort(half.model, dir / "fp16.onnx", half_feeds, dir / "fp16");
  ASSERT_EQ(got.at(0).dtype(), ir::DataType::Float16);
  double d = testing::max_steps(want.at(0), widened(got[0]), max_abs(want[0]));
  std::cout << "fp16 (float16 io): |fp32 - fp16| <= " << d / kFloat16Epsilon << " float16 epsilons of max |output|\n";
  EXPECT_LE(d, 8 * kFloat16Epsilon);
  Converted bf = fp16_to_bf16(half.model);
  EXPECT_EQ(bf.model.inputs().at(0).dtype, DataType::Float16);
  EXPECT_EQ(bf.model.outputs().at(0).dtype, DataType::Float16);
  got = ort(bf.model, dir / "bf16.onnx", half_feeds, dir / "bf16");
  d = testing::max_steps(want.at(0), widened(got.at(0)), max_abs(want[0]));
  std::cout << "fp16_to_bf16: |fp32 - bf16| <= " << d / kBfloat16Epsilon << " bfloat16 epsilons of max |output|\n";
  EXPECT_LE(d, 8 * kBfloat16Epsilon);
  if (!HasFailure()) fs::remove_all(dir);
}

// ------------------------------------------------------------------------------ fp32_to_bf16

TEST(Fp32ToBf16VsOrt, FormatsOrtOrTheEngineRuns) {
  fs::path dir = fresh_dir("tools_ort_bf16");
  Model model = Model::load(kModels / "resnet18.onnx");
  auto feeds = testing::random_feeds(model.ir(), 7);
  std::vector<ir::Tensor> want = ort(model, dir / "fp32.onnx", feeds, dir / "fp32");
  for (Bf16Format format : {Bf16Format::WithCast, Bf16Format::SimulateBf16}) {
    Converted bf = fp32_to_bf16(model, format);
    std::vector<ir::Tensor> got = ort(bf.model, dir / "bf16.onnx", feeds, dir / "bf16");
    double d = testing::max_steps(want.at(0), got.at(0), max_abs(want[0]));
    std::cout << "format " << static_cast<int>(format) << ": |fp32 - bf16| <= " << d / kBfloat16Epsilon
              << " bfloat16 epsilons of max |output|\n";
    EXPECT_LE(d, 8 * kBfloat16Epsilon);
  }
  Converted custom = fp32_to_bf16(model, Bf16Format::CustomQdq);
  EXPECT_GT(testing::count_ops(custom.model.ir(), "ExtendedQuantizeLinear"), 0);
  std::vector<ir::Tensor> engine = testing::run_model(custom.model.ir(), feeds);
  double d = testing::max_steps(want.at(0), engine.at(0), max_abs(want[0]));
  std::cout << "customqdq (onnxptq's engine): |fp32 - bf16| <= " << d / kBfloat16Epsilon
            << " bfloat16 epsilons of max |output|\n";
  EXPECT_LE(d, 8 * kBfloat16Epsilon);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// ------------------------------------------------------------------------------ dump_model

std::vector<char> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// The dumped integers against ONNX Runtime: every QuantizeLinear output (and input) of the model
// made a graph output and run literally by ORT on the same sample. On the built graph every
// dumped tensor is ORT's byte for byte. On resnet18 the quantized input is, and every dumped
// tensor is the engine's float (dumped as <input>_float.bin) quantized by the ONNX formula; the
// engine's and ORT's floats differ by float32 rounding (sums in another order), which moves a value
// across a rounding boundary now and then (1 of 802816 after the first convolution), and
// later layers carry that further, so deeper tensors are not ORT's bit for bit (the count is
// printed). Stored weights are the model's own integers; the text files hold the same numbers.
TEST(DumpModelVsOrt, IntegersAreOnnxRuntimes) {
  for (const char* name : {"built", "resnet18"}) {
    fs::path dir = fresh_dir(std::string("tools_ort_dump_") + name);
    Model model = std::string(name) == "built" ? public_model(testing::export_test_model())
                                               : Model::load(kModels / "resnet18.onnx");
    Model q = quantized(model, R"({"calibrate_method": "MinMax", "activation_type": "QUInt8"})");
    auto feeds = testing::random_feeds(model.ir(), 7);
    bool given = false;
    CallbackReader reader(
        [&]() -> std::optional<Feed> {
          if (given) return std::nullopt;
          given = true;
          return feeds;
        },
        "one sample");
    DumpOptions options;
    options.output_dir = dir / "dump";
    options.dump_float = true;
    DumpResult result = dump_model(q, reader, options);

    ir::Model exposed = ir::clone_model(q.ir());
    std::map<std::string, std::string> dumped;  // dump name -> ORT output name (a QuantizeLinear's output)
    size_t weights = 0;
    for (const auto& n : q.ir().graph->nodes()) {
      if (n->op_type != "DequantizeLinear") continue;
      const ir::Value* x = n->input(0);
      if (x->has_initializer()) {  // a stored weight: its own integers
        std::string file = n->output(0)->name();
        std::replace(file.begin(), file.end(), '/', '_');
        std::vector<char> bytes = file_bytes(dir / "dump" / (file + ".bin"));
        ASSERT_EQ(bytes.size(), x->initializer().byte_size()) << file;
        EXPECT_EQ(std::memcmp(bytes.data(), x->initializer().bytes().data(), bytes.size()), 0) << file;
        ++weights;
        continue;
      }
      dumped[n->output(0)->name()] = x->name();
      for (const ir::Value* e : {x, static_cast<const ir::Value*>(x->producer()->input(0))}) {
        ir::Value* v = exposed.graph->find_value(e->name());
        if (!exposed.graph->is_output(v) && !exposed.graph->is_input(v)) exposed.graph->add_output(v);
      }
    }
    EXPECT_EQ(result.quantized, dumped.size() + weights);
    EXPECT_GT(result.float_tensors, dumped.size());
    Model exposed_model = public_model(exposed);
    ort(exposed_model, dir / "exposed.onnx", feeds, dir / "ort", true);
    auto file_of = [](std::string n) {
      std::replace(n.begin(), n.end(), '/', '_');
      return n;
    };
    auto ort_file = [](std::string n) {
      std::replace(n.begin(), n.end(), '/', '_');
      std::replace(n.begin(), n.end(), ':', '_');
      return n + ".npy";
    };
    size_t same = 0;
    for (const auto& [dump, q_output] : dumped) {
      const ir::Node* qn = q.ir().graph->find_value(q_output)->producer();
      const ir::Value* input = qn->input(0);
      const float scale = qn->input(1)->initializer().values<float>()[0];
      const double zp = testing::values_of(qn->input(2)->initializer())[0];
      const ir::DataType type = qn->input(2)->initializer().dtype();
      std::vector<double> ort_q = testing::values_of(ir::load_npy(dir / "ort" / ort_file(q_output)));
      std::vector<char> bytes = file_bytes(dir / "dump" / (file_of(dump) + ".bin"));
      ASSERT_EQ(bytes.size(), ir::data_type_bytes(type, static_cast<int64_t>(ort_q.size()))) << dump;
      std::vector<double> got = testing::values_of(
          ir::Tensor(type, {static_cast<int64_t>(ort_q.size())}, Bytes::copy_of(bytes.data(), bytes.size())));
      bool equal = got == ort_q;
      same += equal;
      if (std::string(name) == "built" || q.ir().graph->is_input(input)) {
        EXPECT_TRUE(equal) << name << ": " << dump;
      }
      std::vector<char> floats = file_bytes(dir / "dump" / (file_of(input->name()) + "_float.bin"));
      if (!q.ir().graph->is_input(input)) {  // the engine's float, quantized as ONNX's QuantizeLinear does
        ASSERT_EQ(floats.size(), got.size() * sizeof(float)) << input->name();
        std::vector<float> x(got.size());
        std::memcpy(x.data(), floats.data(), floats.size());
        for (size_t i = 0; i < x.size(); ++i)
          ASSERT_EQ(got[i], std::clamp(std::nearbyint(x[i] / scale) + zp, 0.0, 255.0)) << dump << "[" << i << "]";
      }
      std::ifstream text(dir / "dump" / (file_of(dump) + ".txt"));  // one integer a line, the same values
      size_t i = 0;
      for (long long v; text >> v; ++i) ASSERT_EQ(static_cast<double>(v), got.at(i)) << dump << "[" << i << "]";
      EXPECT_EQ(i, got.size()) << dump;
    }
    std::cout << name << ": " << same << " of " << dumped.size() << " quantized activations equal ORT's bit for bit, "
              << weights << " weights equal the model's\n";
    if (!HasFailure()) fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace onnxptq
