#include <gtest/gtest.h>

#include "engine/fusion.h"
#include "ir/model.h"

namespace onnxptq::engine {
namespace {

// x -> Conv(w) -> c -> <activation> -> y
struct ConvThen {
  ir::Model m;
  ir::Value *c, *y;
  explicit ConvThen(const std::string& activation) {
    ir::Graph& g = *m.graph;
    ir::Value* x = g.add_value("x");
    ir::Value* w = g.add_value("w");
    g.set_initializer(w, ir::Tensor(ir::DataType::Float, {4, 3, 3, 3}));
    c = g.add_value("c");
    y = g.add_value("y");
    g.add_input(x);
    ir::Node* conv = g.add_node("Conv", {x, w}, {c}, "conv");
    conv->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
    g.add_node(activation, {c}, {y}, "act");
    g.add_output(y);
  }
};

auto nothing_visible = [](const ir::Value*) { return false; };

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

}  // namespace
}  // namespace onnxptq::engine
