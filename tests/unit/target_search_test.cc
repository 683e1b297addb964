// The accuracy-target search and the sensitivity it orders fallbacks by, on built graphs.
#include "accuracy/target_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "engine/session.h"
#include "onnxptq/error.h"
#include "quant/presets.h"
#include "support/accuracy_models.h"

namespace onnxptq::accuracy {
namespace {

namespace fs = std::filesystem;
using testing::outlier_model;
using testing::qdq_config;
using testing::samples;

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
  // The last recipes tried are bias correction, then AdaRound fast finetune, unless told not to.
  EXPECT_EQ(r.trials[r.trials.size() - 2].change, "BiasCorrection");
  EXPECT_EQ(r.trials.back().change, "AdaRound fast finetune");
  o.finetune_recipe = false;
  const size_t with_finetune = r.trials.size();
  r = search_accuracy_target(model_, *reader, qdq_config(), o);
  EXPECT_EQ(r.trials.size(), with_finetune - 1);
  for (const Trial& t : r.trials) EXPECT_NE(t.change, "AdaRound fast finetune");
}

// A block-format configuration: AdaRound, which chooses between integers, cannot train its
// weights, so the fast-finetune recipe is AdaQuant's (Quark's BFP16_ADAQUANT); bias correction
// comes before it.
TEST_F(TargetSearch, BlockFormatsFinetuneWithAdaQuantAfterBiasCorrection) {
  auto always = [](const fs::path&, const std::string&) { return 1.0; };
  SearchOptions o = evaluate_options(always);
  auto reader = samples(model_, 4);
  quant::QuantConfig c = qdq_config();
  quant::apply_preset(c, "BFP16");
  SearchResult r = search_accuracy_target(model_, *reader, c, o);
  ASSERT_GE(r.trials.size(), 3u);
  EXPECT_EQ(r.trials.back().change, "AdaQuant fast finetune");
  EXPECT_EQ(r.trials[r.trials.size() - 2].change, "BiasCorrection");
  for (const Trial& t : r.trials) EXPECT_EQ(t.change.find("AdaRound"), std::string::npos) << t.change;
  // Its scales come from each block: neither per-channel weights nor another calibration method
  // is a recipe.
  for (const Trial& t : r.trials) {
    EXPECT_NE(t.change, "per-channel weights");
    EXPECT_EQ(t.change.find("calibrate_method"), std::string::npos) << t.change;
  }
  // With bias correction already asked, it is not a recipe.
  c.bias_correction = true;
  r = search_accuracy_target(model_, *reader, c, o);
  for (const Trial& t : r.trials) EXPECT_NE(t.change, "BiasCorrection");
  // OCP MX with float elements tries the scale of least error; BFP16 has no such choice.
  for (const Trial& t : r.trials) EXPECT_NE(t.change, "MX min_error_scale");
  quant::QuantConfig mx = qdq_config();
  quant::apply_preset(mx, "MXFP8E4M3");
  r = search_accuracy_target(model_, *reader, mx, o);
  EXPECT_TRUE(std::any_of(r.trials.begin(), r.trials.end(),
                          [](const Trial& t) { return t.change == "MX min_error_scale"; }));
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
  for (FallbackOrder order : {FallbackOrder::LeftFloat, FallbackOrder::Alone}) {
    o.fallback_order = order;
    SearchResult r = search_accuracy_target(model_, *reader, c, o);
    ASSERT_TRUE(r.met) << search_summary(r);
    const Trial& best = r.trials.at(r.best_trial - 1);
    EXPECT_EQ(best.fallback, std::vector<std::string>{"conv2"});
    EXPECT_EQ(r.config.nodes_to_exclude, std::vector<std::string>{"conv2"});
  }
  // Two nodes needed in float: whatever the bisection takes, the reverts keep exactly those.
  o.fallback_order = FallbackOrder::LeftFloat;
  o.target.evaluate = [](const fs::path& path, const std::string&) {
    return quantized_in_file(path, "conv2") || quantized_in_file(path, "conv3") ? 0.0 : 1.0;
  };
  SearchResult r = search_accuracy_target(model_, *reader, c, o);
  ASSERT_TRUE(r.met);
  std::vector<std::string> kept = r.trials.at(r.best_trial - 1).fallback;
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"conv2", "conv3"}));

  o.target.evaluate = needs_conv2_float;
  r = search_accuracy_target(model_, *reader, c, o);
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
  for (FallbackOrder order : {FallbackOrder::LeftFloat, FallbackOrder::Alone}) {
    o.fallback_order = order;
    SearchResult r = search_accuracy_target(model_, *reader, c, o);
    ASSERT_TRUE(r.met) << search_summary(r);
    EXPECT_LT(r.trials.at(0).metric, 10) << "the whole-model quantization loses the output";
    ASSERT_FALSE(r.sensitivity.empty());
    EXPECT_EQ(r.sensitivity[0].node, "conv2");
    EXPECT_EQ(r.sensitivity[0].left_float.has_value(), order == FallbackOrder::LeftFloat);
    const Trial& best = r.trials.at(r.best_trial - 1);
    EXPECT_EQ(best.fallback, std::vector<std::string>{"conv2"}) << search_report(r)["trials"].dump();
    EXPECT_GE(best.metric, 12);
  }
}

// An int16 fallback: conv2 at 16 bits (activations and weight) holds the channels its int8
// per-tensor weight loses, so it meets the target without leaving the node float.
TEST_F(TargetSearch, FallsBackToInt16AndToFloatWhenInt16IsNotEnough) {
  SearchOptions o;
  o.target.min_sqnr = 12;
  o.threads = 1;
  o.fallback_type = ir::DataType::Int16;
  quant::QuantConfig c = qdq_config();
  c.format = quant::QuantFormat::VitisQDQ;
  c.calibrate_method = calib::Method::MinMSE;
  auto reader = samples(model_, 12);
  SearchResult r = search_accuracy_target(model_, *reader, c, o);
  ASSERT_TRUE(r.met) << search_summary(r);
  const Trial& best = r.trials.at(r.best_trial - 1);
  EXPECT_EQ(best.fallback, std::vector<std::string>{"conv2"}) << search_report(r)["trials"].dump();
  EXPECT_EQ(best.fallback_type, "int16");
  EXPECT_TRUE(r.config.nodes_to_exclude.empty());
  ASSERT_TRUE(r.config.node_precision.count("conv2"));
  EXPECT_EQ(r.config.node_precision.at("conv2").weight, ir::DataType::Int16);
  nlohmann::json report = search_report(r);
  EXPECT_EQ(report["node_precision"]["conv2"]["weight"], "QInt16");
  EXPECT_EQ(report["weighted_nodes"]["quantized"], 3);
  EXPECT_EQ(report["weighted_nodes"]["eight_bit"], 2);

  // A metric only a float conv2 meets: int16 misses with every candidate, then float is tried.
  SearchOptions e = evaluate_options([](const fs::path& path, const std::string&) {
    return quantized_in_file(path, "conv2") ? 0.0 : 1.0;
  });
  e.fallback_type = ir::DataType::Int16;
  r = search_accuracy_target(model_, *reader, c, e);
  ASSERT_TRUE(r.met) << search_summary(r);
  EXPECT_EQ(r.trials.at(r.best_trial - 1).fallback_type, "float");
  EXPECT_EQ(r.config.nodes_to_exclude, std::vector<std::string>{"conv2"});
  bool tried_int16 = false;
  for (const Trial& t : r.trials) tried_int16 = tried_int16 || t.fallback_type == "int16";
  EXPECT_TRUE(tried_int16);
  // The NPU path's default is int16, elsewhere float.
  quant::QuantConfig npu;
  npu.enable_dpu = true;
  EXPECT_EQ(default_fallback_type(npu), ir::DataType::Int16);
  EXPECT_EQ(default_fallback_type(c), std::nullopt);
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
