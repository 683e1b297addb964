// Quark's automatic mixed precision (accuracy/auto_mixprecision.h) on a built graph: candidates
// ranked least harmful first, converted cumulatively until the L2 target or NumTarget stops it,
// the loss reported being that of the model written.
#include "accuracy/auto_mixprecision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "quant/quantize.h"
#include "support/accuracy_models.h"

namespace onnxptq::accuracy {
namespace {

using ir::DataType;
using testing::outlier_model;
using testing::samples;

// int16 activations and weights, converted down to int8 (as S16S16_MIXED_S8S8).
quant::QuantConfig s16_config() {
  quant::QuantConfig c = testing::qdq_config();
  c.optimize_model = false;
  c.activation_type = DataType::Int16;
  c.weight_type = DataType::Int16;
  c.include_auto_mp = true;
  c.auto_mp.activation_target = DataType::Int8;
  c.auto_mp.weight_target = DataType::Int8;
  return c;
}

// The mean over samples of |y - y_float|_2 of the model written, run by the engine.
double l2_of(const ir::Model& quantized, size_t count) {
  ir::Model m = outlier_model();
  engine::Session reference(m), model(quantized);
  auto reader = samples(m, count);
  double sum = 0;
  size_t n = 0;
  for (auto feed = reader->next(); feed; feed = reader->next(), ++n) {
    std::vector<ir::Tensor> x = model.run(*feed), y = reference.run(*feed);
    auto a = x[0].values<float>(), b = y[0].values<float>();
    double squares = 0;
    for (size_t i = 0; i < a.size(); ++i) squares += (a[i] - b[i]) * (a[i] - b[i]);
    sum += std::sqrt(squares);
  }
  return sum / static_cast<double>(n);
}

TEST(AutoMixprecision, ConvertsLeastHarmfulFirstUntilTheTarget) {
  ir::Model m = outlier_model();
  auto reader = samples(m, 6);
  quant::QuantConfig c = s16_config();
  c.auto_mp.l2_target = 1e9;  // every candidate
  AutoMixResult all = auto_mixprecision(m, *reader, c);
  ASSERT_EQ(all.candidates.size(), 3u);
  for (size_t i = 1; i < all.candidates.size(); ++i) EXPECT_LE(all.candidates[i - 1].alone, all.candidates[i].alone);
  EXPECT_EQ(all.candidates.back().node, "conv2");  // its int8 per-tensor weight loses the output
  for (const auto& candidate : all.candidates) EXPECT_TRUE(candidate.converted) << candidate.node;
  EXPECT_EQ(all.stop_reason, "every candidate converted");
  EXPECT_EQ(all.result.plan.find("w2")->type, DataType::Int8);
  EXPECT_NEAR(all.loss, l2_of(all.result.model, 6), 1e-4 * (1 + all.loss));

  // A target the first conversion meets exactly and the second passes: one node converted.
  c.auto_mp.l2_target = all.candidates[0].alone;
  AutoMixResult one = auto_mixprecision(m, *reader, c);
  EXPECT_TRUE(one.candidates[0].converted);
  EXPECT_FALSE(one.candidates[1].converted);
  EXPECT_EQ(one.config.node_precision.size(), 1u);
  EXPECT_NE(one.stop_reason.find("past the target"), std::string::npos) << one.stop_reason;
  EXPECT_LE(one.loss, c.auto_mp.l2_target);
  EXPECT_NEAR(one.loss, l2_of(one.result.model, 6), 1e-4 * (1 + one.loss));

  // NumTarget bounds the count whatever the target.
  c.auto_mp.l2_target = 1e9;
  c.auto_mp.num_target = 2;
  AutoMixResult two = auto_mixprecision(m, *reader, c);
  EXPECT_EQ(two.config.node_precision.size(), 2u);
  EXPECT_FALSE(two.config.node_precision.count("conv2"));
  nlohmann::json report = auto_mixprecision_report(two);
  EXPECT_EQ(report["metric"], "l2");
  EXPECT_EQ(report["candidates"].size(), 3u);
}

TEST(AutoMixprecision, IndicesAndSharedInputsNarrowTheCandidates) {
  ir::Model m = outlier_model();
  auto reader = samples(m, 4);
  quant::QuantConfig c = s16_config();
  c.auto_mp.exclude_indices = {1};  // conv2, second in graph order
  AutoMixResult r = auto_mixprecision(m, *reader, c);
  ASSERT_EQ(r.candidates.size(), 2u);
  for (const auto& candidate : r.candidates) EXPECT_NE(candidate.node, "conv2");
  c.auto_mp.exclude_indices.clear();
  c.auto_mp.target_indices = {0};
  r = auto_mixprecision(m, *reader, c);
  ASSERT_EQ(r.candidates.size(), 1u);
  EXPECT_EQ(r.candidates[0].node, "conv1");
  c.auto_mp.target_indices = {5};
  EXPECT_THROW(auto_mixprecision(m, *reader, c), Error);
  c.auto_mp.target_indices.clear();
  c.auto_mp.target_tensors = {"t"};  // read by conv3 only
  r = auto_mixprecision(m, *reader, c);
  ASSERT_EQ(r.candidates.size(), 1u);
  EXPECT_EQ(r.candidates[0].node, "conv3");
}

TEST(AutoMixprecision, WrongSettingsAreRefusedByName) {
  ir::Model m = outlier_model();
  auto reader = samples(m, 2);
  quant::QuantConfig c = s16_config();
  c.auto_mp.top1_acc_target = 0.01;
  try {
    auto_mixprecision(m, *reader, c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Top1AccTarget needs an evaluate function"), std::string::npos) << e.what();
  }
  c = s16_config();
  c.auto_mp.activation_target.reset();
  c.auto_mp.weight_target.reset();
  EXPECT_THROW(quant::check_config(c), Error);
  c = s16_config();
  c.include_auto_mp = false;
  c.auto_mp.given = true;  // set, but not switched on: refused, not ignored
  EXPECT_THROW(quant::check_config(c), Error);
  EXPECT_THROW(quant::apply_extra_option(c, "AutoMixprecision", nlohmann::json::parse(R"({"Colour": 1})")), Error);
}

// AutoMixUseFastFT: each candidate is measured after fast finetune of the node converted (its
// int8 weight then fits the float output better: a loss no higher than without); the model
// written is finetuned only with include_fast_ft, and then once, every layer.
TEST(AutoMixprecision, UseFastFtFinetunesEachCandidateBeforeItIsMeasured) {
  ir::Model m = outlier_model();
  auto reader = samples(m, 6);
  quant::QuantConfig c = s16_config();
  c.auto_mp.l2_target = 1e9;
  AutoMixResult plain = auto_mixprecision(m, *reader, c);
  quant::apply_extra_option(c, "AutoMixprecision", nlohmann::json::parse(R"({"AutoMixUseFastFT": true})"));
  quant::apply_extra_option(c, "FastFinetune", nlohmann::json::parse(R"({"NumIterations": 100, "BatchSize": 2})"));
  EXPECT_NO_THROW(quant::check_config(c));  // FastFinetune's parameters serve AutoMixUseFastFT
  AutoMixResult tuned = auto_mixprecision(m, *reader, c);
  ASSERT_EQ(tuned.candidates.size(), plain.candidates.size());
  std::map<std::string, double> alone;
  for (const auto& candidate : plain.candidates) alone[candidate.node] = candidate.alone;
  size_t lower = 0;
  for (const auto& candidate : tuned.candidates) {
    EXPECT_LE(candidate.alone, alone.at(candidate.node) * (1 + 1e-12)) << candidate.node;
    lower += candidate.alone < alone.at(candidate.node);
  }
  EXPECT_GT(lower, 0u);
  EXPECT_TRUE(tuned.result.finetuned.empty());
  c.include_fast_ft = true;
  AutoMixResult finetuned = auto_mixprecision(m, *reader, c);
  EXPECT_EQ(finetuned.result.finetuned.size(), 3u);
}

// BF16_MIXED_BFP16's search: bfloat16 nodes converted down to BFP16 (dual quant nodes where the
// two meet); the loss reported is the written model's, run with its BFP nodes.
TEST(AutoMixprecision, ConvertsDownToABlockFormat) {
  ir::Model m = outlier_model();
  auto reader = samples(m, 6);
  quant::QuantConfig c = testing::qdq_config();
  c.optimize_model = false;
  c.format = quant::QuantFormat::ExtendedQDQ;
  c.activation_type = c.weight_type = DataType::BFloat16;
  c.include_auto_mp = true;
  c.auto_mp.activation_target = c.auto_mp.weight_target = quant::kQBfp;
  c.auto_mp.dual_quant_nodes = true;
  c.auto_mp.l2_target = 1e9;
  AutoMixResult all = auto_mixprecision(m, *reader, c);
  ASSERT_EQ(all.candidates.size(), 3u);
  for (const auto& candidate : all.candidates) EXPECT_TRUE(candidate.converted) << candidate.node;
  for (const char* w : {"w1", "w2", "w3"}) EXPECT_EQ(all.result.plan.find(w)->type, quant::kQBfp) << w;
  EXPECT_NEAR(all.loss, l2_of(all.result.model, 6), 1e-4 * (1 + all.loss));
  // A target below the least harmful conversion: nothing converted, the bfloat16 model written.
  c.auto_mp.l2_target = all.candidates[0].alone / 2;
  AutoMixResult none = auto_mixprecision(m, *reader, c);
  EXPECT_TRUE(none.config.node_precision.empty());
  EXPECT_EQ(none.result.plan.find("w2")->type, DataType::BFloat16);
}

}  // namespace
}  // namespace onnxptq::accuracy
