// The accuracy-target search and the sensitivity it orders fallbacks by, on built graphs.
#include "accuracy/target_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "engine/session.h"
#include "onnxptq/error.h"
#include "support/pass_check.h"

namespace onnxptq::accuracy {
namespace {

namespace fs = std::filesystem;

// x[1,2,6,6] -> conv1 -> a -> conv2 -> c -> Tanh -> t -> conv3 -> y, all 1x1. conv2's output
// channel 0 has weights near 8 and channels 1-3 near 0.02, and conv3 reads channels 1-3 only
// (weight 1, channel 0: 0.01): per-tensor weights of conv2 lose what y depends on. The Tanh
// keeps cross-layer equalization from pairing conv2 with conv3.
ir::Model outlier_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {1, 2, 6, 6});
  g.add_input(x);
  ir::Value* w1 = testing::add_random_initializer(g, "w1", {4, 2, 1, 1}, 1);
  std::vector<float> w2v(16);
  for (size_t o = 0; o < 4; ++o)
    for (size_t i = 0; i < 4; ++i) w2v[o * 4 + i] = (o == 0 ? 8.0f : 0.02f) * ((i + o) % 2 ? 1.0f : -0.7f);
  ir::Value* w2 = g.add_value("w2");
  g.set_initializer(w2, ir::Tensor::from_values<float>({4, 4, 1, 1}, w2v));
  ir::Value* w3 = g.add_value("w3");
  g.set_initializer(w3, ir::Tensor::from_values<float>({2, 4, 1, 1}, std::vector<float>{0.01f, 1, -1, 1, 0.01f, -1, 1, 1}));
  ir::Value* a = g.add_value("a");
  ir::Value* c = g.add_value("c");
  ir::Value* t = g.add_value("t");
  ir::Value* y = g.add_value("y");
  g.add_node("Conv", {x, w1}, {a}, "conv1");
  g.add_node("Conv", {a, w2}, {c}, "conv2");
  g.add_node("Tanh", {c}, {t}, "tanh");
  g.add_node("Conv", {t, w3}, {y}, "conv3");
  g.add_output(y);
  return m;
}

std::unique_ptr<DataReader> samples(const ir::Model& m, size_t count) {
  calib::RandomReaderOptions o;
  o.count = count;
  o.seed = 7;
  o.ranges["x"] = {-1.0, 1.0};
  return calib::make_random_reader(m.graph->fed_inputs(), o);
}

quant::QuantConfig qdq_config() {
  quant::QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_symmetric = true;  // no activation is removed: plans of one node match whole-model plans
  c.calib.threads = 1;
  return c;
}

// Whether the model file has `node` reading a dequantized weight (the node is quantized).
bool quantized_in_file(const fs::path& path, const std::string& node) {
  ir::Model m = ir::load_model(path);
  for (const auto& n : m.graph->nodes())
    if (n->name == node) return n->input(1) && n->input(1)->producer() && n->input(1)->producer()->op_type.find("Dequantize") != std::string::npos;
  ADD_FAILURE() << "no node " << node << " in " << path;
  return false;
}

class TargetSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_target_search_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SearchOptions evaluate_options(EvaluateFunction f) {
    SearchOptions o;
    o.target.evaluate = std::move(f);
    o.target.max_loss = 0.5;
    o.work_dir = dir_;
    o.threads = 1;
    return o;
  }

  fs::path dir_;
  ir::Model model_ = outlier_model();
};

TEST_F(TargetSearch, StopsAtTheFirstPassingTrialWhenTold) {
  auto always = [](const fs::path&, const std::string&) { return 1.0; };
  SearchOptions o = evaluate_options(always);
  o.stop_at_first_pass = true;
  auto reader = samples(model_, 4);
  SearchResult r = search_accuracy_target(model_, *reader, qdq_config(), o);
  EXPECT_TRUE(r.met);
  ASSERT_EQ(r.trials.size(), 1u);
  EXPECT_EQ(r.best_trial, 1u);

  // Told nothing, the recipes are all tried (the best is kept), and nothing falls back.
  o.stop_at_first_pass = false;
  r = search_accuracy_target(model_, *reader, qdq_config(), o);
  EXPECT_TRUE(r.met);
  EXPECT_GT(r.trials.size(), 1u);
  for (const Trial& t : r.trials) EXPECT_EQ(t.phase, "recipe");
  EXPECT_TRUE(fs::is_empty(dir_)) << "candidate models are removed";
}

TEST_F(TargetSearch, RespectsMaxTrials) {
  auto never = [](const fs::path& path, const std::string&) {
    return path.filename() == "onnxptq_float_model.onnx" ? 1.0 : 0.0;
  };
  SearchOptions o = evaluate_options(never);
  o.float_model_path = dir_ / "onnxptq_float_model.onnx";
  ir::save_model(model_, o.float_model_path);
  o.max_trials = 3;
  auto reader = samples(model_, 4);
  SearchResult r = search_accuracy_target(model_, *reader, qdq_config(), o);
  EXPECT_FALSE(r.met);
  EXPECT_EQ(r.trials.size(), 3u);
  EXPECT_NE(r.stop_reason.find("trial limit (3)"), std::string::npos) << r.stop_reason;
  EXPECT_NE(search_summary(r).find("missed by 0.5"), std::string::npos) << search_summary(r);
}

// The metric is met exactly when conv2 is left in float: the bisection over the sensitivity
// order finds a prefix holding it, and every other fallback in it is reverted.
TEST_F(TargetSearch, RevertsFallbacksThatAreNotNeeded) {
  auto needs_conv2_float = [](const fs::path& path, const std::string&) {
    return quantized_in_file(path, "conv2") ? 0.0 : 1.0;
  };
  SearchOptions o = evaluate_options(needs_conv2_float);
  quant::QuantConfig c = qdq_config();
  c.format = quant::QuantFormat::VitisQDQ;  // per-tensor only: no recipe helps
  c.calibrate_method = calib::Method::MinMSE;
  auto reader = samples(model_, 4);
  SearchResult r = search_accuracy_target(model_, *reader, c, o);
  ASSERT_TRUE(r.met) << search_summary(r);
  const Trial& best = r.trials.at(r.best_trial - 1);
  EXPECT_EQ(best.fallback, std::vector<std::string>{"conv2"});
  EXPECT_EQ(r.config.nodes_to_exclude, std::vector<std::string>{"conv2"});
  EXPECT_TRUE(std::count_if(r.trials.begin(), r.trials.end(), [](const Trial& t) { return t.phase == "revert"; }) > 0 ||
              r.sensitivity.at(0).node == "conv2");
  nlohmann::json report = search_report(r);
  EXPECT_EQ(report["node_precision"]["conv2"], "float");
  EXPECT_EQ(report["node_precision"]["conv1"]["weight"], "QInt8");
  EXPECT_EQ(report["weighted_nodes"]["quantized"], 2);
  EXPECT_EQ(report["weighted_nodes"]["total"], 3);
}

// With the built-in metric (output SQNR on held-out samples), the conv whose per-tensor weights
// lose the channels that matter is the one found and left in float.
TEST_F(TargetSearch, BuiltInMetricFindsTheNodeThatLosesTheOutput) {
  SearchOptions o;
  o.target.min_sqnr = 12;
  o.threads = 1;
  quant::QuantConfig c = qdq_config();
  c.format = quant::QuantFormat::VitisQDQ;
  c.calibrate_method = calib::Method::MinMSE;
  auto reader = samples(model_, 12);
  SearchResult r = search_accuracy_target(model_, *reader, c, o);
  ASSERT_TRUE(r.met) << search_summary(r);
  EXPECT_LT(r.trials.at(0).metric, 10) << "the whole-model quantization loses the output";
  ASSERT_FALSE(r.sensitivity.empty());
  EXPECT_EQ(r.sensitivity[0].node, "conv2");
  const Trial& best = r.trials.at(r.best_trial - 1);
  EXPECT_EQ(best.fallback, std::vector<std::string>{"conv2"}) << search_report(r)["trials"].dump();
  EXPECT_GE(best.metric, 12);
}

TEST_F(TargetSearch, RefusesTargetsThatAreNotWellFormed) {
  auto reader = samples(model_, 4);
  auto error = [&](SearchOptions o) {
    try {
      search_accuracy_target(model_, *reader, qdq_config(), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SearchOptions o;
  EXPECT_NE(error(o).find("needs min_sqnr"), std::string::npos);
  o.target.max_loss = 0.1;
  EXPECT_NE(error(o).find("need an evaluate command"), std::string::npos);
  o = evaluate_options([](const fs::path&, const std::string&) { return 1.0; });
  o.target.max_relative_loss = 0.1;
  EXPECT_NE(error(o).find("exactly one of max_loss and max_relative_loss"), std::string::npos);
  o.target.max_loss.reset();
  o.target.max_relative_loss = -0.1;
  EXPECT_NE(error(o).find("at least 0"), std::string::npos);
  o = evaluate_options([](const fs::path&, const std::string&) { return std::nan(""); });
  EXPECT_NE(error(o).find("the float model's metric is nan"), std::string::npos);
}

// Each node's SQNR with only it quantized, from one plan's simulation, equals the brute force:
// the model quantized with nodes_to_quantize = {that node}, run whole.
TEST(Sensitivity, RankingEqualsQuantizingEachNodeAlone) {
  ir::Model m = outlier_model();
  quant::QuantConfig c = qdq_config();
  c.optimize_model = false;
  auto reader = samples(m, 6);
  quant::QuantizeResult whole = quant::quantize_static(m, *reader, c);
  reader->rewind();
  ReferenceOutputs reference = reference_outputs(m, *reader, 0, 0, 1);
  std::vector<NodeSensitivity> ranked = rank_nodes_alone(m, whole.plan, c, reference, 1);
  ASSERT_EQ(ranked.size(), 3u);
  for (size_t i = 1; i < ranked.size(); ++i) EXPECT_LE(ranked[i - 1].sqnr_db, ranked[i].sqnr_db);
  EXPECT_EQ(ranked[0].node, "conv2");

  for (const NodeSensitivity& s : ranked) {
    quant::QuantConfig alone = c;
    alone.nodes_to_quantize = {s.node};
    reader->rewind();
    quant::QuantizeResult q = quant::quantize_static(m, *reader, alone);
    engine::Session session(q.model);
    OutputError error;
    for (size_t i = 0; i < reference.feeds.size(); ++i)
      error.add(reference.outputs[i], session.run(reference.feeds[i]).at(0), "sample");
    // Not bit-exact: calibration observing fewer tensors lets the engine compute y along another
    // path (fused, another layout), and its range differs in the last bits.
    EXPECT_NEAR(s.sqnr_db, error.sqnr_db(), 1e-4) << s.node;
  }
}

TEST(SubsetReader, GivesItsRangeAndSharesTheSourceWithAnother) {
  ir::Model m = outlier_model();
  auto source = samples(m, 5);
  std::vector<Feed> all;
  while (auto f = source->next()) all.push_back(*f);
  auto head = calib::make_subset_reader(*source, 0, 3);
  auto tail = calib::make_subset_reader(*source, 3, 99);
  EXPECT_EQ(tail->size(), 2u);
  auto same = [](const Feed& a, const Feed& b) {
    return a.at("x").values<float>()[0] == b.at("x").values<float>()[0];
  };
  for (int round = 0; round < 2; ++round) {  // read in turns, each started over
    for (size_t i = 3; i < 5; ++i) EXPECT_TRUE(same(*tail->next(), all[i]));
    EXPECT_FALSE(tail->next());
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same(*head->next(), all[i]));
    EXPECT_FALSE(head->next());
    head->rewind();
    tail->rewind();
  }
}

}  // namespace
}  // namespace onnxptq::accuracy
