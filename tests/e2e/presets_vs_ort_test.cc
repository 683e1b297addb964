// Every preset `onnxptq presets` lists as ready, on a small CNN with the ops the formats treat
// differently (support/export_models.h), calibrated on random samples: ONNX Runtime (npm
// onnxruntime-node) loads and runs the written model, with its optimizations on (as deployed) and
// off (every node literally), and the literal run's outputs are the engine's run of the same model
// within one step of the output's quantization (a float sum that lands within float error of a
// rounding boundary may round to either side in two correct runtimes; quantize_vs_ort_test.cc
// checks real models layer by layer). Outputs that are not dequantized (float16 and bfloat16
// presets, whose outputs are float32 again after their Cast pair) are compared in float32 steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "onnxptq/onnxptq.h"
#include "passes/rewrite.h"
#include "support/export_models.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

// The ready presets but those of Quark's block formats, whose com.amd.quark BFPQuantizeDequantize /
// MXQuantizeDequantize ONNX Runtime has no kernel for (export_block_test.cc holds their models to
// the simulation), and MATMUL_NBITS, whose float outputs come from float sums in each runtime's
// own order: matmul_nbits_test.cc bounds ONNX Runtime's difference by the summation error.
std::vector<std::string> ready_presets() {
  std::vector<std::string> names;
  for (const PresetInfo& p : Config::presets()) {
    const bool block = p.config_json.find("QBFP") != std::string::npos || p.config_json.find("QMX") != std::string::npos;
    if (p.ready && !block && p.name != "MATMUL_NBITS")
      names.push_back(p.name);
  }
  return names;
}

// The quantization step of graph output `name`: the scale of the DequantizeLinear writing it,
// else 0 (a float output).
double output_step(const ir::Model& model, const std::string& name) {
  const ir::Value* v = model.graph->find_value(name);
  const ir::Node* dq = v ? v->producer() : nullptr;
  if (!dq || dq->op_type.find("DequantizeLinear") == std::string::npos) return 0;
  const ir::Tensor* scale = passes::constant_of(dq->input(1));
  return scale && scale->size() == 1 ? testing::values_of(*scale)[0] : 0;
}

class PresetsVsOrt : public ::testing::TestWithParam<std::string> {};

TEST_P(PresetsVsOrt, OrtRunsTheWrittenModelAsTheEngineDoes) {
  const std::string& preset = GetParam();
  fs::path dir = fs::temp_directory_path() / ("onnxptq_presets_vs_ort_" + std::to_string(getpid()) + "_" + preset);
  fs::remove_all(dir);
  fs::create_directories(dir);

  Model model(std::make_shared<ir::Model>(testing::export_test_model()));
  auto reader = random_reader(model, {.count = 4, .seed = 5});
  QuantizeOutcome q = quantize(model, *reader, Config::preset(preset));
  const fs::path file = dir / "quantized.onnx";
  q.model.save(file);
  const ir::Model& written = q.model.ir();

  std::map<std::string, ir::Tensor> feeds = testing::random_feeds(written, 21);
  testing::ort_run(file, written, feeds, dir / "optimized");  // loads and runs as deployed
  std::vector<ir::Tensor> ort = testing::ort_run(file, written, feeds, dir / "literal", true);
  std::vector<ir::Tensor> engine = testing::run_model(written, feeds);
  ASSERT_EQ(ort.size(), engine.size());
  for (size_t i = 0; i < ort.size(); ++i) {
    const std::string& name = written.graph->outputs()[i]->name();
    double step = output_step(written, name);
    double steps = 0;
    if (step > 0) {
      steps = testing::max_steps(ort[i], engine[i], step);
    } else {  // float32 steps of the larger value
      std::vector<double> a = testing::values_of(ort[i]), b = testing::values_of(engine[i]);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        double ulp = std::ldexp(1.0, std::ilogb(std::max({std::abs(a[k]), std::abs(b[k]), 1e-30})) - 23);
        steps = std::max(steps, std::abs(a[k] - b[k]) / ulp);
      }
    }
    std::cout << preset << " output " << name << ": " << steps << (step > 0 ? " quantization" : " float32")
              << " steps from ORT\n";
    EXPECT_LE(steps, 1.0) << name;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ready, PresetsVsOrt, ::testing::ValuesIn(ready_presets()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace onnxptq
