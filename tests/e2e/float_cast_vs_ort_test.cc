// Quark's FP16 and BF16 presets, and bfloat16 with ActivationScaled / WeightScaled, on real models
// nobody here wrote (PP-OCRv4 det, trained, on rendered text; torchvision's mobilenet_v2, random
// weights, whose activations shrink to 1e-9 and below float16's range): the written model holds no
// custom op and ONNX Runtime loads and runs it (as deployed and literally). Given ORT's own float
// values, every Cast pair gives ORT's 16-bit values bit for bit: the quantization is the same
// arithmetic. The engine runs the model as the simulation computes it, bit for bit. How far each
// layer and the whole model are from ORT is printed: the float ops between the pairs (convolutions
// summed in another order) differ by float32 steps, and a float that lands on the other side of a
// 16-bit rounding boundary moves by one step, which later layers carry (docs/formats.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kDet;
const fs::path kMobilenet = fs::path(ONNXPTQ_MODELS_DIR) / "mobilenet_v2.onnx";

struct FloatCastCase {
  std::string label;
  fs::path model;
  std::string preset;
  nlohmann::json extra;  // extra_options over the preset's
  ir::DataType type;
};

class FloatCastVsOrt : public ::testing::TestWithParam<FloatCastCase> {};

TEST_P(FloatCastVsOrt, RunsInOrtAndEachCastPairGivesOrtsValues) {
  const FloatCastCase& c = GetParam();
  ASSERT_TRUE(fs::exists(c.model)) << c.model;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_float_cast_vs_ort_" + std::to_string(getpid()) + "_" + c.label);
  fs::remove_all(dir);
  fs::create_directories(dir / "calib");

  ir::Model model = ir::load_model(c.model);
  quant::QuantConfig config;
  quant::apply_preset(config, c.preset);
  quant::apply_config_json(config, {{"extra_options", c.extra}});
  config.calib.threads = 2;
  std::unique_ptr<calib::DataReader> reader;
  std::map<std::string, ir::Tensor> feeds;
  if (c.model == kDet) {  // four rendered text images to calibrate, a fifth to compare
    for (int seed = 1; seed <= 4; ++seed)
      testing::render_text_image("1x3x160x160", seed, dir / "calib" / ("x" + std::to_string(seed) + ".npy"));
    testing::render_text_image("1x3x160x160", 7, dir / "x.npy");
    if (HasFatalFailure()) return;
    reader = calib::make_npy_folder_reader(dir / "calib", model.graph->fed_inputs());
    feeds["x"] = ir::load_npy(dir / "x.npy");
  } else {  // random data, seed 3 to calibrate, 7 to compare
    calib::RandomReaderOptions ro;
    ro.count = 4;
    ro.seed = 3;
    reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
    feeds = testing::random_feeds(model, 7);
  }
  quant::QuantizeResult q = quant::quantize_static(model, *reader, config);
  fs::path quantized = dir / "q.onnx";
  ir::save_model(q.model, quantized);
  ASSERT_EQ(testing::onnx_check(quantized), "");

  int to_type = 0, custom = 0;
  for (const auto& n : q.model.graph->nodes()) {
    custom += n->domain == "com.amd.quark";
    const ir::Attribute* to = n->op_type == "Cast" ? n->find_attribute("to") : nullptr;
    to_type += to && to->i == static_cast<int64_t>(c.type);
  }
  EXPECT_EQ(custom, 0);
  EXPECT_GT(to_type, 100);

  // Every Q/DQ from ORT's own float values: the same 16-bit values, bit for bit.
  testing::LayerwiseAgreement exact = testing::agree_layer_by_layer(quantized, feeds, dir / "exact", true);
  std::cout << c.label << ": " << exact.compared << " Cast pairs from ORT's floats, the farthest " << exact.worst
            << " steps; the engine's floats were at most " << exact.floats_worst
            << " float32 steps (at each tensor's largest value) from ORT's ('" << exact.floats_worst_tensor << "')\n";
  EXPECT_EQ(exact.compared, exact.quantized);
  EXPECT_EQ(static_cast<int>(exact.quantized), to_type);
  EXPECT_EQ(exact.floats, exact.quantized);
  EXPECT_EQ(exact.worst, 0.0) << exact.worst_tensor;
  // Every layer from ORT's quantized inputs, printed: the float ops between the pairs (convolution
  // sums in another order, ORT's own HardSigmoid and Sigmoid where they are not quantized) differ
  // by float32 steps (floats_worst above), which are one step of the 16-bit type at most where the
  // values are large, and many near 0, where float16 and bfloat16 steps are finer than float32's
  // noise at the tensor's scale: 10 float16 steps in PP-OCRv4 det's p2o.Add.31, 16 bfloat16 steps
  // for values of 2e-6 in mobilenet_v2's first convolution with a scaled range.
  testing::LayerwiseAgreement layers = testing::agree_layer_by_layer(quantized, feeds, dir / "layers");
  std::cout << c.label << ": " << layers.compared << " Cast pairs from ORT's quantized inputs, the farthest "
            << layers.worst << " steps" << (layers.worst > 0 ? " ('" + layers.worst_tensor + "')" : "") << "\n";
  EXPECT_EQ(layers.compared, layers.quantized);

  ir::Model reloaded = ir::load_model(quantized);
  std::vector<ir::Tensor> optimized = testing::ort_run(quantized, reloaded, feeds, dir / "optimized");
  std::vector<ir::Tensor> engine = testing::run_model(reloaded, feeds);
  std::vector<ir::Tensor> simulated = quant::Simulation(q.prepared ? *q.prepared : model, q.plan, config, 2).run(feeds);
  ASSERT_EQ(engine.size(), simulated.size());
  for (size_t i = 0; i < engine.size(); ++i) {
    auto e = engine[i].values<float>(), s = simulated[i].values<float>(), l = layers.ort_outputs[i].values<float>(),
         o = optimized[i].values<float>();
    ASSERT_EQ(e.size(), s.size());
    ASSERT_EQ(l.size(), e.size());
    ASSERT_EQ(o.size(), e.size());
    size_t sim_differ = 0, literal_differ = 0, optimized_differ = 0;
    double literal_worst = 0, optimized_worst = 0, largest = 0, sim_worst = 0;
    for (size_t k = 0; k < e.size(); ++k) {
      sim_differ += e[k] != s[k];
      sim_worst = std::max(sim_worst, std::fabs(double{s[k]} - e[k]));
      literal_differ += l[k] != e[k];
      optimized_differ += o[k] != e[k];
      literal_worst = std::max(literal_worst, std::fabs(double{l[k]} - e[k]));
      optimized_worst = std::max(optimized_worst, std::fabs(double{o[k]} - e[k]));
      largest = std::max(largest, std::fabs(double{e[k]}));
    }
    // The simulation runs the float model with the roundings as hooks, the export has them as Cast
    // pairs: the engine lays out and sums some convolutions differently in the two (on AVX2 CPUs;
    // with AVX-512's kernels they agree bit for bit), and a value near a rounding boundary of the
    // 16-bit type can round either way, as between ORT and the engine. So the simulation is held
    // to the export's run as closely as ORT is, or within one 16-bit step of the largest value.
    const double step16 = std::ldexp(largest, c.type == ir::DataType::BFloat16 ? -8 : -11);
    std::cout << c.label << " output " << i << ": the simulation differs from the export's run in " << sim_differ
              << " values (at most " << sim_worst << ")\n";
    EXPECT_LE(sim_worst, std::max({literal_worst, optimized_worst, step16}))
        << "output " << i << ": the engine's run of the export vs the simulation";
    std::cout << c.label << " output " << i << " (largest |value| " << largest << "): ORT literal differs from "
              << "onnxptq in " << literal_differ << " of " << e.size() << " values (at most " << literal_worst
              << "), ORT optimized in " << optimized_differ << " (at most " << optimized_worst << ")\n";
  }
  if (!HasFailure()) fs::remove_all(dir);
}

const nlohmann::json kScaled = {{"ActivationScaled", true}, {"WeightScaled", true}};

INSTANTIATE_TEST_SUITE_P(
    QuarkPresets, FloatCastVsOrt,
    ::testing::Values(
        FloatCastCase{"ppocr_det_fp16", kDet, "FP16", nlohmann::json::object(), ir::DataType::Float16},
        FloatCastCase{"ppocr_det_bf16", kDet, "BF16", nlohmann::json::object(), ir::DataType::BFloat16},
        FloatCastCase{"ppocr_det_bf16_scaled", kDet, "BF16", kScaled, ir::DataType::BFloat16},
        FloatCastCase{"mobilenet_v2_fp16", kMobilenet, "FP16", nlohmann::json::object(), ir::DataType::Float16},
        FloatCastCase{"mobilenet_v2_bf16", kMobilenet, "BF16", nlohmann::json::object(), ir::DataType::BFloat16},
        FloatCastCase{"mobilenet_v2_bf16_scaled", kMobilenet, "BF16", kScaled, ir::DataType::BFloat16}),
    [](const ::testing::TestParamInfo<FloatCastCase>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
