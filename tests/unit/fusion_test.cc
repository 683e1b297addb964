#include <gtest/gtest.h>

#include <random>

#include "engine/fusion.h"
#include "engine/session.h"
#include "ir/model.h"
#include "support/model_run.h"

namespace onnxptq::engine {
namespace {

// x -> Conv(w) -> c -> <activation> -> y
struct ConvThen {
  ir::Model m;
  ir::Value *c, *y;
  explicit ConvThen(const std::string& activation, int64_t kernel = 3) {
    ir::Graph& g = *m.graph;
    ir::Value* x = g.add_value("x");
    ir::Value* w = g.add_value("w");
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> weights(static_cast<size_t>(16 * 8 * kernel * kernel));
    for (float& v : weights) v = normal(rng);
    g.set_initializer(w, ir::Tensor::from_values<float>({16, 8, kernel, kernel}, weights));
    c = g.add_value("c");
    y = g.add_value("y");
    g.add_input(x);
    ir::Node* conv = g.add_node("Conv", {x, w}, {c}, "conv");
    if (kernel == 3) conv->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
    g.add_node(activation, {c}, {y}, "act");
    g.add_output(y);
  }
};

using testing::nothing_visible;

// {"x": normal(0, stddev) values of shape `dims`, from a generator seeded `seed`}.
std::map<std::string, ir::Tensor> normal_feed(uint32_t seed, const std::vector<int64_t>& dims, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, stddev);
  int64_t size = 1;
  for (int64_t d : dims) size *= d;
  std::vector<float> xs(static_cast<size_t>(size));
  for (float& v : xs) v = normal(rng);
  return {{"x", ir::Tensor::from_values<float>(dims, xs)}};
}

// x -> Conv(w) -> c; z = c * Sigmoid(c) (SiLU as PyTorch exports it), the Mul's operands in
// either order.
struct ConvThenSwish : ConvThen {
  ir::Value* z;
  explicit ConvThenSwish(int64_t kernel = 3, bool gate_first = false) : ConvThen("Sigmoid", kernel) {
    ir::Graph& g = *m.graph;
    z = g.add_value("z");
    g.add_node("Mul", gate_first ? std::vector<ir::Value*>{y, c} : std::vector<ir::Value*>{c, y}, {z}, "mul");
    g.set_output(0, z);
  }
};

TEST(FuseConvActivations, ReluBecomesOneFusedConvKeepingConvAttributes) {
  ConvThen t("Relu");
  EXPECT_EQ(fuse_conv_activations(*t.m.graph, nothing_visible), 1);
  ASSERT_EQ(t.m.graph->node_count(), 1u);
  const ir::Node& f = *t.m.graph->nodes()[0];
  EXPECT_EQ(f.op_type, "FusedConv");
  EXPECT_EQ(f.domain, kEngineDomain);
  EXPECT_EQ(f.name, "conv");
  EXPECT_EQ(f.output(0), t.y);
  EXPECT_EQ(f.attr_string("activation", ""), "Relu");
  EXPECT_EQ(f.attr_ints("pads", {}), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(t.m.graph->find_value("c"), nullptr);
}

TEST(FuseConvActivations, ParametersOfLeakyReluHardSigmoidAndClip) {
  ConvThen leaky("LeakyRelu");
  fuse_conv_activations(*leaky.m.graph, nothing_visible);
  EXPECT_EQ(leaky.m.graph->nodes()[0]->attr_floats("activation_params", {}), (std::vector<float>{0.01f, 0.0f}));

  ConvThen hs("HardSigmoid");
  hs.m.graph->nodes()[1]->set_attribute(ir::Attribute::of_float("alpha", 0.25f));
  fuse_conv_activations(*hs.m.graph, nothing_visible);
  EXPECT_EQ(hs.m.graph->nodes()[0]->attr_floats("activation_params", {}), (std::vector<float>{0.25f, 0.5f}));

  ConvThen clip("Clip");
  ir::Graph& g = *clip.m.graph;
  ir::Value* lo = g.add_value("lo");
  ir::Value* hi = g.add_value("hi");
  g.set_initializer(lo, ir::Tensor::from_values<float>({}, std::vector<float>{0}));
  g.set_initializer(hi, ir::Tensor::from_values<float>({}, std::vector<float>{6}));
  g.set_node_input(g.nodes()[1].get(), 1, lo);
  g.set_node_input(g.nodes()[1].get(), 2, hi);
  EXPECT_EQ(fuse_conv_activations(g, nothing_visible), 1);
  EXPECT_EQ(g.nodes()[0]->attr_floats("activation_params", {}), (std::vector<float>{0.0f, 6.0f}));

  ConvThen exported("Clip");  // bounds from Constant nodes, as PyTorch exports them
  ir::Graph& e = *exported.m.graph;
  ir::Value* top = e.add_value("top");
  ir::Node* constant = e.insert_node_before(e.nodes()[0].get(), "Constant", {}, {}, "six");
  e.set_node_output(constant, 0, top);
  constant->set_attribute(ir::Attribute::of_tensor("value", ir::Tensor::from_values<float>({}, std::vector<float>{6})));
  e.set_node_input(e.nodes()[2].get(), 2, top);
  EXPECT_EQ(fuse_conv_activations(e, nothing_visible), 1);
  EXPECT_EQ(e.find_value("c"), nullptr);
  const ir::Node* fused = e.nodes()[1].get();
  EXPECT_EQ(fused->op_type, "FusedConv");
  EXPECT_EQ(fused->attr_floats("activation_params", {}), (std::vector<float>{-3.402823466e38f, 6.0f}));
}

TEST(FuseConvActivations, LeavesWhatMustStaySeen) {
  ConvThen visible("Relu");
  EXPECT_EQ(fuse_conv_activations(*visible.m.graph, [&](const ir::Value* v) { return v == visible.c; }), 0);
  EXPECT_EQ(visible.m.graph->node_count(), 2u);

  ConvThen shared("Relu");  // c also feeds a second node
  shared.m.graph->add_node("Neg", {shared.c}, {shared.m.graph->add_value("n")}, "neg");
  EXPECT_EQ(fuse_conv_activations(*shared.m.graph, nothing_visible), 0);

  ConvThen other("Softmax");  // not an activation oneDNN fuses
  EXPECT_EQ(fuse_conv_activations(*other.m.graph, nothing_visible), 0);

  ConvThen dynamic_clip("Clip");  // bounds computed at run time
  ir::Graph& g = *dynamic_clip.m.graph;
  ir::Value* bound = g.add_value("bound");
  g.add_input(bound);
  g.set_node_input(g.nodes()[1].get(), 2, bound);
  EXPECT_EQ(fuse_conv_activations(g, nothing_visible), 0);
}

TEST(FuseConvActivations, SigmoidTimesItsInputBecomesSwish) {
  for (bool gate_first : {false, true}) {
    ConvThenSwish t(3, gate_first);
    EXPECT_EQ(fuse_conv_activations(*t.m.graph, nothing_visible), 1);
    ASSERT_EQ(t.m.graph->node_count(), 1u);
    const ir::Node& f = *t.m.graph->nodes()[0];
    EXPECT_EQ(f.op_type, "FusedConv");
    EXPECT_EQ(f.attr_string("activation", ""), "Swish");
    EXPECT_EQ(f.output(0), t.z);
    EXPECT_EQ(t.m.graph->find_value("c"), nullptr);
    EXPECT_EQ(t.m.graph->find_value("y"), nullptr);
  }
  // The Sigmoid's output seen, or the Mul's other operand not the Conv's output: no Swish (the
  // Sigmoid alone cannot fuse either: c has two users).
  ConvThenSwish seen;
  EXPECT_EQ(fuse_conv_activations(*seen.m.graph, [&](const ir::Value* v) { return v == seen.y; }), 0);
  ConvThenSwish squared;
  squared.m.graph->set_node_input(squared.m.graph->nodes()[2].get(), 1, squared.c);  // c * c
  squared.m.graph->add_output(squared.y);
  EXPECT_EQ(fuse_conv_activations(*squared.m.graph, nothing_visible), 0);
}

// The fused kernel (one oneDNN primitive with a post-op) computes what Conv then the activation
// compute, for 3x3 convolutions (blocked layout) and 1x1 ones (plain layout) alike.
TEST(FusedConv, SameOutputsAsConvThenActivation) {
  const std::map<std::string, ir::Tensor> feeds = normal_feed(11, {2, 8, 9, 7}, 1.f);
  for (const char* activation : {"Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Swish"}) {
    for (int64_t kernel : {1, 3}) {
      const bool swish = std::string(activation) == "Swish";
      ConvThen t = swish ? ConvThenSwish(kernel) : ConvThen(activation, kernel);
      if (std::string(activation) == "Clip") {
        ir::Graph& g = *t.m.graph;
        ir::Value* lo = g.add_value("lo");
        ir::Value* hi = g.add_value("hi");
        g.set_initializer(lo, ir::Tensor::from_values<float>({}, std::vector<float>{-0.5f}));
        g.set_initializer(hi, ir::Tensor::from_values<float>({}, std::vector<float>{1.5f}));
        g.set_node_input(g.nodes()[1].get(), 1, lo);
        g.set_node_input(g.nodes()[1].get(), 2, hi);
      }
      t.m.set_opset("", 17);
      SessionOptions plain;
      plain.optimize = false;
      std::vector<ir::Tensor> want = Session(t.m, plain).run(feeds);
      bool saw_conv_output = false;
      TensorObserver observe = [&](const std::string& name, const ir::Tensor&) { saw_conv_output |= name == "c"; };
      std::vector<ir::Tensor> got = Session(t.m).run(feeds, {&observe});
      EXPECT_FALSE(saw_conv_output) << activation << ": not fused";
      ASSERT_EQ(got[0].dims(), want[0].dims()) << activation;
      auto g = got[0].values<float>(), w = want[0].values<float>();
      int64_t differ = 0;
      for (size_t i = 0; i < w.size(); ++i) differ += std::fabs(g[i] - w[i]) > 1e-5f * (1 + std::fabs(w[i]));
      EXPECT_EQ(differ, 0) << activation << " after a " << kernel << "x" << kernel << " Conv";
    }
  }
}

// A 1x1 convolution over 100 outputs or more on NCHW tensors runs as one GEMM, whose post-ops
// oneDNN applies in a slow scalar pass: the engine applies them itself, with its own Sigmoid and
// Tanh, so that the fused node gives exactly what the unfused ops give. A Sigmoid or SiLU is the
// engine's own on the other paths too (here the 3x3 convolution's blocked layout).
TEST(FusedConv, TheEnginesOwnActivationsGiveTheUnfusedValues) {
  const std::map<std::string, ir::Tensor> feeds = normal_feed(12, {2, 8, 12, 12}, 2.f);
  for (const char* activation : {"Sigmoid", "Tanh", "Swish"}) {
    for (int64_t kernel : {1, 3}) {
      if (std::string(activation) == "Tanh" && kernel == 3) continue;  // oneDNN's eltwise_tanh there
      const bool swish = std::string(activation) == "Swish";
      ConvThen t = swish ? ConvThenSwish(kernel) : ConvThen(activation, kernel);
      t.m.set_opset("", 17);
      SessionOptions plain;
      plain.optimize = false;
      std::vector<ir::Tensor> want = Session(t.m, plain).run(feeds);
      std::vector<ir::Tensor> got = Session(t.m).run(feeds);
      ASSERT_EQ(got[0].dims(), want[0].dims()) << activation;
      auto g = got[0].values<float>(), w = want[0].values<float>();
      int64_t differ = 0;
      for (size_t i = 0; i < w.size(); ++i) differ += g[i] != w[i];
      EXPECT_EQ(differ, 0) << activation << " after a " << kernel << "x" << kernel << " Conv";
    }
  }
}

}  // namespace
}  // namespace onnxptq::engine
