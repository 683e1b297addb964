// SmoothQuant (include_sq): the smoothed float model computes what the model did (folded into the
// LayerNormalization, MatMul, Add or Mul before, or through an inserted Mul; a shared weight
// copied), the activation outlier
// moves into the weights so that per-tensor int8 loses less, and the options are checked.
#include "quant/smooth_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "quant/config_keys.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/model_run.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

// x[1,6,16] -> LayerNormalization (channel 3's scale 40: an outlier) -> n; n -> MatMul(wq) -> q,
// n -> MatMul(wk) -> k; q -> Relu -> r -> MatMul(wk) -> y (wk read by both inputs' MatMuls).
ir::Model attention_like() {
  ir::Model m;
  m.set_opset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {1, 6, 16});
  g.add_input(x);
  std::vector<float> gamma(16, 1.0f);
  gamma[3] = 40.0f;
  ir::Value* scale = g.add_value("gamma");
  g.set_initializer(scale, ir::Tensor::from_values<float>({16}, gamma));
  ir::Value* beta = testing::add_random_initializer(g, "beta", {16}, 5, -0.1f, 0.1f);
  g.add_node("LayerNormalization", {x, scale, beta}, {g.add_value("n")}, "ln");
  ir::Value* wq = testing::add_random_initializer(g, "wq", {16, 16}, 6);
  ir::Value* wk = testing::add_random_initializer(g, "wk", {16, 16}, 7);
  g.add_node("MatMul", {g.find_value("n"), wq}, {g.add_value("q")}, "matmul_q");
  g.add_node("MatMul", {g.find_value("n"), wk}, {g.add_value("k")}, "matmul_k");
  g.add_node("Relu", {g.find_value("q")}, {g.add_value("r")}, "relu");
  g.add_node("MatMul", {g.find_value("r"), wk}, {g.add_value("y")}, "matmul_y");
  for (const char* out : {"k", "y"}) g.add_output(g.find_value(out));
  return m;
}

// `count` seeded samples of x, standard normal.
std::vector<ir::Tensor> gaussian_inputs(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<ir::Tensor> x;
  for (size_t i = 0; i < count; ++i) {
    std::vector<float> v(96);
    for (float& e : v) e = d(rng);
    x.push_back(ir::Tensor::from_values<float>({1, 6, 16}, v));
  }
  return x;
}

testing::FeedListReader reader_of(const std::vector<ir::Tensor>& x) {
  std::vector<Feed> feeds;
  for (const ir::Tensor& t : x) feeds.push_back({{"x", t}});
  return testing::FeedListReader(std::move(feeds));
}

QuantConfig sq_config() {
  QuantConfig c;
  c.optimize_model = false;
  c.calibrate_method = calib::Method::MinMax;
  c.calib.threads = 1;
  c.include_sq = true;
  return c;
}

auto every_node = [](const ir::Node&) { return true; };

// The largest difference of any output over the samples, relative to that output's range.
double relative_difference(const ir::Model& a, const ir::Model& b, const std::vector<ir::Tensor>& x) {
  engine::Session sa(a), sb(b);
  double worst = 0;
  for (const ir::Tensor& t : x) worst = std::max(worst, testing::relative_diff(sa.run({{"x", t}}), sb.run({{"x", t}})));
  return worst;
}

TEST(SmoothQuant, FoldsIntoTheLayerNormOrInsertsAMulAndComputesTheSameValues) {
  const ir::Model model = attention_like();
  ir::Model smoothed = ir::clone_model(model);
  const std::vector<ir::Tensor> x = gaussian_inputs(8, 1);
  testing::FeedListReader data = reader_of(x);
  std::vector<std::string> lines;
  SmoothQuantResult r =
      smooth_quant(smoothed, data, sq_config(), every_node, [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(r.inputs, 2u);
  EXPECT_EQ(r.matmuls, 3u);
  EXPECT_EQ(r.folded, 1u);    // n: only the two MatMuls read it
  EXPECT_EQ(r.inserted, 1u);  // r: a Relu's output
  EXPECT_EQ(r.alpha.at("n"), 0.5);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("SmoothQuant: 3 MatMuls on 2 inputs, 1 folded"), std::string::npos) << lines[0];
  // The outlier's scale went into the LayerNormalization: gamma[3] / s_3 is no longer 40 times the rest.
  const ir::Node* ln = smoothed.graph->find_value("n")->producer();
  std::span<const float> gamma = ln->input(1)->initializer().values<float>();
  EXPECT_LT(gamma[3] / gamma[0], 10.0f);
  // wk is read by both groups, each with its own scales: the first MatMul got a copy.
  std::map<std::string, std::string> weight_of;
  for (const auto& n : smoothed.graph->nodes())
    if (n->op_type == "MatMul") weight_of[n->name] = n->input(1)->name();
  EXPECT_NE(weight_of.at("matmul_k"), weight_of.at("matmul_y"));
  EXPECT_LT(relative_difference(model, smoothed, x), 1e-5);
  EXPECT_LT(relative_difference(model, smoothed, gaussian_inputs(8, 2)), 1e-5);  // samples it did not see

  QuantConfig no_folding = sq_config();
  no_folding.smooth.folding = false;
  ir::Model inserted = ir::clone_model(model);
  data.rewind();
  r = smooth_quant(inserted, data, no_folding, every_node);
  EXPECT_EQ(r.folded, 0u);
  EXPECT_EQ(r.inserted, 2u);
  EXPECT_LT(relative_difference(model, inserted, x), 1e-5);
}

// x[1,6,16] -> MatMul(w0 [16,12]) -> Add(b0 [12]) -> a -> MatMul(wa), MatMul(wb);
// x -> Mul(c [1,1,16]) -> m -> MatMul(wm), MatMul(w1);
// x -> MatMul(w1 [16,12]) -> p -> MatMul(wp) (w1 read in two groups).
// Channel 5 of a, 3 of m and 7 of p are outliers, from their producers' constants.
ir::Model linear_producers() {
  ir::Model m;
  m.set_opset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {1, 6, 16});
  g.add_input(x);
  auto big_column = [&](const char* name, std::vector<int64_t> dims, uint32_t seed, int64_t column) {
    ir::Value* v = testing::add_random_initializer(g, name, dims, seed);
    ir::Tensor t = v->initializer();
    std::span<float> w = t.mutable_values<float>();
    for (size_t i = static_cast<size_t>(column); i < w.size(); i += static_cast<size_t>(dims.back())) w[i] *= 30;
    g.set_initializer(v, std::move(t));
    return v;
  };
  g.add_node("MatMul", {x, big_column("w0", {16, 12}, 11, 5)}, {g.add_value("l")}, "linear");
  g.add_node("Add", {g.find_value("l"), testing::add_random_initializer(g, "b0", {12}, 12)}, {g.add_value("a")},
             "bias");
  g.add_node("MatMul", {g.find_value("a"), testing::add_random_initializer(g, "wa", {12, 8}, 13)}, {g.add_value("ya")},
             "matmul_a");
  g.add_node("MatMul", {g.find_value("a"), testing::add_random_initializer(g, "wb", {12, 8}, 14)}, {g.add_value("yb")},
             "matmul_b");
  g.add_node("Mul", {x, big_column("c", {1, 1, 16}, 15, 3)}, {g.add_value("m")}, "scale");
  g.add_node("MatMul", {g.find_value("m"), testing::add_random_initializer(g, "wm", {16, 8}, 16)}, {g.add_value("ym")},
             "matmul_m");
  ir::Value* w1 = big_column("w1", {16, 12}, 17, 7);
  g.add_node("MatMul", {x, w1}, {g.add_value("p")}, "linear_shared");
  g.add_node("MatMul", {g.find_value("p"), testing::add_random_initializer(g, "wp", {12, 8}, 18)}, {g.add_value("yp")},
             "matmul_p");
  g.add_node("MatMul", {g.find_value("m"), w1}, {g.add_value("ys")}, "matmul_shared");
  for (const char* out : {"ya", "yb", "ym", "yp", "ys"}) g.add_output(g.find_value(out));
  return m;
}

TEST(SmoothQuant, FoldsIntoALinearLayerItsBiasOrAMulByAConstant) {
  const ir::Model model = linear_producers();
  ir::Model smoothed = ir::clone_model(model);
  const std::vector<ir::Tensor> x = gaussian_inputs(8, 3);
  testing::FeedListReader data = reader_of(x);
  std::vector<std::string> lines;
  SmoothQuantResult r =
      smooth_quant(smoothed, data, sq_config(), every_node, [&](const std::string& l) { lines.push_back(l); });
  // Groups: a (MatMul + Add), m (Mul), p (MatMul), x (the graph input: a Mul inserted).
  EXPECT_EQ(r.inputs, 4u);
  EXPECT_EQ(r.folded, 3u);
  EXPECT_EQ(r.folded_into.at("MatMul"), 2u);
  EXPECT_EQ(r.folded_into.at("Mul"), 1u);
  EXPECT_EQ(r.inserted, 1u);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("3 folded (2 into MatMul, 1 into Mul), 1 Mul nodes inserted"), std::string::npos) << lines[0];
  // The outlier column of w0 and the outlier of c were divided down.
  auto node = [&](const std::string& name) -> const ir::Node* {
    for (const auto& n : smoothed.graph->nodes())
      if (n->name == name) return n.get();
    return nullptr;
  };
  std::span<const float> w0 = node("linear")->input(1)->initializer().values<float>();
  double column5 = 0, column0 = 0;
  for (size_t k = 0; k < 16; ++k) {
    column5 += std::abs(w0[k * 12 + 5]);
    column0 += std::abs(w0[k * 12]);
  }
  EXPECT_LT(column5 / column0, 10.0);
  // w1, read by MatMuls of two groups, was copied: each has its own scales.
  EXPECT_NE(node("linear_shared")->input(1)->name(), node("matmul_shared")->input(1)->name());
  EXPECT_LT(relative_difference(model, smoothed, x), 1e-5);
  EXPECT_LT(relative_difference(model, smoothed, gaussian_inputs(8, 4)), 1e-5);
}

// The summed squared error of the simulated outputs against the float model's on `x`.
double output_error(const ir::Model& model, const QuantizeResult& q, const QuantConfig& c,
                    const std::vector<ir::Tensor>& x) {
  const ir::Model& planned = q.prepared ? *q.prepared : model;
  Simulation simulation(planned, q.plan, c, 1);
  engine::Session float_model(model);
  double sum = 0;
  for (const ir::Tensor& t : x) {
    std::vector<ir::Tensor> a = simulation.run({{"x", t}}), b = float_model.run({{"x", t}});
    for (size_t o = 0; o < a.size(); ++o)
      for (size_t i = 0; i < a[o].values<float>().size(); ++i) {
        const double d = static_cast<double>(a[o].values<float>()[i]) - b[o].values<float>()[i];
        sum += d * d;
      }
  }
  return sum;
}

TEST(SmoothQuant, MovesTheOutlierIntoTheWeightsAndInt8LosesLess) {
  const ir::Model model = attention_like();
  QuantConfig plain = sq_config();
  plain.include_sq = false;
  testing::FeedListReader data = reader_of(gaussian_inputs(16, 3));
  const QuantizeResult without = quantize_static(model, data, plain);
  data.rewind();
  const QuantizeResult with = quantize_static(model, data, sq_config());
  ASSERT_TRUE(with.prepared.has_value());
  EXPECT_TRUE(with.seconds.count("smooth_quant"));
  const std::vector<ir::Tensor> other = gaussian_inputs(16, 4);
  EXPECT_LT(output_error(model, with, sq_config(), other), 0.5 * output_error(model, without, plain, other));

  // "auto" over a one-point range is that alpha: the same model as SmoothAlpha 0.5.
  QuantConfig one_point = sq_config();
  apply_extra_option(one_point, "SmoothAlpha", "auto");
  apply_extra_option(one_point, "SmoothAlphaRange", nlohmann::json::parse("[0.5, 0.5, 0.1]"));
  data.rewind();
  const QuantizeResult same = quantize_static(model, data, one_point);
  EXPECT_EQ(ir::serialize_model(same.model), ir::serialize_model(with.model));
}

TEST(SmoothQuant, AutoAlphaPicksFromTheGridPerInput) {
  ir::Model model = attention_like();
  QuantConfig c = sq_config();
  apply_extra_option(c, "SmoothAlpha", "auto");
  apply_extra_option(c, "SmoothAlphaRange", nlohmann::json::parse("[0.2, 0.8, 0.2]"));
  testing::FeedListReader data = reader_of(gaussian_inputs(8, 5));
  std::vector<std::string> lines;
  const SmoothQuantResult r =
      smooth_quant(model, data, c, every_node, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(r.alpha.size(), 2u);
  for (const auto& [input, alpha] : r.alpha) {
    const double steps = (alpha - 0.2) / 0.2;
    EXPECT_NEAR(steps, std::round(steps), 1e-9) << input << " " << alpha;
    EXPECT_GE(alpha, 0.2) << input;
    EXPECT_LE(alpha, 0.8) << input;
  }
  EXPECT_NE(lines.at(0).find("(auto)"), std::string::npos) << lines[0];
}

TEST(SmoothQuant, OptionsAreCheckedByName) {
  auto refused = [](QuantConfig c, const std::string& words) {
    try {
      check_config(c);
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  QuantConfig c;
  apply_extra_option(c, "SmoothAlpha", 0.7);
  refused(c, "take effect only with include_sq");
  c.include_sq = true;
  check_config(c);
  apply_extra_option(c, "SmoothAlphaRange", nlohmann::json::parse("[0.3, 0.6, 0.1]"));
  refused(c, "SmoothAlphaRange takes effect only with SmoothAlpha \"auto\"");
  EXPECT_THROW(apply_extra_option(c, "SmoothAlpha", 1.5), Error);
  EXPECT_THROW(apply_extra_option(c, "SmoothAlpha", "sometimes"), Error);
  EXPECT_THROW(apply_extra_option(c, "SmoothAlphaRange", nlohmann::json::parse("[0.7, 0.3, 0.1]")), Error);
  QuantConfig dynamic;
  dynamic.include_sq = true;
  dynamic.use_dynamic_quant = true;
  EXPECT_THROW(check_config(dynamic), Error);
}

}  // namespace
}  // namespace onnxptq::quant
