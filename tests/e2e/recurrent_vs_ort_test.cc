// LSTM, GRU and RNN against ONNX Runtime (npm onnxruntime-node): one-node models over the
// attributes of the ONNX operator specification (directions, activations with their alpha and
// beta, clip, sequence_lens, initial states, peepholes, input_forget, linear_before_reset, B
// left out, W and R fed or constant), and real exports of Debian's python3-torch
// (tests/models/export_recurrent.py): a bidirectional 2-layer LSTM tagger and a GRU speech model
// with a convolutional front-end, also quantized with the A8W8 and XINT8 presets. Every output
// must agree within 1e-4 of its range (max abs difference / (max - min)), the criterion of
// engine_vs_ort_test.cc. ONNX Runtime refuses layout 1 (batch first); the backend node tests
// test_*_batchwise hold the engine to ONNX's data there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "calib/data_reader.h"
#include "engine/kernel.h"
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
using testing::kSource;

// The engine's outputs of the model file against ORT's on `feeds`, each within 1e-4 of its range.
void expect_engine_matches_ort(const fs::path& file, const std::map<std::string, ir::Tensor>& feeds,
                               const fs::path& dir, const std::string& label) {
  ir::Model model = ir::load_model(file);
  std::vector<ir::Tensor> ort = testing::ort_run(file, model, feeds, dir);
  std::vector<ir::Tensor> own = testing::run_model(model, feeds);
  ASSERT_EQ(ort.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    ASSERT_EQ(ort[i].dims(), own[i].dims()) << label << " output " << i;
    double error = testing::range_relative_error(ort[i], own[i]);
    std::cout << label << " output " << model.graph->outputs()[i]->name() << ": max abs diff / range = " << error
              << "\n";
    EXPECT_LE(error, 1e-4) << label << " output " << i;
  }
}

// ---- one node

struct RecurrentCase {
  std::string label;
  std::string op;  // LSTM, GRU, RNN
  std::string direction = "forward";
  bool bias = true;
  bool initial = false;    // initial_h (and initial_c) fed
  bool lengths = false;    // sequence_lens of different lengths, one of them 0
  bool peepholes = false;  // LSTM's P
  bool constant = false;   // W, R, B and P initializers rather than fed
  int64_t linear_before_reset = 0;
  int64_t input_forget = 0;
  float clip = 0;
  std::vector<std::string> activations = {};
  std::vector<float> alpha = {}, beta = {};
};

constexpr int64_t kSeq = 7, kBatch = 3, kInput = 5, kHidden = 6;

ir::Tensor recurrent_random(std::vector<int64_t> dims, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& e : v) e = u(rng);
  return ir::Tensor::from_values<float>(std::move(dims), v);
}

// The one-node model of the case, and its feeds.
ir::Model recurrent_node_model(const RecurrentCase& c, std::map<std::string, ir::Tensor>& feeds) {
  const int64_t gates = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1, dirs = c.direction == "bidirectional" ? 2 : 1;
  std::mt19937 rng(11);
  ir::Model m;
  m.set_opset("", 14);
  ir::Graph& g = *m.graph;
  g.name = "recurrent_" + c.label;
  std::vector<ir::Value*> inputs;
  auto add = [&](const std::string& name, ir::Tensor t, bool constant) {
    ir::Value* v = g.add_value(name);
    if (constant) {
      g.set_initializer(v, std::move(t));
    } else {
      v->type = ir::ValueType::tensor(t.dtype(), t.dims());
      g.add_input(v);
      feeds[name] = std::move(t);
    }
    inputs.push_back(v);
  };
  add("X", recurrent_random({kSeq, kBatch, kInput}, rng, 1.5f), false);
  add("W", recurrent_random({dirs, gates * kHidden, kInput}, rng, 0.6f), c.constant);
  add("R", recurrent_random({dirs, gates * kHidden, kHidden}, rng, 0.6f), c.constant);
  if (c.bias)
    add("B", recurrent_random({dirs, 2 * gates * kHidden}, rng, 0.5f), c.constant);
  else
    inputs.push_back(nullptr);
  if (c.lengths)
    add("sequence_lens", ir::Tensor::from_values<int32_t>({kBatch}, std::vector<int32_t>{4, kSeq, 0}), false);
  else
    inputs.push_back(nullptr);
  if (c.initial)
    add("initial_h", recurrent_random({dirs, kBatch, kHidden}, rng, 0.8f), false);
  else
    inputs.push_back(nullptr);
  if (c.op == "LSTM") {
    if (c.initial)
      add("initial_c", recurrent_random({dirs, kBatch, kHidden}, rng, 0.8f), false);
    else
      inputs.push_back(nullptr);
    if (c.peepholes) add("P", recurrent_random({dirs, 3 * kHidden}, rng, 0.5f), c.constant);
  }
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  std::vector<ir::Value*> outputs;
  auto output = [&](const std::string& name, std::vector<int64_t> dims) {
    ir::Value* v = g.add_value(name);
    v->type = ir::ValueType::tensor(ir::DataType::Float, std::move(dims));
    outputs.push_back(v);
  };
  output("Y", {kSeq, dirs, kBatch, kHidden});
  output("Y_h", {dirs, kBatch, kHidden});
  if (c.op == "LSTM") output("Y_c", {dirs, kBatch, kHidden});
  ir::Node* n = g.add_node(c.op, inputs, outputs, "n0");
  n->set_attribute(ir::Attribute::of_int("hidden_size", kHidden));
  n->set_attribute(ir::Attribute::of_string("direction", c.direction));
  if (c.clip > 0) n->set_attribute(ir::Attribute::of_float("clip", c.clip));
  if (c.linear_before_reset) n->set_attribute(ir::Attribute::of_int("linear_before_reset", c.linear_before_reset));
  if (c.input_forget) n->set_attribute(ir::Attribute::of_int("input_forget", c.input_forget));
  if (!c.activations.empty()) {
    ir::Attribute a;
    a.name = "activations";
    a.type = ir::AttrType::Strings;
    a.strings = c.activations;
    n->set_attribute(std::move(a));
  }
  if (!c.alpha.empty()) n->set_attribute(ir::Attribute::of_floats("activation_alpha", c.alpha));
  if (!c.beta.empty()) n->set_attribute(ir::Attribute::of_floats("activation_beta", c.beta));
  for (ir::Value* v : outputs) g.add_output(v);
  return m;
}

class RecurrentNodeVsOrt : public ::testing::TestWithParam<RecurrentCase> {};

TEST_P(RecurrentNodeVsOrt, SameOutputs) {
  const RecurrentCase& c = GetParam();
  fs::path dir = testing::fresh_dir("recurrent_" + c.label);
  std::map<std::string, ir::Tensor> feeds;
  ir::Model model = recurrent_node_model(c, feeds);
  ir::save_model(model, dir / "model.onnx");
  expect_engine_matches_ort(dir / "model.onnx", feeds, dir / "ort", c.label);
  fs::remove_all(dir);
}

std::vector<RecurrentCase> recurrent_cases() {
  std::vector<RecurrentCase> v;
  auto add = [&](RecurrentCase c) { v.push_back(std::move(c)); };
  // LSTM
  add({.label = "lstm_forward", .op = "LSTM"});
  add({.label = "lstm_reverse_initial", .op = "LSTM", .direction = "reverse", .initial = true});
  add({.label = "lstm_bidirectional_all",
       .op = "LSTM",
       .direction = "bidirectional",
       .initial = true,
       .lengths = true,
       .peepholes = true});
  add({.label = "lstm_reverse_lengths_constant",
       .op = "LSTM",
       .direction = "reverse",
       .lengths = true,
       .peepholes = true,
       .constant = true});
  add({.label = "lstm_no_bias", .op = "LSTM", .direction = "bidirectional", .bias = false});
  add({.label = "lstm_clip", .op = "LSTM", .initial = true, .clip = 0.7f});
  add({.label = "lstm_input_forget", .op = "LSTM", .initial = true, .peepholes = true, .input_forget = 1});
  add({.label = "lstm_activations",
       .op = "LSTM",
       .direction = "bidirectional",
       .initial = true,
       .activations = {"HardSigmoid", "LeakyRelu", "ScaledTanh", "Sigmoid", "Affine", "Elu"},
       .alpha = {0.3f, 0.05f, 0.9f, 1.3f, 0.8f},
       .beta = {0.45f, 1.1f, -0.2f}});
  // GRU
  add({.label = "gru_forward", .op = "GRU"});
  add({.label = "gru_linear_before_reset", .op = "GRU", .initial = true, .linear_before_reset = 1});
  add({.label = "gru_bidirectional_lengths",
       .op = "GRU",
       .direction = "bidirectional",
       .initial = true,
       .lengths = true});
  add({.label = "gru_bidirectional_lbr_lengths_constant",
       .op = "GRU",
       .direction = "bidirectional",
       .lengths = true,
       .constant = true,
       .linear_before_reset = 1});
  add({.label = "gru_reverse_no_bias_clip",
       .op = "GRU",
       .direction = "reverse",
       .bias = false,
       .initial = true,
       .clip = 0.5f});
  add({.label = "gru_activations",
       .op = "GRU",
       .direction = "bidirectional",
       .activations = {"Softsign", "Softplus", "ThresholdedRelu", "Relu"},
       .alpha = {0.2f}});
  // RNN
  add({.label = "rnn_forward", .op = "RNN"});
  add({.label = "rnn_reverse_lengths", .op = "RNN", .direction = "reverse", .initial = true, .lengths = true});
  add({.label = "rnn_bidirectional_clip_constant",
       .op = "RNN",
       .direction = "bidirectional",
       .initial = true,
       .constant = true,
       .clip = 0.6f});
  add({.label = "rnn_activations",
       .op = "RNN",
       .direction = "bidirectional",
       .bias = false,
       .activations = {"Relu", "Sigmoid"}});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AttributesOfTheSpec, RecurrentNodeVsOrt, ::testing::ValuesIn(recurrent_cases()),
                         [](const auto& info) { return info.param.label; });

// ---- torch exports

// The model `name` of tests/models/export_recurrent.py written to `file`; false when it failed.
bool export_recurrent(const std::string& name, const fs::path& file) {
  std::string command = "/usr/bin/python3 " + (kSource / "tests/models/export_recurrent.py").string() + " " + name +
                        " " + file.string() + " > /dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

class RecurrentModelVsOrt : public ::testing::TestWithParam<std::string> {};

TEST_P(RecurrentModelVsOrt, SameOutputs) {
  const std::string& name = GetParam();
  fs::path dir = testing::fresh_dir("recurrent_model_" + name);
  fs::path file = dir / (name + ".onnx");
  ASSERT_TRUE(export_recurrent(name, file)) << name;
  ir::Model model = ir::load_model(file);
  // The recurrent layers are ONNX nodes of their own, and every op of the export has a kernel.
  const std::string op = name == "lstm_tagger" ? "LSTM" : "GRU";
  EXPECT_EQ(testing::count_ops(model, op), name == "lstm_tagger" ? 2u : 1u);
  for (const auto& n : model.graph->nodes())
    EXPECT_NE(engine::KernelRegistry::instance().find(n->domain, n->op_type, model.opset(n->domain)), nullptr)
        << n->op_type;
  for (uint32_t seed : {7u, 8u})
    expect_engine_matches_ort(file, testing::random_feeds(model, seed), dir / ("ort" + std::to_string(seed)), name);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(TorchExports, RecurrentModelVsOrt, ::testing::Values("lstm_tagger", "gru_speech"));

// A preset with the recurrent ops named in extra_op_types_to_quantize: W and R of every LSTM / GRU
// are int8 weights (QDQ on the weight inputs; per tensor, or per gate row with per_channel), and
// ONNX Runtime runs the written model as the engine's simulation of the plan computes it: every
// quantized tensor within one step of ORT's given ORT's inputs, and the outputs within 1e-4 of
// their range. A8W8: float scales, int8 activations; XINT8 (Quark's NPU CNN path, enable_dpu):
// power-of-two scales, uint8 activations.
struct RecurrentQuantCase {
  std::string name;  // of export_recurrent.py
  bool per_channel;
};

void expect_recurrent_quantized_as_simulated(const RecurrentQuantCase& c, const std::string& preset) {
  const std::string& name = c.name;
  fs::path dir = testing::fresh_dir("recurrent_" + preset + "_" + name + (c.per_channel ? "_pc" : ""));
  ASSERT_TRUE(export_recurrent(name, dir / "float.onnx")) << name;
  ir::Model model = ir::load_model(dir / "float.onnx");
  quant::QuantConfig config;
  quant::apply_preset(config, preset);
  config.extra_op_types_to_quantize = {"LSTM", "GRU"};
  config.per_channel = c.per_channel;
  config.calib.threads = 2;
  quant::check_config(config);
  calib::RandomReaderOptions ro;
  ro.count = 8;
  ro.seed = 3;  // the compared runs use seeds 7 and 8
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  quant::QuantizeResult r = quant::quantize_static(model, *reader, config);
  const ir::Model& prepared = r.prepared ? *r.prepared : model;

  // XINT8's scales are powers of two (the NPU's shifts).
  auto expect_power_of_two = [&](const quant::TensorPlan& t) {
    if (preset != "XINT8") return;
    for (const qmath::ScaleZeroPoint& p : t.params)
      EXPECT_EQ(std::exp2(std::round(std::log2(p.scale))), p.scale) << t.name;
  };
  const std::string op = name == "lstm_tagger" ? "LSTM" : "GRU";
  size_t recurrent = 0;
  for (const auto& n : prepared.graph->nodes()) {
    if (n->op_type != op) continue;
    ++recurrent;
    EXPECT_TRUE(std::count(r.plan.quantized_nodes.begin(), r.plan.quantized_nodes.end(), n->name)) << n->name;
    for (size_t i : {1, 2}) {
      const quant::TensorPlan* t = r.plan.find(n->input(i)->name());
      ASSERT_NE(t, nullptr) << n->name << " input " << i;
      EXPECT_EQ(t->role, quant::Role::Weight) << t->name;
      EXPECT_EQ(t->type, ir::DataType::Int8) << t->name;
      EXPECT_EQ(t->axis, c.per_channel ? std::optional<int64_t>(1) : std::nullopt) << t->name;
      expect_power_of_two(*t);
    }
    const quant::TensorPlan* x = r.plan.find(n->input(0)->name());
    ASSERT_NE(x, nullptr) << n->name << " X";
    const quant::TensorPlan& xp = r.plan.provider(x->name);
    EXPECT_EQ(xp.type, preset == "XINT8" ? ir::DataType::UInt8 : ir::DataType::Int8) << x->name;
    expect_power_of_two(xp);
    const ir::Value* b = n->input(3);
    EXPECT_TRUE(!b || !r.plan.find(b->name())) << "B stays float";
  }
  EXPECT_EQ(recurrent, name == "lstm_tagger" ? 2u : 1u);

  ir::save_model(r.model, dir / "q.onnx");
  ir::Model q = ir::load_model(dir / "q.onnx");
  size_t dequantized_weights = 0;  // W and R of the written recurrent nodes read from DequantizeLinear
  for (const auto& n : q.graph->nodes())
    if (n->op_type == op)
      for (size_t i : {1, 2})
        dequantized_weights += n->input(i)->producer() && n->input(i)->producer()->op_type == "DequantizeLinear";
  EXPECT_EQ(dequantized_weights, 2 * recurrent);

  quant::Simulation simulation(prepared, r.plan, config, 2);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    fs::path ort_dir = dir / ("ort" + std::to_string(seed));
    testing::LayerwiseAgreement layers = testing::agree_layer_by_layer(dir / "q.onnx", feeds, ort_dir);
    EXPECT_EQ(layers.compared, layers.quantized);
    EXPECT_LE(layers.worst, 1.0) << layers.worst_tensor;
    std::vector<ir::Tensor> simulated = simulation.run(feeds);
    ASSERT_EQ(simulated.size(), layers.ort_outputs.size());
    for (size_t i = 0; i < simulated.size(); ++i) {
      double error = testing::range_relative_error(layers.ort_outputs[i], simulated[i]);
      std::cout << name << " " << preset << " seed " << seed << ": " << layers.quantized
                << " quantized tensors, worst layer " << layers.worst << " steps; output " << i
                << " simulation vs ORT max abs diff / range = " << error << "\n";
      EXPECT_LE(error, 1e-4) << name << " output " << i;
    }
  }
  fs::remove_all(dir);
}

class RecurrentA8W8VsOrt : public ::testing::TestWithParam<RecurrentQuantCase> {};

TEST_P(RecurrentA8W8VsOrt, WeightsQuantizedAndOrtRunsItAsTheSimulation) {
  expect_recurrent_quantized_as_simulated(GetParam(), "A8W8");
}

INSTANTIATE_TEST_SUITE_P(
    TorchExports, RecurrentA8W8VsOrt,
    ::testing::Values(RecurrentQuantCase{"lstm_tagger", false}, RecurrentQuantCase{"gru_speech", false},
                      RecurrentQuantCase{"lstm_tagger", true}, RecurrentQuantCase{"gru_speech", true}),
    [](const auto& info) { return info.param.name + (info.param.per_channel ? "_per_channel" : ""); });

class RecurrentXint8VsOrt : public ::testing::TestWithParam<RecurrentQuantCase> {};

TEST_P(RecurrentXint8VsOrt, PowerOfTwoWeightsAndOrtRunsItAsTheSimulation) {
  expect_recurrent_quantized_as_simulated(GetParam(), "XINT8");
}

INSTANTIATE_TEST_SUITE_P(TorchExports, RecurrentXint8VsOrt,
                         ::testing::Values(RecurrentQuantCase{"lstm_tagger", false},
                                           RecurrentQuantCase{"gru_speech", false}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace onnxptq
