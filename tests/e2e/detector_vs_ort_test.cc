// A real detection model with NonMaxSuppression inside against ONNX Runtime (npm
// onnxruntime-node): the tiny RetinaNet-style detector of tests/models/export_detector.py, exported
// by Debian's python3-torch and python3-torchvision (the export_detector_model test writes it),
// whose torchvision.ops.batched_nms is an ONNX NonMaxSuppression between TopK and the Gathers of
// the kept boxes. The NMS node's selected indices are made a graph output too, so that the
// selection itself is compared. Float: the engine's outputs against ORT's, boxes and scores within
// 1e-4 of their range (engine_vs_ort_test.cc's criterion), the selected indices, labels and anchor
// indices exactly. Quantized with the A8W8 and XINT8 presets: the Convs read quantized inputs and
// weights, and ORT running the written model agrees with the engine's simulation of the plan,
// layer by layer and on the outputs, the selection exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "calib/data_reader.h"
#include "engine/kernel.h"
#include "engine/session.h"
#include "ir/model.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/model_run.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

const fs::path kDetector = testing::kModels / "nms_detector.onnx";
constexpr int64_t kCandidates = 160;  // the boxes TopK hands to NonMaxSuppression (export_detector.py)

// The detector with the output of its one NonMaxSuppression, [selected, 3] int64, as a graph
// output too (the last).
ir::Model detector_with_selection() {
  ir::Model model = ir::load_model(kDetector);
  const ir::Node* nms = nullptr;
  for (const auto& n : model.graph->nodes())
    if (n->op_type == "NonMaxSuppression") {
      EXPECT_EQ(nms, nullptr) << "one NonMaxSuppression";
      nms = n.get();
    }
  if (!nms) {
    ADD_FAILURE() << "no NonMaxSuppression in " << kDetector;
    return model;
  }
  nms->output(0)->type = ir::ValueType::tensor(ir::DataType::Int64);
  model.graph->add_output(nms->output(0));
  return model;
}

// Each output of `got` against `expected`: float outputs within 1e-4 of their range, integer
// ones exactly; both with the same dims. Returns the number of boxes NMS selected (the last output).
int64_t expect_detections_equal(const ir::Model& model, const std::vector<ir::Tensor>& expected,
                                const std::vector<ir::Tensor>& got, const std::string& label) {
  EXPECT_EQ(expected.size(), got.size()) << label;
  for (size_t i = 0; i < std::min(expected.size(), got.size()); ++i) {
    const std::string& name = model.graph->outputs()[i]->name();
    EXPECT_EQ(expected[i].dtype(), got[i].dtype()) << label << " " << name;
    if (expected[i].dims() != got[i].dims()) {
      ADD_FAILURE() << label << " " << name << ": " << ir::dims_to_string(expected[i].dims()) << " against "
                    << ir::dims_to_string(got[i].dims());
      continue;
    }
    if (expected[i].dtype() == ir::DataType::Float) {
      double error = testing::range_relative_error(expected[i], got[i]);
      std::cout << label << " " << name << " " << ir::dims_to_string(got[i].dims())
                << ": max abs diff / range = " << error << "\n";
      EXPECT_LE(error, 1e-4) << label << " " << name;
    } else {
      if (got[i].dtype() != ir::DataType::Int64) {
        ADD_FAILURE() << label << " " << name << " is neither float nor int64";
        continue;
      }
      auto e = expected[i].values<int64_t>(), g = got[i].values<int64_t>();
      size_t differ = 0;
      for (size_t k = 0; k < e.size(); ++k) differ += e[k] != g[k];
      std::cout << label << " " << name << " " << ir::dims_to_string(got[i].dims()) << ": " << differ
                << " integers differ\n";
      EXPECT_EQ(differ, 0u) << label << " " << name;
    }
  }
  return got.empty() ? 0 : got.back().dims().at(0);
}

// NMS selects among the candidates: it suppresses at least a tenth of them and keeps at least a
// quarter, so that both the kept and the suppressed boxes decide the outputs.
void expect_selection_exercised(int64_t selected, const std::string& label) {
  std::cout << label << ": NonMaxSuppression kept " << selected << " of " << kCandidates << " boxes\n";
  EXPECT_GE(selected, kCandidates / 4) << label;
  EXPECT_LE(selected, kCandidates * 9 / 10) << label;
}

TEST(DetectorVsOrt, EngineSelectsTheSameBoxesAsOrt) {
  ASSERT_TRUE(fs::exists(kDetector)) << kDetector << ": the export_detector_model test writes it";
  ir::Model model = detector_with_selection();
  // The export's NMS and its neighbours, and a kernel for every op.
  for (const char* op : {"NonMaxSuppression", "TopK", "Sigmoid", "ArgMax"})
    EXPECT_EQ(testing::count_ops(model, op), 1u) << op;
  EXPECT_EQ(testing::count_ops(model, "Exp"), 2u);  // the widths' and heights' deltas
  EXPECT_EQ(testing::count_ops(model, "Conv"), 5u);
  for (const auto& n : model.graph->nodes())
    EXPECT_NE(engine::KernelRegistry::instance().find(n->domain, n->op_type, model.opset(n->domain)), nullptr)
        << n->op_type;
  fs::path dir = testing::fresh_dir("detector_float");
  ir::save_model(model, dir / "model.onnx");
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    const std::string label = "float seed " + std::to_string(seed);
    std::vector<ir::Tensor> ort =
        testing::ort_run(dir / "model.onnx", model, feeds, dir / ("ort" + std::to_string(seed)));
    int64_t selected = expect_detections_equal(model, ort, testing::run_model(model, feeds), label);
    expect_selection_exercised(selected, label);
  }
  fs::remove_all(dir);
}

// The nodes of `op` whose inputs `inputs` are all read from a DequantizeLinear (any domain).
size_t dequantized_readers(const ir::Model& model, const std::string& op, std::initializer_list<size_t> inputs) {
  size_t count = 0;
  for (const auto& n : model.graph->nodes()) {
    if (n->op_type != op) continue;
    bool all = true;
    for (size_t i : inputs) {
      const ir::Value* v = n->input(i);
      all = all && v && v->producer() && v->producer()->op_type == "DequantizeLinear";
    }
    count += all;
  }
  return count;
}

class DetectorQuantizedVsOrt : public ::testing::TestWithParam<std::string> {};

TEST_P(DetectorQuantizedVsOrt, ConvsQuantizedAndOrtSelectsAsTheSimulation) {
  const std::string& preset = GetParam();
  ASSERT_TRUE(fs::exists(kDetector)) << kDetector << ": the export_detector_model test writes it";
  ir::Model model = detector_with_selection();
  fs::path dir = testing::fresh_dir("detector_" + preset);
  quant::QuantConfig config;
  quant::apply_preset(config, preset);
  config.calib.threads = 2;
  quant::check_config(config);
  calib::RandomReaderOptions ro;
  ro.count = 16;
  ro.seed = 3;  // the compared runs use seeds 7 and 8, with values in the same range
  ro.ranges["image"] = {-1.5, 1.5};
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  quant::QuantizeResult r = quant::quantize_static(model, *reader, config);
  const ir::Model& prepared = r.prepared ? *r.prepared : model;

  // Every Conv quantized: its input and its result activations, its weight int8 (a power of two
  // scale with XINT8's enable_dpu). XINT8 quantizes a Conv's result after the Relu that follows it
  // (vai_q_onnx's enable_dpu removes the QDQ pair between a Conv and its activation); A8W8 after
  // the Conv itself.
  size_t convs = 0;
  for (const auto& n : prepared.graph->nodes()) {
    if (n->op_type != "Conv") continue;
    ++convs;
    EXPECT_TRUE(std::count(r.plan.quantized_nodes.begin(), r.plan.quantized_nodes.end(), n->name)) << n->name;
    const quant::TensorPlan* w = r.plan.find(n->input(1)->name());
    ASSERT_NE(w, nullptr) << n->name;
    EXPECT_EQ(w->role, quant::Role::Weight) << w->name;
    EXPECT_EQ(w->type, ir::DataType::Int8) << w->name;
    if (preset == "XINT8") {
      for (const qmath::ScaleZeroPoint& p : w->params)
        EXPECT_EQ(std::exp2(std::round(std::log2(p.scale))), p.scale) << w->name;
    }
    const ir::Value* result = n->output(0);
    const bool relu = result->uses().size() == 1 && result->uses()[0].node->op_type == "Relu";
    if (config.enable_dpu && relu) {
      EXPECT_EQ(r.plan.find(result->name()), nullptr) << result->name();
      result = result->uses()[0].node->output(0);
    }
    for (const ir::Value* v : {static_cast<const ir::Value*>(n->input(0)), result}) {
      const quant::TensorPlan* t = r.plan.find(v->name());
      EXPECT_TRUE(t && t->role == quant::Role::Activation) << v->name();
    }
  }
  EXPECT_EQ(convs, 5u);

  ir::save_model(r.model, dir / "q.onnx");
  ir::Model q = ir::load_model(dir / "q.onnx");
  // In the written model each Conv reads its input, weight and bias from a DequantizeLinear, and
  // the NMS its boxes and scores (the Add of batched_nms's class offsets and the Unsqueeze of the
  // scores are quantized ops).
  EXPECT_EQ(dequantized_readers(q, "Conv", {0, 1, 2}), convs);
  EXPECT_EQ(dequantized_readers(q, "NonMaxSuppression", {0, 1}), 1u);

  // The scores NMS reads, as the simulation quantizes them: few distinct values, so NMS orders
  // many equal scores (lower box index first, in the ONNX operator docs' greedy selection and in
  // ORT alike) and the ties decide which boxes suppress which.
  std::string nms_scores;
  for (const auto& n : prepared.graph->nodes())
    if (n->op_type == "NonMaxSuppression") nms_scores = n->input(1)->name();
  ASSERT_NE(r.plan.find(nms_scores), nullptr) << nms_scores;
  size_t distinct_scores = 0;
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) {
    if (name != nms_scores) return;
    std::vector<float> v(t.values<float>().begin(), t.values<float>().end());
    std::sort(v.begin(), v.end());
    distinct_scores = static_cast<size_t>(std::unique(v.begin(), v.end()) - v.begin());
  };

  // ORT runs the written model literally (graph optimizations off), as the other tests holding it
  // to the simulation do: its fused QLinearConv on x86 without VNNI multiplies uint8 by int8 with
  // VPMADDUBSW, whose int16 pair sums saturate (ONNX Runtime's quantization docs, reduce_range).
  quant::Simulation simulation(prepared, r.plan, config, 2);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    const std::string label = preset + " seed " + std::to_string(seed);
    testing::LayerwiseAgreement layers =
        testing::agree_layer_by_layer(dir / "q.onnx", feeds, dir / ("ort" + std::to_string(seed)));
    std::cout << label << ": " << layers.quantized << " quantized tensors, worst layer " << layers.worst << " steps ("
              << layers.worst_tensor << ")\n";
    EXPECT_EQ(layers.compared, layers.quantized) << label;
    EXPECT_EQ(layers.worst, 0.0) << label << " " << layers.worst_tensor;
    distinct_scores = 0;
    std::vector<ir::Tensor> simulated = simulation.run(feeds, &observe);
    int64_t selected = expect_detections_equal(q, layers.ort_outputs, simulated, label + " simulation vs ORT");
    expect_selection_exercised(selected, label);
    std::cout << label << ": the " << kCandidates << " scores NMS reads take " << distinct_scores << " values\n";
    EXPECT_GT(distinct_scores, 1u) << label;
    EXPECT_LE(distinct_scores, static_cast<size_t>(kCandidates / 2)) << label;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Presets, DetectorQuantizedVsOrt, ::testing::Values("A8W8", "XINT8"));

}  // namespace
}  // namespace onnxptq
