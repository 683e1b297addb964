// Quark's ExtendedLSTM (com.amd.quark) on the LSTMs of a real model, the torch LSTM tagger of
// tests/models/export_recurrent.py (two bidirectional layers, hidden 32): each LSTM put between
// uint16 Q/DQ nodes (parameters from the ranges of its float values, worked out here), converted by
// lstm_to_customlstm (Quark's convert_lstm_to_customlstm), and run by the engine on the LSTM's own
// input in the float model, one batch entry at a time (Quark's kernel computes batch 1). Its output
// must be within 1 step of Y's grid of the float ONNX LSTM's on the same inputs (the model before
// conversion: the LSTM on the dequantized X, W, R, B, which the engine holds to ONNX Runtime in
// recurrent_vs_ort_test.cc), and within 2 where Y's zero point is below 32768: Quark's kernel then
// holds h's zero point one code too high (recurrent_extended.cc), so its outputs sit a code higher.
// (The 16-bit fixed-point multipliers of the gate sums, relative error up to 2^-15, and h rounded
// to the grid at each step account for the other code.) Also the tool's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

#include "ir/model.h"
#include "quant/config_keys.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/model_run.h"
#include "support/one_node.h"
#include "support/test_paths.h"
#include "tools/convert.h"

namespace onnxptq {
// A named namespace: the unity build puts several test files in one translation unit.
namespace extended_lstm_e2e_test {

namespace fs = std::filesystem;
using testing::kSource;

bool export_tagger(const fs::path& file, const std::string& name = "lstm_tagger") {
  std::string command = "/usr/bin/python3 " + (kSource / "tests/models/export_recurrent.py").string() + " " + name +
                        " " + file.string() + " > /dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// uint16 asymmetric parameters over [min(lo, 0), max(hi, 0)], as a quantizer would choose them.
struct U16 {
  float scale;
  int64_t zp;
};

U16 u16_params(const ir::Tensor& t) {
  auto v = t.values<float>();
  float lo = std::min(0.0f, *std::min_element(v.begin(), v.end()));
  float hi = std::max(0.0f, *std::max_element(v.begin(), v.end()));
  float scale = (hi - lo) / 65535.0f;
  int64_t zp = std::clamp<int64_t>(std::llround(-lo / scale), 0, 65535);
  return {scale, zp};
}

ir::Tensor scalar_float(float v) { return ir::Tensor::from_values<float>({}, std::vector<float>{v}); }
ir::Tensor scalar_u16(int64_t v) {
  return ir::Tensor::from_values<uint16_t>({}, std::vector<uint16_t>{static_cast<uint16_t>(v)});
}

// The codes of t on the grid p (round half to even, saturated), as doubles.
std::vector<double> grid_codes(const ir::Tensor& t, U16 p) {
  std::vector<double> out;
  for (float f : t.values<float>())
    out.push_back(
        std::clamp(std::nearbyint(static_cast<double>(f / p.scale)) + static_cast<double>(p.zp), 0.0, 65535.0));
  return out;
}

// A model of one LSTM (bidirectional, hidden H) over X [seq, 1, I] with constant W, R, B, each of
// X, W, R, B and Y between uint16 QuantizeLinear / DequantizeLinear (W, R, B stored as uint16).
ir::Model qdq_lstm_model(int64_t seq, int64_t input, int64_t hidden, const ir::Tensor& W, const ir::Tensor& R,
                         const ir::Tensor& B, U16 px, U16 pw, U16 pr, U16 pb, U16 py) {
  ir::Model m;
  m.set_opset("", 14);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("X");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {seq, 1, input});
  g.add_input(x);
  auto params = [&](const std::string& name, U16 p) {
    ir::Value* s = g.add_value(name + "_scale");
    g.set_initializer(s, scalar_float(p.scale));
    ir::Value* z = g.add_value(name + "_zero_point");
    g.set_initializer(z, scalar_u16(p.zp));
    return std::pair{s, z};
  };
  auto qdq = [&](ir::Value* v, const std::string& name, U16 p) {
    auto [s, z] = params(name, p);
    ir::Value* q = g.add_value(name + "_q");
    ir::Value* dq = g.add_value(name + "_dq");
    g.add_node("QuantizeLinear", {v, s, z}, {q}, name + "_Q");
    g.add_node("DequantizeLinear", {q, s, z}, {dq}, name + "_DQ");
    return dq;
  };
  auto weight = [&](const ir::Tensor& t, const std::string& name, U16 p) {
    auto [s, z] = params(name, p);
    std::vector<uint16_t> codes;
    for (float f : t.values<float>())
      codes.push_back(static_cast<uint16_t>(
          std::clamp(std::nearbyint(static_cast<double>(f / p.scale)) + static_cast<double>(p.zp), 0.0, 65535.0)));
    ir::Value* q = g.add_value(name + "_quantized");
    g.set_initializer(q, ir::Tensor::from_values<uint16_t>(t.dims(), codes));
    ir::Value* dq = g.add_value(name + "_dq");
    g.add_node("DequantizeLinear", {q, s, z}, {dq}, name + "_DQ");
    return dq;
  };
  ir::Value* xd = qdq(x, "X", px);
  ir::Value* wd = weight(W, "W", pw);
  ir::Value* rd = weight(R, "R", pr);
  ir::Value* bd = weight(B, "B", pb);
  ir::Value* y = g.add_value("Y");
  ir::Value* yh = g.add_value("Y_h");
  ir::Node* lstm = g.add_node("LSTM", {xd, wd, rd, bd}, {y, yh}, "lstm");
  lstm->set_attribute(ir::Attribute::of_string("direction", "bidirectional"));
  lstm->set_attribute(ir::Attribute::of_int("hidden_size", hidden));
  ir::Value* out = qdq(y, "Y", py);
  out->type = ir::ValueType::tensor(ir::DataType::Float, {seq, 2, 1, hidden});
  g.add_output(out);
  return m;
}

ir::Tensor batch_entry(const ir::Tensor& x, int64_t b) {
  const int64_t seq = x.dims()[0], batch = x.dims()[1], n = x.dims()[2];
  auto v = x.values<float>();
  std::vector<float> out;
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t j = 0; j < n; ++j) out.push_back(v[static_cast<size_t>((t * batch + b) * n + j)]);
  return ir::Tensor::from_values<float>({seq, 1, n}, out);
}

TEST(ExtendedLstm, TaggerLstmsWithinOneCodeOfTheFloatLstm) {
  fs::path dir = testing::fresh_dir("extended_lstm_tagger");
  ASSERT_TRUE(export_tagger(dir / "tagger.onnx"));
  ir::Model model = ir::load_model(dir / "tagger.onnx");
  // Each LSTM's input and output in the float model, made graph outputs to be read.
  ir::Model probe = ir::clone_model(model);
  std::vector<const ir::Node*> lstms;
  for (const auto& n : probe.graph->nodes())
    if (n->op_type == "LSTM") lstms.push_back(n.get());
  ASSERT_EQ(lstms.size(), 2u);
  const size_t first_probe = probe.graph->outputs().size();
  for (const ir::Node* n : lstms) {
    probe.graph->add_output(n->input(0));
    probe.graph->add_output(n->output(0));
  }
  std::vector<ir::Tensor> values = testing::run_model(probe, testing::random_feeds(model, 11));

  size_t compared = 0;
  for (size_t k = 0; k < lstms.size(); ++k) {
    const ir::Node& n = *lstms[k];
    ASSERT_EQ(n.attr_string("direction", ""), "bidirectional");
    const int64_t hidden = n.attr_int("hidden_size", 0);
    const ir::Tensor& X = values[first_probe + 2 * k];
    const ir::Tensor& Y = values[first_probe + 2 * k + 1];
    const ir::Tensor& W = n.input(1)->initializer();
    const ir::Tensor& R = n.input(2)->initializer();
    const ir::Tensor& B = n.input(3)->initializer();
    // Y's range widened by 1/64 on each side, a margin such as calibrating on other samples leaves:
    // an h past the grid's top would wrap to its bottom in Quark's kernel (and with a zero point
    // below 32768, h's codes are one higher, so the observed maximum itself would wrap).
    const U16 px = u16_params(X), pw = u16_params(W), pr = u16_params(R), pb = u16_params(B);
    U16 py;
    {
      auto v = Y.values<float>();
      const float lo = std::min(0.0f, *std::min_element(v.begin(), v.end()));
      const float hi = std::max(0.0f, *std::max_element(v.begin(), v.end()));
      const float margin = (hi - lo) / 64;
      ir::Tensor widened = ir::Tensor::from_values<float>({2}, std::vector<float>{lo - margin, hi + margin});
      py = u16_params(widened);
    }
    const int64_t seq = X.dims()[0], input = X.dims()[2];
    ir::Model qdq = qdq_lstm_model(seq, input, hidden, W, R, B, px, pw, pr, pb, py);
    ConvertResult result;
    ir::Model converted = tools::lstm_to_customlstm(qdq, result);
    EXPECT_EQ(result.changed, 1u);
    EXPECT_EQ(testing::count_ops(converted, "LSTM"), 0u);
    ASSERT_EQ(testing::count_ops(converted, "ExtendedLSTM"), 1u);
    // The attributes are the Q/DQ parameters, as Quark's tool copies them.
    for (const auto& node : converted.graph->nodes()) {
      if (node->op_type != "ExtendedLSTM") continue;
      EXPECT_EQ(node->domain, "com.amd.quark");
      EXPECT_EQ(node->attr_float("x_scale", 0), px.scale);
      EXPECT_EQ(node->attr_int("x_zero_point", -1), px.zp);
      EXPECT_EQ(node->attr_float("y_scale", 0), py.scale);
      EXPECT_EQ(node->attr_int("y_zero_point", -1), py.zp);
      EXPECT_EQ(node->attr_float("b_scale", 0), pb.scale);
      EXPECT_EQ(node->attr_int("hidden_size", 0), hidden);
      EXPECT_EQ(node->outputs().size(), 1u) << "Y_h, unread, is dropped";
    }
    EXPECT_EQ(converted.opset("com.amd.quark"), 1);
    const double tolerance = py.zp < 32768 ? 2 : 1;
    for (int64_t b = 0; b < X.dims()[1]; ++b) {
      ir::Tensor xb = batch_entry(X, b);
      std::vector<ir::Tensor> ext = testing::run_model(converted, {{"X", xb}});
      ASSERT_EQ(ext[0].dims(), (std::vector<int64_t>{seq, 2, 1, hidden}));
      // The float ONNX LSTM on the same inputs: the model before conversion, whose LSTM reads the
      // dequantized X, W, R, B, its Y then rounded to Y's grid.
      std::vector<ir::Tensor> flt = testing::run_model(qdq, {{"X", xb}});
      std::vector<double> a = grid_codes(ext[0], py), e = grid_codes(flt[0], py);
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - e[i]));
      std::cout << "LSTM " << n.name << " batch entry " << b << ": Y zero point " << py.zp << ", worst " << worst
                << " codes\n";
      EXPECT_LE(worst, tolerance) << n.name << " batch entry " << b;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6u);
  fs::remove_all(dir);
}

// ---- the tool's refusals, each one line naming the LSTM

ir::Model refusal_model(std::function<void(ir::Model&)> change) {
  std::vector<float> w(2 * 8 * 3, 0.1f), r(2 * 8 * 2, 0.1f), bias(2 * 16, 0.1f);
  ir::Model m =
      qdq_lstm_model(4, 3, 2, ir::Tensor::from_values<float>({2, 8, 3}, w),
                     ir::Tensor::from_values<float>({2, 8, 2}, r), ir::Tensor::from_values<float>({2, 16}, bias),
                     {1e-4f, 32768}, {1e-5f, 32768}, {1e-5f, 32768}, {1e-5f, 32768}, {3e-5f, 32768});
  change(m);
  return m;
}

ir::Node* lstm_of(ir::Model& m) {
  for (const auto& n : m.graph->nodes())
    if (n->op_type == "LSTM") return n.get();
  return nullptr;
}

std::string tool_error(const ir::Model& m) {
  return testing::error_of([&] {
    ConvertResult r;
    tools::lstm_to_customlstm(m, r);
  });
}

TEST(ExtendedLstm, ToolRefusesWhatQuarksOpCannotCompute) {
  EXPECT_EQ(tool_error(refusal_model([](ir::Model&) {})), "");
  auto with_attr = [](ir::Attribute a) {
    return refusal_model([&](ir::Model& m) { lstm_of(m)->set_attribute(std::move(a)); });
  };
  EXPECT_NE(tool_error(with_attr(ir::Attribute::of_string("direction", "forward")))
                .find("LSTM 'lstm' has direction forward: Quark's ExtendedLSTM computes bidirectional only"),
            std::string::npos);
  EXPECT_NE(tool_error(with_attr(ir::Attribute::of_float("clip", 3))).find("LSTM 'lstm' has clip"), std::string::npos);
  EXPECT_NE(tool_error(with_attr(ir::Attribute::of_int("input_forget", 1))).find("input_forget"), std::string::npos);
  ir::Attribute act;
  act.name = "activations";
  act.type = ir::AttrType::Strings;
  act.strings = {"Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Tanh", "Tanh"};
  EXPECT_NE(tool_error(with_attr(std::move(act))).find("has activation HardSigmoid (#3)"), std::string::npos);
  // Y_h read by a graph output.
  EXPECT_NE(tool_error(refusal_model([](ir::Model& m) {
              m.graph->add_output(lstm_of(m)->output(1));
            })).find("output Y_h (Y_h) is read"),
            std::string::npos);
  // X not dequantized: the float model.
  EXPECT_NE(tool_error(refusal_model([](ir::Model& m) {
              ir::Node* l = lstm_of(m);
              m.graph->set_node_input(l, 0, m.graph->find_value("X"));
            })).find("LSTM 'lstm' input X is not dequantized"),
            std::string::npos);
  // Y's quantize node of another type than uint16.
  EXPECT_NE(tool_error(refusal_model([](ir::Model& m) {
              m.graph->find_value("Y_zero_point")->mutable_initializer() =
                  ir::Tensor::from_values<uint8_t>({}, std::vector<uint8_t>{128});
            })).find("Y (QuantizeLinear 'Y_Q') is uint8: Quark's ExtendedLSTM quantizes to uint16"),
            std::string::npos);
  // No LSTM at all.
  EXPECT_NE(tool_error(ir::Model{}).find("the model has no LSTM node"), std::string::npos);
}

// ConvertLSTMToCustomLSTM (onnxptq's key): the tagger with batch 1 quantized with MinMax float
// scales (int8 elsewhere), its LSTMs planned as uint16 X, W, R, B, Y of one scale each and written as
// ExtendedLSTM with those parameters; the written model, run by the engine, gives the simulation's
// outputs bit for bit (the simulation runs the same op).
TEST(ExtendedLstm, QuantizeFlowWritesExtendedLstmAsSimulated) {
  fs::path dir = testing::fresh_dir("extended_lstm_quantize");
  ASSERT_TRUE(export_tagger(dir / "float.onnx", "lstm_tagger_b1"));
  ir::Model model = ir::load_model(dir / "float.onnx");
  quant::QuantConfig config;
  quant::apply_extra_option(config, "ConvertLSTMToCustomLSTM", true);
  config.calibrate_method = calib::Method::MinMax;
  config.calib.threads = 2;
  quant::check_config(config);
  std::vector<Feed> samples;
  for (uint32_t seed : {1u, 2u, 3u, 4u}) samples.push_back(testing::random_feeds(model, seed));
  testing::FeedListReader reader(samples);
  quant::QuantizeResult r = quant::quantize_static(model, reader, config);
  const ir::Model& prepared = r.prepared ? *r.prepared : model;

  size_t planned = 0;
  for (const auto& n : prepared.graph->nodes()) {
    if (n->op_type != "LSTM") continue;
    ++planned;
    for (size_t i : {1, 2, 3}) {
      const quant::TensorPlan* t = r.plan.find(n->input(i)->name());
      ASSERT_NE(t, nullptr) << n->name << " input " << i;
      EXPECT_EQ(t->type, ir::DataType::UInt16) << t->name;
      EXPECT_EQ(t->params.size(), 1u) << t->name;
    }
    const quant::TensorPlan* y = r.plan.find(n->output(0)->name());
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(r.plan.provider(y->name).type, ir::DataType::UInt16);
  }
  EXPECT_EQ(planned, 2u);

  ir::save_model(r.model, dir / "q.onnx");
  ir::Model q = ir::load_model(dir / "q.onnx");
  EXPECT_EQ(testing::count_ops(q, "LSTM"), 0u);
  EXPECT_EQ(testing::count_ops(q, "ExtendedLSTM"), 2u);
  for (const auto& n : q.graph->nodes()) {
    if (n->op_type != "ExtendedLSTM") continue;
    // W's parameters are the plan's.
    const quant::TensorPlan* w = nullptr;
    for (const auto& p : prepared.graph->nodes())
      if (p->op_type == "LSTM" && p->name == n->name) w = r.plan.find(p->input(1)->name());
    ASSERT_NE(w, nullptr) << n->name;
    EXPECT_EQ(n->attr_float("w_scale", 0), static_cast<float>(w->params[0].scale));
    EXPECT_EQ(n->attr_int("w_zero_point", -1), w->params[0].zero_point);
  }

  quant::Simulation simulation(prepared, r.plan, config, 2);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> written = testing::run_model(q, feeds);
    std::vector<ir::Tensor> simulated = simulation.run(feeds);
    std::vector<ir::Tensor> floats = testing::run_model(model, feeds);
    ASSERT_EQ(written.size(), simulated.size());
    for (size_t i = 0; i < written.size(); ++i) {
      ASSERT_EQ(written[i].dims(), simulated[i].dims());
      auto a = written[i].values<float>(), b = simulated[i].values<float>();
      size_t differ = 0;
      for (size_t k = 0; k < a.size(); ++k) differ += std::memcmp(&a[k], &b[k], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << "seed " << seed << " output " << i;
      // And near the float model: int8 at the head, uint16 in the LSTMs.
      const double error = testing::range_relative_error(floats[i], written[i]);
      std::cout << "seed " << seed << ": written vs float max abs diff / range = " << error << "\n";
      EXPECT_LE(error, 0.02) << "seed " << seed;
    }
  }
  fs::remove_all(dir);
}

// The same for one LSTM whose Y a Relu reads (which the quantizer would otherwise fold into Y's
// quantization, giving Y the Relu's int8 parameters): the Relu stays, Y stays uint16 over [-1, 1].
TEST(ExtendedLstm, QuantizeFlowKeepsARelusInputUint16) {
  const int64_t seq = 6, input = 5, hidden = 4;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.6f, 0.6f);
  auto random = [&](std::vector<int64_t> dims) {
    std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
    for (float& f : v) f = u(rng);
    return ir::Tensor::from_values<float>(std::move(dims), v);
  };
  ir::Model model;
  model.set_opset("", 14);
  ir::Graph& g = *model.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {seq, 1, input});
  g.add_input(x);
  ir::Value* w = g.add_value("W");
  g.set_initializer(w, random({2, 4 * hidden, input}));
  ir::Value* r = g.add_value("R");
  g.set_initializer(r, random({2, 4 * hidden, hidden}));
  ir::Value* b = g.add_value("B");
  g.set_initializer(b, random({2, 8 * hidden}));
  ir::Value* y = g.add_value("Y");
  ir::Node* lstm = g.add_node("LSTM", {x, w, r, b}, {y}, "lstm");
  lstm->set_attribute(ir::Attribute::of_string("direction", "bidirectional"));
  lstm->set_attribute(ir::Attribute::of_int("hidden_size", hidden));
  ir::Value* out = g.add_value("out");
  out->type = ir::ValueType::tensor(ir::DataType::Float, {seq, 2, 1, hidden});
  g.add_node("Relu", {y}, {out}, "relu");
  g.add_output(out);

  quant::QuantConfig config;
  quant::apply_extra_option(config, "ConvertLSTMToCustomLSTM", true);
  config.calibrate_method = calib::Method::MinMax;
  config.calib.threads = 2;
  quant::check_config(config);
  std::vector<Feed> samples;
  for (uint32_t seed : {1u, 2u, 3u}) samples.push_back(testing::random_feeds(model, seed));
  testing::FeedListReader reader(samples);
  quant::QuantizeResult res = quant::quantize_static(model, reader, config);
  const ir::Model& prepared = res.prepared ? *res.prepared : model;
  const quant::TensorPlan* yp = res.plan.find("Y");
  ASSERT_NE(yp, nullptr);
  EXPECT_EQ(res.plan.provider("Y").type, ir::DataType::UInt16);
  ASSERT_EQ(res.plan.provider("Y").params.size(), 1u);
  EXPECT_FLOAT_EQ(static_cast<float>(res.plan.provider("Y").params[0].scale), 2.0f / 65535);
  EXPECT_EQ(testing::count_ops(res.model, "Relu"), 1u);
  EXPECT_EQ(testing::count_ops(res.model, "ExtendedLSTM"), 1u);
  quant::Simulation simulation(prepared, res.plan, config, 2);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> written = testing::run_model(res.model, feeds);
    std::vector<ir::Tensor> simulated = simulation.run(feeds);
    ASSERT_EQ(written[0].dims(), simulated[0].dims());
    auto a = written[0].values<float>(), s = simulated[0].values<float>();
    EXPECT_EQ(std::memcmp(a.data(), s.data(), a.size() * sizeof(float)), 0) << "seed " << seed;
  }
}

TEST(ExtendedLstm, QuantizerKeyRefusals) {
  quant::QuantConfig config;
  quant::apply_extra_option(config, "ConvertLSTMToCustomLSTM", true);
  config.format = quant::QuantFormat::QOperator;
  std::string error = testing::error_of([&] { quant::check_config(config); });
  EXPECT_NE(error.find("ConvertLSTMToCustomLSTM with another format than QuantFormat.QDQ"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  // The default calibrate_method, vai_q_onnx's power-of-two MinMSE.
  config.format = quant::QuantFormat::QDQ;
  error = testing::error_of([&] { quant::check_config(config); });
  EXPECT_NE(error.find("ConvertLSTMToCustomLSTM with power-of-two scales"), std::string::npos) << error;
  config.calibrate_method = calib::Method::MinMax;
  EXPECT_EQ(testing::error_of([&] { quant::check_config(config); }), "");
}

}  // namespace extended_lstm_e2e_test
}  // namespace onnxptq
