// Quantized models that onnxptq writes, run by ONNX Runtime (npm onnxruntime-node) and by the
// engine on the same inputs: ORT must load every one, and each output must agree within one
// quantization step of that output (its DequantizeLinear scale). Real models nobody here wrote:
// torchvision exports with U8S8 and power-of-two int8 (the seeds' default).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/session.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "quant/quantize.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = ONNXPTQ_SOURCE_DIR;
const fs::path kModels = ONNXPTQ_MODELS_DIR;

struct Case {
  std::string label;
  fs::path model;
  const char* config;  // u8s8, pof2
};

quant::QuantConfig config_of(const std::string& name) {
  quant::QuantConfig c;
  c.calib.threads = 2;
  if (name == "u8s8") {
    c.calibrate_method = calib::Method::MinMax;
    c.activation_type = ir::DataType::UInt8;
  } else {  // pof2: the seeds' default, MinMSE power-of-two int8
    c.calibrate_method = calib::Method::MinMSE;
  }
  return c;
}

class QuantizeVsOrt : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeVsOrt, OrtRunsItAndAgreesWithinOneStep) {
  const Case& c = GetParam();
  ASSERT_TRUE(fs::exists(c.model)) << c.model;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_q_vs_ort_" + std::to_string(getpid()) + "_" + c.label);
  fs::remove_all(dir);
  fs::create_directories(dir);

  ir::Model model = ir::load_model(c.model);
  calib::RandomReaderOptions ro;
  ro.count = 6;
  ro.seed = 3;  // the compared run uses seed 7: not a calibration sample
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  quant::QuantConfig config = config_of(c.config);
  quant::QuantizeResult q = quant::quantize_static(model, *reader, config);
  fs::path quantized = dir / "q.onnx";
  ir::save_model(q.model, quantized);

  std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " + quantized.string() +
                        " --random 7 --threads 2 --outputs " + dir.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  ir::Model reloaded = ir::load_model(quantized);
  engine::Session session(reloaded);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : session.inputs()) feeds[v->name()] = ir::load_npy(dir / "inputs" / (v->name() + ".npy"));
  std::vector<ir::Tensor> outputs = session.run(feeds);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = session.outputs()[i]->name();
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');
    std::replace(file.begin(), file.end(), ':', '_');
    ir::Tensor expected = ir::load_npy(dir / (file + ".npy"));
    ASSERT_EQ(expected.dims(), outputs[i].dims()) << name;
    const quant::TensorPlan* t = q.plan.find(name);
    ASSERT_TRUE(t && !q.plan.provider(name).params.empty()) << "output " << name << " is not quantized";
    double step = q.plan.provider(name).params[0].scale;
    auto e = expected.values<float>();
    auto g = outputs[i].values<float>();
    double worst = 0;
    size_t off_by_one = 0;
    for (size_t k = 0; k < e.size(); ++k) {
      double d = std::fabs(static_cast<double>(e[k]) - g[k]);
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
      off_by_one += d > step * 0.5;
    }
    std::cout << c.label << " output " << name << ": max |ORT - onnxptq| = " << worst / step << " steps, " << off_by_one
              << " of " << e.size() << " values differ\n";
    EXPECT_LE(worst, step * 1.001) << name;
  }
  if (!HasFailure()) fs::remove_all(dir);  // kept for a look otherwise
}

// The combinations that agree today. Not yet here (issue 5 notes): PP-OCR rec and cls (opset 9:
// QDQ needs the opset upgrade of the preparation passes), PP-OCR det (its Sigmoid output
// disagrees by whole ranges on some values), S8S8 per-channel (2 steps on resnet18, 160 on
// mobilenet_v2) and A16W8 (1.002 steps: ORT's fused float output is off the grid).
std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char* config : {"u8s8", "pof2"})
    for (const char* model : {"resnet18", "mobilenet_v2"})
      all.push_back({std::string(model) + "_" + config, kModels / (std::string(model) + ".onnx"), config});
  return all;
}

INSTANTIATE_TEST_SUITE_P(RealModels, QuantizeVsOrt, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
