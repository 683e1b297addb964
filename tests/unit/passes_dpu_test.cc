// The enable_dpu rewrites and SimulateDPU transforms (src/passes/dpu.h), each on tiny built graphs:
// where a rewrite is exact the engine's outputs before and after agree; where it changes numbers
// on purpose (SimulateDPU) the outputs equal vai_q_onnx 1.16's formula evaluated here from its
// constants (simulate_dpu.py); and graphs where a pass must not apply are left unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <span>

#include "passes/dpu.h"
#include "passes/pipeline.h"
#include "support/pass_check.h"
#include "support/test_paths.h"

namespace onnxptq::passes {
namespace {

using ir::Tensor;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::count_ops;
using testing::relative_diff;
using testing::run_model;
using testing::ints;
using testing::output;
using testing::scalar;
namespace fs = std::filesystem;

ir::Model new_model(int64_t opset) {
  ir::Model m;
  m.set_opset("", opset);
  return m;
}

ir::Value* input(ir::Graph& g, const std::string& name, const std::vector<int64_t>& dims) {
  ir::Value* v = add_float_value(g, name, dims);
  g.add_input(v);
  return v;
}

ir::Node* producer_of_output(const ir::Model& m, const std::string& name) {
  ir::Value* v = m.graph->find_value(name);
  return v ? v->producer() : nullptr;
}

// Runs `pass` on a copy; the engine's outputs before and after must agree (exact rewrites).
ir::Model run_exact(const ir::Model& model, PassFunction pass, bool expect_change) {
  ir::Model after = ir::clone_model(model);
  PassContext context;
  EXPECT_EQ(pass(after, context), expect_change);
  auto feeds = testing::seeded_feeds(model, 5);
  auto expected = run_model(model, feeds);
  EXPECT_GT(testing::smallest_range(expected), 0);
  EXPECT_LE(relative_diff(expected, run_model(after, feeds)), 1e-5);
  return after;
}

// Runs `pass` on a copy and returns it with the feeds it is to be checked on.
ir::Model run_pass(const ir::Model& model, PassFunction pass, bool expect_change) {
  ir::Model after = ir::clone_model(model);
  PassContext context;
  EXPECT_EQ(pass(after, context), expect_change);
  return after;
}

// ---- ConvertReduceMeanToGlobalAvgPool

TEST(ConvertReduceMeanToGlobalAvgPool, AxesTwoAndThreeOfA4DTensor) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Node* n = g.add_node("ReduceMean", {input(g, "x", {2, 3, 5, 6})}, {output(g, "y")}, "mean");
  n->set_attribute(ir::Attribute::of_ints("axes", {2, 3}));
  ir::Model after = run_exact(m, convert_reduce_mean_to_global_avg_pool, true);
  ir::Node* gap = producer_of_output(after, "y");
  ASSERT_EQ(gap->op_type, "GlobalAveragePool");
  EXPECT_EQ(gap->name, "mean");
  EXPECT_EQ(after.graph->node_count(), 1u);
}

// Opset 18: the axes are an input; the initializer goes with the node.
TEST(ConvertReduceMeanToGlobalAvgPool, AxesAsConstantInput) {
  ir::Model m = new_model(18);
  ir::Graph& g = *m.graph;
  g.add_node("ReduceMean", {input(g, "x", {1, 4, 3, 3}), ints(g, "axes", {2, 3})}, {output(g, "y")});
  ir::Model after = run_exact(m, convert_reduce_mean_to_global_avg_pool, true);
  EXPECT_EQ(count_ops(after, "GlobalAveragePool"), 1u);
  EXPECT_EQ(after.graph->find_value("axes"), nullptr);
}

// keepdims 0, other axes, negative axes (not recognised, as in the reference) and a 5-D input stay.
TEST(ConvertReduceMeanToGlobalAvgPool, LeavesOtherReductions) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {2, 3, 5, 6});
  ir::Value* x5 = input(g, "x5", {1, 2, 3, 4, 5});
  auto mean = [&](ir::Value* in, std::vector<int64_t> axes, int64_t keepdims, const std::string& out) {
    ir::Node* n = g.add_node("ReduceMean", {in}, {output(g, out)});
    n->set_attribute(ir::Attribute::of_ints("axes", axes));
    n->set_attribute(ir::Attribute::of_int("keepdims", keepdims));
  };
  mean(x, {2, 3}, 0, "keepdims0");
  mean(x, {1, 2}, 1, "axes12");
  mean(x, {-2, -1}, 1, "negative");
  mean(x5, {2, 3}, 1, "rank5");
  ir::Model after = run_exact(m, convert_reduce_mean_to_global_avg_pool, false);
  EXPECT_EQ(count_ops(after, "ReduceMean"), 4u);
}

// ---- SplitLargeKernelPool

// 32 x 24 = 768 > 512. factor(32): floor(sqrt 32) = 5, 32 % 5 != 0, 4 divides: (4, 8); factor(24):
// floor(sqrt 24) = 4 divides: (4, 6). So AveragePool 4x4 stride 4, then the GAP over 8 x 6 = 48.
TEST(SplitLargeKernelPool, SplitsAPoolOverMoreThan512) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  g.add_node("GlobalAveragePool", {input(g, "x", {1, 2, 32, 24})}, {output(g, "y")}, "gap");
  ir::Model after = run_exact(m, split_large_kernel_pool, true);
  ir::Node* gap = producer_of_output(after, "y");
  ASSERT_EQ(gap->op_type, "GlobalAveragePool");
  EXPECT_EQ(gap->input(0)->name(), "x_Split");
  ir::Node* pool = gap->input(0)->producer();
  ASSERT_EQ(pool->op_type, "AveragePool");
  EXPECT_EQ(pool->name, "x_Split");
  EXPECT_EQ(pool->attr_ints("kernel_shape", {}), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(pool->attr_ints("strides", {}), (std::vector<int64_t>{4, 4}));
}

// 16 x 32 = 512 is not over the limit; 29 x 31 (primes) cannot split into parts under 512; an
// unknown size cannot be split.
TEST(SplitLargeKernelPool, LeavesSmallPrimeAndUnknownSizes) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  g.add_node("GlobalAveragePool", {input(g, "a", {1, 2, 16, 32})}, {output(g, "ya")});
  g.add_node("GlobalAveragePool", {input(g, "b", {1, 2, 29, 31})}, {output(g, "yb")});
  ir::Model after = run_pass(m, split_large_kernel_pool, false);
  EXPECT_EQ(count_ops(after, "AveragePool"), 0u);

  ir::Model dynamic = new_model(13);
  ir::Graph& d = *dynamic.graph;
  d.add_node("GlobalAveragePool", {input(d, "x", {1, 2, -1, 40})}, {output(d, "y")});
  run_pass(dynamic, split_large_kernel_pool, false);
}

// ---- ConvertSplitToSlice

TEST(ConvertSplitToSlice, SizesFromInputBecomeSlices) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Node* split = g.add_node("Split", {input(g, "x", {2, 6, 4}), ints(g, "sizes", {2, 3, 1})},
                               {output(g, "a"), output(g, "b"), output(g, "c")}, "split");
  split->set_attribute(ir::Attribute::of_int("axis", 1));
  ir::Model after = run_exact(m, convert_split_to_slice, true);
  EXPECT_EQ(count_ops(after, "Split"), 0u);
  EXPECT_EQ(count_ops(after, "Slice"), 3u);
  EXPECT_EQ(after.graph->find_value("sizes"), nullptr);
  ir::Node* b = producer_of_output(after, "b");
  ASSERT_EQ(b->op_type, "Slice");
  EXPECT_EQ(b->name, "b_1");
  EXPECT_EQ(b->input(1)->name(), "b_starts_1");
  EXPECT_EQ(b->input(3)->name(), "b_axes_1");
  EXPECT_EQ(b->input(4)->name(), "b_steps_1");
}

// Opset 11: sizes as the `split` attribute, a negative axis. A Split without sizes before it is
// skipped, not the end of the pass (vai_q_onnx 1.16's `break`).
TEST(ConvertSplitToSlice, AttributeSizesAfterASplitWithout) {
  ir::Model m = new_model(11);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {2, 6, 4});
  ir::Node* equal = g.add_node("Split", {x}, {output(g, "e0"), output(g, "e1")});
  equal->set_attribute(ir::Attribute::of_int("axis", 1));
  ir::Node* sized = g.add_node("Split", {x}, {output(g, "s0"), output(g, "s1")});
  sized->set_attribute(ir::Attribute::of_int("axis", -1));
  sized->set_attribute(ir::Attribute::of_ints("split", {3, 1}));
  ir::Model after = run_exact(m, convert_split_to_slice, true);
  EXPECT_EQ(count_ops(after, "Split"), 1u);
  EXPECT_EQ(count_ops(after, "Slice"), 2u);
}

// ---- FuseInstanceNorm

// The decomposed instance norm FuseInstanceNorm matches, on x [2,3,5,4]: mean = GAP(x),
// d = x - mean, k = Reciprocal(Sqrt(GAP(d*d) + eps)) * gamma, y = x*k + (beta - mean*k).
ir::Model instance_norm_model(bool square) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {2, 3, 5, 4});
  auto v = [&](const std::string& name) { return g.add_value(name); };
  auto f = [&](const std::string& name) { return g.find_value(name); };
  g.add_node("GlobalAveragePool", {x}, {v("mean")});
  g.add_node("Sub", {x, f("mean")}, {v("d")});
  ir::Value* other = square ? f("d") : input(g, "other", {2, 3, 5, 4});
  g.add_node("Mul", {f("d"), other}, {v("d2")});
  g.add_node("GlobalAveragePool", {f("d2")}, {v("var")});
  g.add_node("Add", {f("var"), scalar(g, "eps", 1e-5f)}, {v("var_eps")});
  g.add_node("Sqrt", {f("var_eps")}, {v("std")});
  g.add_node("Reciprocal", {f("std")}, {v("inv")});
  g.add_node("Mul", {f("inv"), add_random_initializer(g, "gamma", {1, 3, 1, 1}, 3, 0.5f, 1.5f)}, {v("k")});
  g.add_node("Mul", {x, f("k")}, {v("xk")});
  g.add_node("Mul", {f("mean"), f("k")}, {v("mk")});
  g.add_node("Sub", {add_random_initializer(g, "beta", {1, 3, 1, 1}, 4), f("mk")}, {v("shift")});
  g.add_node("Add", {f("xk"), f("shift")}, {output(g, "y")}, "root");
  return m;
}

TEST(FuseInstanceNorm, FusesTheDecomposedPattern) {
  ir::Model after = run_exact(instance_norm_model(true), fuse_instance_norm, true);
  ASSERT_EQ(after.graph->node_count(), 1u);
  ir::Node* norm = producer_of_output(after, "y");
  ASSERT_EQ(norm->op_type, "InstanceNormalization");
  EXPECT_EQ(norm->name, "root");
  EXPECT_EQ(norm->attr_float("epsilon", 0), 1e-5f);
  EXPECT_EQ(norm->input(1)->initializer().dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(norm->input(2)->initializer().dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(after.graph->find_value("eps"), nullptr);
}

// Not a square inside the variance, or k read by a third node: not an instance norm any more.
TEST(FuseInstanceNorm, LeavesNearMisses) {
  run_exact(instance_norm_model(false), fuse_instance_norm, false);
  ir::Model m = instance_norm_model(true);
  m.graph->add_node("Identity", {m.graph->find_value("k")}, {output(*m.graph, "k_out")});
  run_exact(m, fuse_instance_norm, false);
}

// ---- FuseL2Norm

// u = Unsqueeze(x), y = u * Reciprocal(Sqrt(Max(ReduceSum(u*u, axes), 1e-12))).
ir::Model l2_norm_model(std::vector<int64_t> axes, bool square) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  auto v = [&](const std::string& name) { return g.add_value(name); };
  auto f = [&](const std::string& name) { return g.find_value(name); };
  g.add_node("Unsqueeze", {input(g, "x", {3, 8}), ints(g, "unsq_axes", {1})}, {v("u")});
  g.add_node("Mul", {f("u"), square ? f("u") : input(g, "w", {3, 1, 8})}, {v("sq")});
  g.add_node("ReduceSum", {f("sq"), ints(g, "axes", axes)}, {v("sum")});
  g.add_node("Max", {f("sum"), scalar(g, "eps", 1e-12f)}, {v("clamped")});
  g.add_node("Sqrt", {f("clamped")}, {v("norm")});
  g.add_node("Reciprocal", {f("norm")}, {v("inv")});
  g.add_node("Mul", {f("u"), f("inv")}, {output(g, "y")}, "root");
  return m;
}

TEST(FuseL2Norm, FusesIntoLpNormalization) {
  ir::Model after = run_exact(l2_norm_model({-1}, true), fuse_l2_norm, true);
  ir::Node* norm = producer_of_output(after, "y");
  ASSERT_EQ(norm->op_type, "LpNormalization");
  EXPECT_EQ(norm->name, "root");
  EXPECT_EQ(norm->attr_int("p", 0), 2);
  EXPECT_EQ(norm->attr_int("axis", 0), -1);
  EXPECT_EQ(after.graph->node_count(), 2u);  // the Unsqueeze and the norm
  EXPECT_EQ(after.graph->find_value("eps"), nullptr);
}

TEST(FuseL2Norm, LeavesTwoAxesAndAProductOfTwoTensors) {
  run_exact(l2_norm_model({1, 2}, true), fuse_l2_norm, false);
  run_exact(l2_norm_model({-1}, false), fuse_l2_norm, false);
}

// ---- ConvertClipToRelu

// Clip(x, 0, 6) becomes Relu; on inputs up to max (the feeds are in [-2, 2)) nothing changes. The
// bound itself is dropped (the calibrated range bounds the quantized output): 10 passes through.
TEST(ConvertClipToRelu, MinZeroBecomesRelu) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  g.add_node("Clip", {input(g, "x", {2, 8}), scalar(g, "lo", 0.0f), scalar(g, "hi", 6.0f)}, {output(g, "y")}, "clip");
  ir::Model after = run_exact(m, convert_clip_to_relu, true);
  ir::Node* relu = producer_of_output(after, "y");
  ASSERT_EQ(relu->op_type, "Relu");
  EXPECT_EQ(relu->name, "clip");
  EXPECT_EQ(relu->inputs().size(), 1u);
  EXPECT_EQ(after.graph->find_value("lo"), nullptr);
  EXPECT_EQ(after.graph->find_value("hi"), nullptr);
  testing::Feeds big = {{"x", Tensor::from_values<float>({2, 8}, std::vector<float>(16, 10.0f))}};
  EXPECT_EQ(run_model(m, big)[0].values<float>()[0], 6.0f);
  EXPECT_EQ(run_model(after, big)[0].values<float>()[0], 10.0f);
}

// Opset 9: bounds as attributes; min 0 converts.
TEST(ConvertClipToRelu, AttributeBoundsBelowOpset11) {
  ir::Model m = new_model(9);
  ir::Graph& g = *m.graph;
  ir::Node* clip = g.add_node("Clip", {input(g, "x", {2, 8})}, {output(g, "y")});
  clip->set_attribute(ir::Attribute::of_float("min", 0.0f));
  clip->set_attribute(ir::Attribute::of_float("max", 6.0f));
  ir::Model after = run_exact(m, convert_clip_to_relu, true);
  EXPECT_EQ(count_ops(after, "Relu"), 1u);
}

// min < 0, min > 0 (which vai_q_onnx 1.16 converts: Relu would let [0, 0.5) through) and no
// min at all stay Clips.
TEST(ConvertClipToRelu, LeavesOtherLowerBounds) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {2, 8});
  g.add_node("Clip", {x, scalar(g, "neg", -1.0f), scalar(g, "one", 1.0f)}, {output(g, "a")});
  g.add_node("Clip", {x, scalar(g, "half", 0.5f), scalar(g, "six", 6.0f)}, {output(g, "b")});
  g.add_node("Clip", {x, nullptr, g.find_value("one")}, {output(g, "c")});
  ir::Model after = run_exact(m, convert_clip_to_relu, false);
  EXPECT_EQ(count_ops(after, "Clip"), 3u);
}

// ---- ConvertLeakyReluToDPUVersion

// vai_q_onnx's values: 0.1 -> 26/256 = 0.1015625, 0.2 -> 51/256 = 0.19921875, 0.01 -> 3/256 =
// 0.01171875; the outputs are x >= 0 ? x : alpha' * x. Without the attribute: left at 0.01.
TEST(ConvertLeakyReluToDPUVersion, RoundsAlphaToMultiplesOf256th) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {4, 16});
  const std::vector<std::pair<float, float>> alphas = {{0.1f, 0.1015625f}, {0.2f, 0.19921875f}, {0.01f, 0.01171875f}};
  for (size_t i = 0; i < alphas.size(); ++i) {
    ir::Node* n = g.add_node("LeakyRelu", {x}, {output(g, "y" + std::to_string(i))});
    n->set_attribute(ir::Attribute::of_float("alpha", alphas[i].first));
  }
  g.add_node("LeakyRelu", {x}, {output(g, "default")});
  ir::Model after = run_pass(m, convert_leaky_relu_to_dpu_version, true);
  auto feeds = testing::seeded_feeds(m, 3);
  auto got = run_model(after, feeds);
  auto xs = feeds["x"].values<float>();
  for (size_t i = 0; i < alphas.size(); ++i) {
    EXPECT_EQ(producer_of_output(after, "y" + std::to_string(i))->attr_float("alpha", 0), alphas[i].second);
    for (size_t j = 0; j < xs.size(); ++j) {
      float want = xs[j] >= 0 ? xs[j] : xs[j] * alphas[i].second;
      ASSERT_EQ(got[i].values<float>()[j], want) << "alpha " << alphas[i].first << " x " << xs[j];
    }
  }
  EXPECT_EQ(producer_of_output(after, "default")->find_attribute("alpha"), nullptr);
  PassContext context;
  EXPECT_FALSE(convert_leaky_relu_to_dpu_version(after, context));  // already DPU slopes
}

// ---- ConvertSigmoidToHardSigmoid and ConvertHardSigmoidToDPUVersion

float hard_sigmoid(float x, float alpha, float beta) { return std::max(0.0f, std::min(1.0f, alpha * x + beta)); }

TEST(ConvertSigmoidToHardSigmoid, SigmoidBecomesHardSigmoidOfOneSixth) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  g.add_node("Sigmoid", {input(g, "x", {4, 16})}, {output(g, "y")}, "sig");
  ir::Model after = run_pass(m, convert_sigmoid_to_hard_sigmoid, true);
  ir::Node* hs = producer_of_output(after, "y");
  ASSERT_EQ(hs->op_type, "HardSigmoid");
  EXPECT_EQ(hs->name, "sig");
  EXPECT_EQ(hs->attr_float("alpha", 0), 1.0f / 6.0f);
  EXPECT_EQ(hs->find_attribute("beta"), nullptr);
  // Inputs beyond +-3 reach the saturated ends.
  testing::Feeds feeds = {{"x", testing::random_float({4, 16}, 9, -5.0f, 5.0f)}};
  std::vector<Tensor> outputs = run_model(after, feeds);
  auto got = outputs[0].values<float>();
  auto xs = feeds["x"].values<float>();
  for (size_t j = 0; j < xs.size(); ++j) EXPECT_NEAR(got[j], hard_sigmoid(xs[j], 1.0f / 6.0f, 0.5f), 1e-6) << xs[j];
}

// The DPU's 1/6 is 2731/2^14, so HardSigmoid(1/6, 0.5) is followed by a Mul by
// (2731/16384) / (1/6) = 16386/16384 = 1.0001220703125, writing the original output name.
TEST(ConvertHardSigmoidToDPUVersion, ScalesByTheDpusOneSixth) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Value* x = input(g, "x", {4, 16});
  ir::Node* a = g.add_node("HardSigmoid", {x}, {output(g, "a")}, "hs");
  a->set_attribute(ir::Attribute::of_float("alpha", 1.0f / 6.0f));
  ir::Node* b = g.add_node("HardSigmoid", {x}, {output(g, "b")});
  b->set_attribute(ir::Attribute::of_float("alpha", 1.0f / 6.0f));
  b->set_attribute(ir::Attribute::of_float("beta", 0.5f));
  g.add_node("HardSigmoid", {x}, {output(g, "c")});  // ONNX's alpha 0.2
  ir::Node* d = g.add_node("HardSigmoid", {x}, {output(g, "d")});
  d->set_attribute(ir::Attribute::of_float("alpha", 1.0f / 6.0f));
  d->set_attribute(ir::Attribute::of_float("beta", 0.6f));
  ir::Model after = run_pass(m, convert_hard_sigmoid_to_dpu_version, true);
  EXPECT_EQ(count_ops(after, "Mul"), 2u);
  ir::Node* mul = producer_of_output(after, "a");
  ASSERT_EQ(mul->op_type, "Mul");
  EXPECT_EQ(mul->input(0)->name(), "a_Mul");
  EXPECT_EQ(mul->input(0)->producer()->name, "hs");
  EXPECT_EQ(mul->input(1)->name(), "a_Scale");

  const double k = 16386.0 / 16384.0;
  ASSERT_EQ(k, 1.0001220703125);
  testing::Feeds feeds = {{"x", testing::random_float({4, 16}, 9, -5.0f, 5.0f)}};
  auto got = run_model(after, feeds);
  auto xs = feeds["x"].values<float>();
  for (size_t j = 0; j < xs.size(); ++j) {
    float scaled = hard_sigmoid(xs[j], 1.0f / 6.0f, 0.5f) * static_cast<float>(k);
    EXPECT_NEAR(got[0].values<float>()[j], scaled, 1e-6) << xs[j];
    EXPECT_NEAR(got[1].values<float>()[j], scaled, 1e-6) << xs[j];
    EXPECT_NEAR(got[2].values<float>()[j], hard_sigmoid(xs[j], 0.2f, 0.5f), 1e-6) << xs[j];
  }
  PassContext context;
  EXPECT_FALSE(convert_hard_sigmoid_to_dpu_version(after, context));  // no second Mul
}

// ---- ConvertAvgPoolToDPUVersion and ConvertReduceMeanToDPUVersion

// vai_q_onnx 1.16's factors (simulate_dpu.py): its special cases and what its rule gives.
TEST(DpuDivisionFactor, MatchesTheSpecsTable) {
  for (int64_t k : {1, 2, 4, 8, 16, 32}) EXPECT_EQ(dpu_avg_pool_factor(k, k), 1.0) << k;
  const std::vector<std::pair<int64_t, double>> table = {
      {3, 0.984375},          {5, 0.9765625},      {6, 0.984375},      {7, 1.0048828125},      {9, 0.9986572265625},
      {10, 1.0009765625},     {11, 1.00439453125}, {12, 1.001953125},  {13, 1.00054931640625}, {14, 1.0048828125},
      {15, 1.00250244140625}, {20, 1.0009765625},  {28, 1.0048828125}, {56, 1.0048828125}};
  for (auto [k, factor] : table) EXPECT_EQ(dpu_avg_pool_factor(k, k), factor) << k;
  EXPECT_EQ(dpu_avg_pool_factor(256, 256), 1.0);
  // The generic rule alone (ReduceMean): c/2^n = 85/256, 51/256, 51/512, 85/65536, 85/262144.
  for (int64_t count : {3, 5, 10, 768, 3072}) EXPECT_EQ(dpu_division_factor(count), 0.99609375) << count;
  for (int64_t count : {49, 196}) EXPECT_EQ(dpu_division_factor(count), 1.0048828125) << count;
  for (int64_t count : {1, 2, 64, 1024}) EXPECT_EQ(dpu_division_factor(count), 1.0) << count;
}

// Mean over each kh x kw window (stride 1, no padding) of x [N, C, H, W], times `factor`.
std::vector<float> brute_avg_pool(const Tensor& x, int64_t kh, int64_t kw, double factor) {
  const auto& d = x.dims();
  int64_t oh = d[2] - kh + 1, ow = d[3] - kw + 1;
  std::vector<float> out;
  auto v = x.values<float>();
  for (int64_t nc = 0; nc < d[0] * d[1]; ++nc)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double sum = 0;
        for (int64_t a = 0; a < kh; ++a)
          for (int64_t b = 0; b < kw; ++b) sum += v[(nc * d[2] + i + a) * d[3] + j + b];
        out.push_back(static_cast<float>(sum / (kh * kw) * factor));
      }
  return out;
}

// Worst |got - want| / (max - min of want) over the elements.
double worst_relative_to_range(std::span<const float> got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  auto [lo, hi] = std::minmax_element(want.begin(), want.end());
  double worst = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]) / (*hi - *lo));
  return worst;
}

// AveragePool 3x3 times 9*7/64; GlobalAveragePool over 5x5 times 25*10/256 and over 10x10 times
// 41/4096*100; a 3x2 kernel and a 4x6 plane (not square) are left alone.
TEST(ConvertAvgPoolToDPUVersion, ScalesSquarePoolsByTheTablesFactor) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Node* pool = g.add_node("AveragePool", {input(g, "x", {1, 2, 7, 7})}, {output(g, "p3")}, "pool");
  pool->set_attribute(ir::Attribute::of_ints("kernel_shape", {3, 3}));
  g.add_node("GlobalAveragePool", {input(g, "x5", {1, 3, 5, 5})}, {output(g, "g5")});
  g.add_node("GlobalAveragePool", {input(g, "x10", {1, 3, 10, 10})}, {output(g, "g10")});
  ir::Node* wide = g.add_node("AveragePool", {g.find_value("x")}, {output(g, "p32")});
  wide->set_attribute(ir::Attribute::of_ints("kernel_shape", {3, 2}));
  g.add_node("GlobalAveragePool", {input(g, "x46", {1, 3, 4, 6})}, {output(g, "g46")});
  ir::Model after = run_pass(m, convert_avg_pool_to_dpu_version, true);
  EXPECT_EQ(count_ops(after, "Mul"), 3u);
  EXPECT_EQ(producer_of_output(after, "p32")->op_type, "AveragePool");
  EXPECT_EQ(producer_of_output(after, "g46")->op_type, "GlobalAveragePool");

  auto feeds = testing::seeded_feeds(m, 11);
  auto got = run_model(after, feeds);
  auto plain = run_model(m, feeds);
  struct Case {
    size_t output;
    std::string x;
    int64_t kh, kw;
    double factor;
  };
  for (const Case& c :
       {Case{0, "x", 3, 3, 9.0 * 7 / 64}, Case{1, "x5", 5, 5, 25.0 * 10 / 256},
        Case{2, "x10", 10, 10, 41.0 / 4096 * 100}, Case{3, "x", 3, 2, 1.0}, Case{4, "x46", 4, 6, 1.0}}) {
    std::vector<float> want = brute_avg_pool(feeds[c.x], c.kh, c.kw, c.factor);
    EXPECT_LE(worst_relative_to_range(got[c.output].values<float>(), want), 1e-6) << c.output;
    // The scaled ones really differ from the plain pool (by far more than the tolerance).
    if (c.factor != 1.0) {
      EXPECT_GT(worst_relative_to_range(plain[c.output].values<float>(), want), 1e-4) << c.output;
    }
  }
  PassContext context;
  EXPECT_FALSE(convert_avg_pool_to_dpu_version(after, context));
}

// Mean over the last axis of x [R, count], times `factor`.
std::vector<float> brute_mean_last(const Tensor& x, double factor) {
  int64_t count = x.dims().back(), rows = x.size() / count;
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < count; ++i) sum += x.values<float>()[r * count + i];
    out.push_back(static_cast<float>(sum / count * factor));
  }
  return out;
}

// ReduceMean over 10 (axes attribute -1) times 51/512*10; over 7*7 (axes input [1,2] at opset 18,
// where vai_q_onnx 1.16 crashes) times 49*21/1024; with no axes it is left alone.
TEST(ConvertReduceMeanToDPUVersion, ScalesByTheGenericFactor) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  ir::Node* n = g.add_node("ReduceMean", {input(g, "x", {3, 10})}, {output(g, "y")}, "mean");
  n->set_attribute(ir::Attribute::of_ints("axes", {-1}));
  g.add_node("ReduceMean", {input(g, "all", {3, 10})}, {output(g, "z")});
  ir::Model after = run_pass(m, convert_reduce_mean_to_dpu_version, true);
  EXPECT_EQ(count_ops(after, "Mul"), 1u);
  auto feeds = testing::seeded_feeds(m, 13);
  auto got = run_model(after, feeds);
  EXPECT_LE(worst_relative_to_range(got[0].values<float>(), brute_mean_last(feeds["x"], 51.0 / 512 * 10)), 1e-6);
  EXPECT_LE(relative_diff({run_model(m, feeds)[1]}, {got[1]}), 0);

  // Opset 18, axes [1,2] as an input over x [5,7,7] whose row r holds r + noise: the means spread over
  // [0, 4], so float rounding in the sums stays far below the factor's 0.49 %.
  ir::Model m18 = new_model(18);
  ir::Graph& g18 = *m18.graph;
  ir::Value* x = input(g18, "x", {5, 7, 7});
  ir::Node* r = g18.add_node("ReduceMean", {x, ints(g18, "axes", {1, 2})}, {output(g18, "y")});
  r->set_attribute(ir::Attribute::of_int("keepdims", 0));
  ir::Model after18 = run_pass(m18, convert_reduce_mean_to_dpu_version, true);
  Tensor rows = testing::random_float({5, 49}, 14, -0.5f, 0.5f);
  for (int64_t i = 0; i < rows.size(); ++i) rows.mutable_values<float>()[i] += static_cast<float>(i / 49);
  testing::Feeds feeds18 = {
      {"x", Tensor::from_values<float>({5, 7, 7},
                                       std::vector<float>(rows.values<float>().begin(), rows.values<float>().end()))}};
  std::vector<Tensor> got18 = run_model(after18, feeds18);
  EXPECT_LE(worst_relative_to_range(got18[0].values<float>(), brute_mean_last(rows, 49.0 * 21 / 1024)), 1e-6);
  EXPECT_GT(
      worst_relative_to_range(run_model(m18, feeds18)[0].values<float>(), brute_mean_last(rows, 49.0 * 21 / 1024)),
      1e-4);
}

// ---- ConvertSoftmaxToDPUVersion

// bfloat16 rounding to nearest even, from the bits (the test's own, not ir/float16.h's).
float bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  u &= 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

// ConvertSoftmaxToDPUVersion's arithmetic on rows of x [R, count] over the last axis, every
// bfloat16 step rounded.
std::vector<float> brute_dpu_softmax(const Tensor& x) {
  int64_t count = x.dims().back(), rows = x.size() / count;
  const float inv_ln2 = bf(1.4426950408889634f), ln2 = bf(0.6931471805599453f);
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> e(count);
    float sum = 0;
    for (int64_t i = 0; i < count; ++i) {
      float xb = bf(x.values<float>()[r * count + i]);
      float t = std::floor(bf(xb * inv_ln2));
      float rr = bf(xb - bf(t * ln2));
      float p = bf(rr * 0.21875f + 0.486328125f);
      p = bf(rr * p + 1.0f);
      p = bf(rr * p + 1.0f);
      e[i] = bf(bf(std::exp2(t)) * p);
      sum += e[i];
    }
    float s = bf(sum);
    for (float v : e) out.push_back(bf(v / s));
  }
  return out;
}

TEST(ConvertSoftmaxToDPUVersion, MatchesTheBfloat16Formula) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  g.add_node("Softmax", {input(g, "x", {6, 8})}, {output(g, "y")}, "sm");
  ir::Model after = run_pass(m, convert_softmax_to_dpu_version, true);
  EXPECT_EQ(count_ops(after, "Softmax"), 0u);
  ASSERT_NE(producer_of_output(after, "y"), nullptr);
  EXPECT_EQ(producer_of_output(after, "y")->op_type, "Cast");
  testing::Feeds feeds = {{"x", testing::random_float({6, 8}, 21, -4.0f, 4.0f)}};
  std::vector<Tensor> outputs = run_model(after, feeds), softmax = run_model(m, feeds);
  auto got = outputs[0].values<float>();
  auto exact = softmax[0].values<float>();
  std::vector<float> want = brute_dpu_softmax(feeds["x"]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << i;
    EXPECT_NEAR(got[i], exact[i], 0.02) << i;  // still a softmax
  }
}

// Below opset 13 Softmax flattens from its axis: only a last axis is the reduction the subgraph does.
TEST(ConvertSoftmaxToDPUVersion, LeavesANotLastAxisBeforeOpset13) {
  ir::Model m = new_model(11);
  ir::Graph& g = *m.graph;
  g.add_node("Softmax", {input(g, "x", {2, 3, 4})}, {output(g, "y")});  // axis 1: over 3 x 4
  run_pass(m, convert_softmax_to_dpu_version, false);
}

// ---- ConvertInstanceNormToDPUVersion

// v on the accumulator grid of exponent m (Quark's kernel adds aligned to the larger exponent):
// |v| + 2^(m-127) holds float32's 24 bits, so v keeps the multiples of that sum's last place,
// rounded half to even. Written with ldexp, not the kernel's bit operations.
float on_grid(float v, int m) {
  const double top = std::ldexp(1.0, m - 127);
  const double step = std::fabs(v) + top < 2 * top ? std::ldexp(1.0, m - 150) : std::ldexp(1.0, m - 149);
  return static_cast<float>(std::nearbyint(v / step) * step);
}

int biased_exponent(float v) {
  if (v == 0) return 0;
  int e;
  std::frexp(v, &e);
  return e + 126;
}

// c - a * b as the NPU emulates float32 on bfloat16 multipliers: a and -b in three bfloat16
// parts, the nine products accumulated on the grid of the largest term.
float npu_multiply_subtract(float a, float b, float c) {
  const float as[3] = {bf(a), bf(a - bf(a)), bf(a - bf(a) - bf(a - bf(a)))};
  const float nb = -b;
  const float bs[3] = {bf(nb), bf(nb - bf(nb)), bf(nb - bf(nb) - bf(nb - bf(nb)))};
  auto mac = [](float x, float y, float acc) {
    const int m = std::max(biased_exponent(x) + biased_exponent(y) - 127, biased_exponent(acc));
    return on_grid(acc, m) + on_grid(x * y, m);
  };
  // The smallest products first: (i, j) pairs in the reference's order.
  const int order[7][2] = {{2, 1}, {1, 2}, {0, 2}, {1, 1}, {2, 0}, {1, 0}, {0, 1}};
  float terms = as[2] * bs[2];
  for (const auto& ij : order) terms = mac(as[ij[0]], bs[ij[1]], terms);
  const int m = std::max({biased_exponent(as[0]) + biased_exponent(bs[0]) - 127, biased_exponent(terms),
                          biased_exponent(c)});
  return on_grid(terms, m) + on_grid(c, m) + on_grid(as[0] * bs[0], m);
}

// Quark's ExtendedInstanceNormalization step by step on x [N, C, S].
std::vector<float> brute_dpu_instance_norm(const Tensor& x, const std::vector<float>& scale,
                                           const std::vector<float>& bias, float epsilon) {
  const int64_t C = x.dims()[1], S = x.dims()[2], rows = x.size() / S;
  auto xs = x.values<float>();
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0, sum_sq = 0;
    for (int64_t j = 0; j < S; ++j) {
      const float v = bf(xs[r * S + j]);
      sum += v;
      sum_sq = static_cast<float>(sum_sq + std::pow(static_cast<double>(v), 2));
    }
    const float per = static_cast<float>(1.0 / S);
    const float mean = sum * per;
    const float inv = bf(std::pow(npu_multiply_subtract(mean, mean, sum_sq * per) + epsilon, -0.5f));
    for (int64_t j = 0; j < S; ++j) {
      const float t = bf(bf(bf(xs[r * S + j]) * inv) - bf(bf(mean) * inv));
      out.push_back(bf(bf(scale[r % C]) * t + bf(bias[r % C])));
    }
  }
  return out;
}

TEST(ConvertInstanceNormToDPUVersion, BecomesQuarksOpAndMatchesItsBfloat16Steps) {
  ir::Model m = new_model(13);
  ir::Graph& g = *m.graph;
  const std::vector<float> scale = {1.5f, -0.75f, 0.3f}, bias = {0.1f, 2.0f, -1.25f};
  ir::Value* s = g.add_value("scale");
  g.set_initializer(s, Tensor::from_values<float>({3}, scale));
  ir::Value* b = g.add_value("bias");
  g.set_initializer(b, Tensor::from_values<float>({3}, bias));
  ir::Node* n = g.add_node("InstanceNormalization", {input(g, "x", {2, 3, 50}), s, b}, {output(g, "y")}, "in");
  n->set_attribute(ir::Attribute::of_float("epsilon", 1e-3f));
  ir::Model after = run_pass(m, convert_instance_norm_to_dpu_version, true);
  const ir::Node* ext = producer_of_output(after, "y");
  ASSERT_NE(ext, nullptr);
  EXPECT_EQ(ext->op_type, "ExtendedInstanceNormalization");
  EXPECT_EQ(ext->domain, "com.amd.quark");
  EXPECT_EQ(ext->name, "in");
  EXPECT_EQ(ext->attr_float("epsilon", 0), 1e-3f);
  EXPECT_EQ(after.opset("com.amd.quark"), 1);
  // Rows of small spread around a large offset make the variance's cancellation count.
  Tensor x = testing::random_float({2, 3, 50}, 22, -3.0f, 3.0f);
  auto xv = x.mutable_values<float>();
  for (size_t i = 100; i < 150; ++i) xv[i] = 40.0f + xv[i] / 8;
  testing::Feeds feeds = {{"x", x}};
  std::vector<float> want = brute_dpu_instance_norm(x, scale, bias, 1e-3f);
  std::vector<Tensor> got = run_model(after, feeds), exact = run_model(m, feeds);
  ASSERT_EQ(got[0].size(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[0].values<float>()[i], want[i]) << i;
    if (i / 50 != 2) {  // (that row's bfloat16 inputs are 0.25 apart, as wide as its spread)
      EXPECT_NEAR(got[0].values<float>()[i], exact[0].values<float>()[i], 0.1) << i;  // still an instance norm
    }
  }
}

// ---- the lists

TEST(DpuPassLists, SpecOrderAndOptionKeys) {
  std::vector<std::string> pre, simulation;
  for (const PassInfo& p : dpu_pre_calibration_passes()) pre.push_back(p.name);
  for (const PassInfo& p : dpu_simulation_passes()) simulation.push_back(p.name);
  EXPECT_EQ(pre, (std::vector<std::string>{"fuse_instance_norm", "convert_bn_to_conv",
                                           "convert_reduce_mean_to_global_avg_pool", "split_large_kernel_pool",
                                           "convert_split_to_slice", "fuse_l2_norm"}));
  EXPECT_EQ(simulation,
            (std::vector<std::string>{"convert_leaky_relu_to_dpu_version", "convert_sigmoid_to_hard_sigmoid",
                                      "convert_hard_sigmoid_to_dpu_version", "convert_avg_pool_to_dpu_version",
                                      "convert_reduce_mean_to_dpu_version", "convert_softmax_to_dpu_version",
                                      "convert_instance_norm_to_dpu_version", "convert_clip_to_dpu_version"}));  // Quark's simulate_transforms order
  EXPECT_EQ(dpu_post_calibration_passes().at(0).name, std::string("convert_clip_to_relu"));
  size_t listed = pre.size() + simulation.size() + 1;
  EXPECT_EQ(dpu_pass_options().size(), listed);
  for (const DpuPassOption& o : dpu_pass_options()) {
    bool off_by_default = std::string(o.option) == "FuseInstanceNorm" || std::string(o.option) == "FuseL2Norm" ||
                          std::string(o.option) == "ConvertClipToRelu" ||
                          std::string(o.option) == "ConvertSoftmaxToDPUVersion" ||
                          std::string(o.option) == "ConvertInstanceNormToDPUVersion" ||
                          std::string(o.option) == "ConvertClipToDPUVersion";
    EXPECT_EQ(o.default_value, !off_by_default) << o.option;  // vai_q_onnx 1.16's and Quark's XINT8 defaults
  }
}

// ---- real models nobody here wrote

using testing::kDet;
const fs::path kMobileNetV3 = fs::path(ONNXPTQ_MODELS_DIR) / "mobilenet_v3_large.onnx";

ir::Model load_with_shapes(const fs::path& path, const std::map<std::string, std::vector<int64_t>>& shapes) {
  EXPECT_TRUE(fs::exists(path)) << path;
  ir::Model model = ir::load_model(path);
  // The sizes the model is run at, written into its input types so inference gives static shapes.
  for (ir::Value* in : model.graph->inputs())
    if (auto it = shapes.find(in->name()); it != shapes.end())
      in->type = ir::ValueType::tensor(in->type.elem_type, it->second);
  PassContext context;  // no input_shapes: with static inputs the engine's sample run gives exact dims
  infer_shapes(model, context);
  return model;
}

// PP-OCRv4 det at 160 x 160: its squeeze-excite GlobalAveragePools over 40 x 40 = 1600 split into
// AveragePool 5x5 (factor(40) = (5, 8)) and a GAP over 8 x 8; the outputs agree.
TEST(DpuPassesOnRealModels, SplitLargeKernelPoolPpOcrDet) {
  const std::map<std::string, std::vector<int64_t>> shapes = {{"x", {1, 3, 160, 160}}};
  ir::Model before = load_with_shapes(kDet, shapes);
  ir::Model after = ir::clone_model(before);
  PassContext context;
  ASSERT_TRUE(split_large_kernel_pool(after, context));
  size_t split = count_ops(after, "AveragePool");
  EXPECT_GT(split, 0u);
  for (const auto& node : after.graph->nodes()) {
    if (node->op_type != "AveragePool") continue;
    auto dims = *node->input(0)->type.static_shape();
    int64_t h = dims[2], w = dims[3];
    EXPECT_GT(h * w, 512) << node->name;
    std::vector<int64_t> kernel = node->attr_ints("kernel_shape", {});
    if (h == 40 && w == 40) {
      EXPECT_EQ(kernel, (std::vector<int64_t>{5, 5})) << node->name;
    }
  }
  auto feeds = testing::seeded_feeds(before, 7, shapes);
  auto expected = run_model(before, feeds);
  double diff = relative_diff(expected, run_model(after, feeds));
  std::cout << "det: " << split << " pools split, max abs diff / range = " << diff << "\n";
  EXPECT_LE(diff, 1e-5);
}

// MobileNetV3-Large's 29 HardSigmoid(1/6) each get the Mul by 1.0001220703125; its GAPs (over
// 56, 28, 14 and 7 square planes at 224 x 224) the Mul by 1.0048828125 (vai_q_onnx's factor).
TEST(DpuPassesOnRealModels, SimulationPassesMobileNetV3) {
  const std::map<std::string, std::vector<int64_t>> shapes = {};
  ir::Model model = load_with_shapes(kMobileNetV3, shapes);
  size_t hard_sigmoids = count_ops(model, "HardSigmoid"), gaps = count_ops(model, "GlobalAveragePool");
  ASSERT_EQ(hard_sigmoids, 29u);
  size_t muls = count_ops(model, "Mul");
  PassContext context;
  for (const PassInfo& p : dpu_simulation_passes()) p.run(model, context);
  EXPECT_EQ(count_ops(model, "Mul"), muls + hard_sigmoids + gaps);
  for (const auto& node : model.graph->nodes()) {
    if (node->op_type != "HardSigmoid" && node->op_type != "GlobalAveragePool") continue;
    const ir::Value* out = node->output(0);
    ASSERT_EQ(out->uses().size(), 1u) << node->name;
    const ir::Node* mul = out->uses()[0].node;
    ASSERT_EQ(mul->op_type, "Mul");
    const ir::Tensor* k = &mul->input(1)->producer()->attributes[0].t;
    float want = node->op_type == "HardSigmoid" ? 1.0001220703125f : 1.0048828125f;
    auto dims = *node->input(0)->type.static_shape();
    if (node->op_type == "GlobalAveragePool") {
      EXPECT_TRUE(dims[2] == 7 || dims[2] == 14 || dims[2] == 28 || dims[2] == 56) << node->name;
    }
    EXPECT_EQ(k->values<float>()[0], want) << node->name;
  }
  auto feeds = testing::seeded_feeds(model, 7);
  for (const ir::Tensor& t : run_model(model, feeds))
    for (float v : t.values<float>()) ASSERT_TRUE(std::isfinite(v));
}

// PP-OCRv4 rec with the SimulateDPU passes that are on by default: its 7 Sigmoids become
// HardSigmoid(1/6) and, with its 2 HardSigmoid(0.1666667, 0.5), get the 1.0001220703125 Mul; its 10
// ReduceMean over the last axis get the generic factor of that axis' size; the 3x2 AveragePool (not
// square) stays.
TEST(DpuPassesOnRealModels, DefaultSimulationPassesPpOcrRec) {
  const fs::path rec = kDet.parent_path() / "ch_PP-OCRv4_rec_infer.onnx";
  const std::map<std::string, std::vector<int64_t>> shapes = {{"x", {1, 3, 48, 160}}};
  ir::Model model = load_with_shapes(rec, shapes);
  ASSERT_EQ(count_ops(model, "Sigmoid"), 7u);
  ASSERT_EQ(count_ops(model, "HardSigmoid"), 2u);
  ASSERT_EQ(count_ops(model, "ReduceMean"), 10u);
  size_t muls = count_ops(model, "Mul");
  PassContext context;
  for (const PassInfo& p : dpu_simulation_passes())
    for (const DpuPassOption& o : dpu_pass_options())
      if (std::string(o.pass) == p.name && o.default_value) p.run(model, context);
  for (const std::string& line : context.log) std::cout << "  " << line << "\n";
  EXPECT_EQ(count_ops(model, "Sigmoid"), 0u);
  EXPECT_EQ(count_ops(model, "HardSigmoid"), 9u);
  EXPECT_EQ(count_ops(model, "Softmax"), 3u);  // ConvertSoftmaxToDPUVersion is off by default
  EXPECT_EQ(count_ops(model, "Mul"), muls + 9 + 10);
  for (const auto& node : model.graph->nodes()) {
    if (node->op_type != "ReduceMean") continue;
    const ir::Node* mul = node->output(0)->uses().at(0).node;
    ASSERT_EQ(mul->op_type, "Mul") << node->name;
    int64_t count = node->input(0)->type.static_shape()->back();
    EXPECT_EQ(mul->input(1)->producer()->attributes[0].t.values<float>()[0],
              static_cast<float>(dpu_division_factor(count)))
        << node->name;
  }
  auto feeds = testing::seeded_feeds(model, 7, shapes);
  for (const ir::Tensor& t : run_model(model, feeds))
    for (float v : t.values<float>()) ASSERT_TRUE(std::isfinite(v));
}

// ConvertClipToRelu on MobileNetV2's 35 Clip(0, 6) (bounds as inputs) and PP-OCR cls's 18 (bounds
// as attributes, opset 9): all become Relu, and their bound constants go.
TEST(DpuPassesOnRealModels, ConvertClipToReluMobileNetV2AndPpOcrCls) {
  const fs::path cls = kDet.parent_path() / "ch_ppocr_mobile_v2.0_cls_infer.onnx";
  for (auto [path, clips] :
       {std::pair{fs::path(ONNXPTQ_MODELS_DIR) / "mobilenet_v2.onnx", size_t{35}}, std::pair{cls, size_t{18}}}) {
    ASSERT_TRUE(fs::exists(path)) << path;
    ir::Model model = ir::load_model(path);
    ASSERT_EQ(count_ops(model, "Clip"), clips) << path;
    size_t relus = count_ops(model, "Relu"), values = model.graph->value_count();
    PassContext context;
    EXPECT_TRUE(convert_clip_to_relu(model, context));
    EXPECT_EQ(count_ops(model, "Clip"), 0u) << path;
    EXPECT_EQ(count_ops(model, "Relu"), relus + clips) << path;
    EXPECT_LE(model.graph->value_count(), values) << path;
  }
}

}  // namespace
}  // namespace onnxptq::passes
