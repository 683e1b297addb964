// Quark's BF16 preset (QuantizeAllOpTypes) and its two NPU transformer presets
// (enable_npu_transformer), end to end on real exports nobody here wrote: torchvision's ResNet-18
// and a small transformer encoder exported by Debian's python3-torch
// (tests/models/export_tiny_transformer.py). BF16's model (bfloat16 Q/DQ as Cast pairs) runs in
// ONNX Runtime, whose Cast pairs give the engine's bfloat16 values from the same floats, and equals
// quant::Simulation bit for bit when the engine runs it; the transformer presets' models run in
// ONNX Runtime, and every tensor they quantize is within one step of ORT's when the engine computes
// it from ORT's own quantized inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/plan.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/cli_run.h"
#include "support/export_models.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::fresh_dir;
using testing::kModels;
using testing::kSource;

// The small transformer, exported once per test run into a temporary file removed at exit.
struct TinyTransformerFile {
  fs::path path;
  TinyTransformerFile() {
    fs::path file = fs::temp_directory_path() / ("onnxptq_tiny_transformer_" + std::to_string(getpid()) + ".onnx");
    std::string command = "/usr/bin/python3 " + (kSource / "tests/models/export_tiny_transformer.py").string() + " " +
                          file.string() + " > /dev/null 2>&1";
    if (std::system(command.c_str()) == 0) path = file;
  }
  ~TinyTransformerFile() {
    std::error_code ignored;
    if (!path.empty()) fs::remove(path, ignored);
  }
};

fs::path tiny_transformer() {
  static const TinyTransformerFile file;
  return file.path;
}

fs::path model_path(const std::string& name) {
  return name == "tiny_transformer" ? tiny_transformer() : kModels / (name + ".onnx");
}

quant::QuantizeResult quantize_with_preset(const ir::Model& model, const std::string& preset, size_t samples) {
  quant::QuantConfig config;
  quant::apply_preset(config, preset);
  config.calib.threads = 2;
  quant::check_config(config);
  calib::RandomReaderOptions ro;
  ro.count = samples;
  ro.seed = 3;  // the compared runs use seed 7
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  return quant::quantize_static(model, *reader, config);
}

bool is_float(const ir::Value* v) {
  if (v && v->has_initializer()) return v->initializer().dtype() == ir::DataType::Float;
  return v && v->type.is_tensor() && v->type.elem_type == ir::DataType::Float;
}

class Bf16Preset : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Preset, EngineRunsTheModelAsTheSimulationBitForBit) {
  fs::path file = model_path(GetParam());
  ASSERT_TRUE(!file.empty() && fs::exists(file)) << file;
  ir::Model model = ir::load_model(file);
  quant::QuantizeResult r = quantize_with_preset(model, "BF16", 2);
  const ir::Model& prepared = r.prepared ? *r.prepared : model;
  quant::QuantConfig config;
  quant::apply_preset(config, "BF16");
  config.calib.threads = 2;

  // QuantizeAllOpTypes: every node of the prepared model with a float input or output is quantized,
  // whatever its op type; no integer tensor is in the plan.
  std::set<std::string> quantized(r.plan.quantized_nodes.begin(), r.plan.quantized_nodes.end());
  std::set<std::string> beyond_registries;
  const std::set<std::string> registry = quant::quantized_op_types(config);
  for (const auto& n : prepared.graph->nodes()) {
    bool touches_float = false;
    for (const ir::Value* v : n->inputs()) touches_float = touches_float || is_float(v);
    for (const ir::Value* v : n->outputs()) touches_float = touches_float || is_float(v);
    if (!touches_float) continue;
    bool in = quantized.count(n->name) > 0;
    // No node stays float for its op type (data-movement ops reading an integer tensor may by their rule).
    if (!in) {
      std::string why = r.plan.float_nodes.count(n->name) ? r.plan.float_nodes.at(n->name) : "";
      EXPECT_NE(why.rfind("op type ", 0), 0u) << n->name << ": " << why;
    }
    if (in && !registry.count(n->op_type)) beyond_registries.insert(n->op_type);
  }
  for (const quant::TensorPlan& t : r.plan.tensors) {
    const ir::Value* v = prepared.graph->find_value(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_TRUE(is_float(v)) << t.name << " is planned but is not a float tensor";
    EXPECT_EQ(t.type, ir::DataType::BFloat16) << t.name;
  }
  std::cout << GetParam() << ": op types quantized beyond Quark's EQDQ registries:";
  for (const std::string& op : beyond_registries) std::cout << " " << op;
  std::cout << "\n";
  if (GetParam() == "tiny_transformer") {
    for (const char* op : {"Sqrt", "Pow"}) EXPECT_EQ(beyond_registries.count(op), 1u) << op;
  }

  fs::path dir = fresh_dir("quark_bf16_" + GetParam());
  ir::save_model(r.model, dir / "q.onnx");
  ir::Model q = ir::load_model(dir / "q.onnx");
  // bfloat16 Q/DQ as Cast pairs (docs/formats.md): ONNX Runtime runs the model, and from its own
  // float values each pair gives its bfloat16 values bit for bit.
  int casts = 0;
  for (const auto& n : q.graph->nodes()) {
    EXPECT_NE(n->domain, "com.amd.quark") << n->name;
    const ir::Attribute* to = n->op_type == "Cast" ? n->find_attribute("to") : nullptr;
    casts += to && to->i == static_cast<int64_t>(ir::DataType::BFloat16);
  }
  EXPECT_GT(casts, 10);
  testing::LayerwiseAgreement exact =
      testing::agree_layer_by_layer(dir / "q.onnx", testing::random_feeds(model, 7), dir / "exact", true);
  EXPECT_EQ(static_cast<int>(exact.compared), casts);
  EXPECT_EQ(exact.worst, 0.0) << exact.worst_tensor;
  quant::Simulation simulation(prepared, r.plan, config, 2);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> got = testing::run_model(q, feeds, false), expected = simulation.run(feeds);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].dims(), expected[i].dims());
      auto a = got[i].values<float>(), b = expected[i].values<float>();
      size_t differ = 0;
      for (size_t k = 0; k < a.size(); ++k) differ += a[k] != b[k];
      EXPECT_EQ(differ, 0u) << "output " << i << " differs in " << differ << " of " << a.size() << " values";
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(RealModels, Bf16Preset, ::testing::Values("resnet18", "tiny_transformer"));

class TransformerPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformerPreset, OrtRunsItAndEveryQuantizedTensorIsWithinOneStepGivenOrtsInputs) {
  fs::path file = tiny_transformer();
  ASSERT_TRUE(!file.empty() && fs::exists(file)) << "tests/models/export_tiny_transformer.py failed";
  ir::Model model = ir::load_model(file);
  quant::QuantizeResult r = quantize_with_preset(model, GetParam(), 4);
  const ir::Model& prepared = r.prepared ? *r.prepared : model;

  // Quark's transformer registry: MatMuls with a constant B (and Gemms) only.
  std::map<std::string, int> by_op;
  std::set<std::string> quantized(r.plan.quantized_nodes.begin(), r.plan.quantized_nodes.end());
  int variable_b = 0;
  for (const auto& n : prepared.graph->nodes()) {
    if (quantized.count(n->name)) ++by_op[n->op_type];
    if (n->op_type == "MatMul" && !n->input(1)->has_initializer()) {
      ++variable_b;
      EXPECT_EQ(quantized.count(n->name), 0u) << n->name;
      EXPECT_EQ(r.plan.float_nodes.at(n->name), "MatMulConstBOnly and B is not a constant");
    }
  }
  EXPECT_EQ(variable_b, 4);  // Q @ K^T and attention @ V in each block
  int quantized_mm = (by_op.count("MatMul") ? by_op["MatMul"] : 0) + (by_op.count("Gemm") ? by_op["Gemm"] : 0);
  EXPECT_EQ(static_cast<size_t>(quantized_mm), quantized.size()) << "only MatMul and Gemm are quantized";
  EXPECT_GE(quantized_mm, 9);  // qkv, proj, fc1, fc2 per block and the head

  fs::path dir = fresh_dir("quark_" + GetParam());
  ir::save_model(r.model, dir / "q.onnx");
  ir::Model q = ir::load_model(dir / "q.onnx");
  auto feeds = testing::random_feeds(model, 7);
  testing::LayerwiseAgreement layers = testing::agree_layer_by_layer(dir / "q.onnx", feeds, dir);
  EXPECT_GE(layers.quantized, 9u);
  EXPECT_EQ(layers.compared, layers.quantized);
  EXPECT_LE(layers.worst, 1.0) << layers.worst_tensor;

  // Each on its own: the engine's outputs against ORT literal and as deployed (optimized), printed.
  std::vector<ir::Tensor> own = testing::run_model(q, feeds, false);
  std::vector<ir::Tensor> optimized = testing::ort_run(dir / "q.onnx", q, feeds, dir / "optimized");
  ASSERT_EQ(optimized.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    std::vector<double> a = testing::values_of(own[i]), b = testing::values_of(layers.ort_outputs[i]),
                        c = testing::values_of(optimized[i]);
    double to_literal = 0, to_optimized = 0, scale = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      to_literal = std::max(to_literal, std::fabs(a[k] - b[k]));
      to_optimized = std::max(to_optimized, std::fabs(a[k] - c[k]));
      scale = std::max(scale, std::fabs(b[k]));
    }
    std::cout << GetParam() << " output " << q.graph->outputs()[i]->name() << " (max |y| " << scale
              << "): engine vs ORT literal " << to_literal << ", vs ORT optimized " << to_optimized << "\n";
  }
  std::cout << GetParam() << ": " << layers.compared << " quantized tensors, at most " << layers.worst
            << " steps from ORT given ORT's inputs\n";
  if (!HasFailure()) fs::remove_all(dir);
}

// `--config INT8_TRANSFORMER_DEFAULT` is Quark's preset (DefaultConfigMapping) written as flags,
// with `--enable-npu-transformer`; the preset and the flags write the same bytes, and without the
// switch the model differs (every MatMul, Add, Mul, ... quantized).
TEST(TransformerPresetCli, PresetIsItsRowAsFlags) {
  fs::path file = tiny_transformer();
  ASSERT_TRUE(!file.empty() && fs::exists(file));
  fs::path dir = fresh_dir("quark_cli");
  auto quantize = [&](const std::string& name, const std::string& options) {
    fs::path out = dir / (name + ".onnx");
    cli_test::CliRun r = cli_test::onnxptq("quantize " + file.string() + " -o " + out.string() +
                                           " --random 2 --quiet --threads 2 " + options);
    EXPECT_EQ(r.code, 0) << options << "\n" << r.err;
    return cli_test::slurp(out);
  };
  const std::string row =
      "--quant-format QDQ --calibrate-method MinMax --activation-type QUInt8 --weight-type QInt8 --include-cle "
      "--extra-option CalibMovingAverage=true ";
  std::string preset = quantize("preset", "--config INT8_TRANSFORMER_DEFAULT");
  ASSERT_FALSE(preset.empty());
  EXPECT_EQ(preset, quantize("flags", row + "--enable-npu-transformer"));
  EXPECT_NE(preset, quantize("without", row));
  EXPECT_EQ(preset, quantize("spelled_out", row + "--op-types-to-quantize MatMul,Gemm,BatchNormalization "
                                                  "--extra-option MatMulConstBOnly=true"));
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(TinyTransformer, TransformerPreset,
                         ::testing::Values("INT8_TRANSFORMER_DEFAULT", "INT16_TRANSFORMER_DEFAULT"));

}  // namespace
}  // namespace onnxptq
