// The passes that fold constants into others: fold_constants, fold_batch_norm, fold_channel_mul,
// convert_bn_to_conv, fuse_conv_add_bias. Each runs on a small built graph; the engine's outputs
// before and after must agree and the graph must have changed as the pass claims.
#include <gtest/gtest.h>

#include "passes/optimize.h"
#include "support/pass_check.h"

namespace onnxptq::passes {
namespace {

using ir::DataType;
using ir::Tensor;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::count_ops;
using testing::ints;
using testing::relative_diff;
using testing::run_model;
using testing::run_pass_checked;

// BatchNormalization parameters of `channels` (variance in [0.1, 2), gamma in [0.5, 1.5)).
ir::Node* add_batch_norm(ir::Graph& g, const std::string& name, ir::Value* x, ir::Value* y, int64_t channels,
                         uint32_t seed) {
  std::vector<ir::Value*> inputs = {x, add_random_initializer(g, name + "_gamma", {channels}, seed, 0.5f, 1.5f),
                                    add_random_initializer(g, name + "_beta", {channels}, seed + 1),
                                    add_random_initializer(g, name + "_mean", {channels}, seed + 2),
                                    add_random_initializer(g, name + "_var", {channels}, seed + 3, 0.1f, 2.0f)};
  ir::Node* bn = g.add_node("BatchNormalization", inputs, {y}, name);
  bn->set_attribute(ir::Attribute::of_float("epsilon", 1e-3f));
  return bn;
}

// x [N,3]: k = Add(Constant c, initializer w) folds; Shape(x) depends on the input and stays;
// ConstantOfShape [2,200,200] (320 kB from 24 bytes) stays, and so the ReduceSum after it.
TEST(FoldConstants, FoldsConstantWorkButNotShapesOfInputsOrLargeTensors) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {-1, 3});
  g.add_input(x);
  ir::Value *c = g.add_value("c"), *k = g.add_value("k"), *y1 = g.add_value("y1"), *s = g.add_value("s");
  std::vector<float> c_values = {1.5f, -2.0f, 0.25f};
  g.add_node("Constant", {}, {c})
      ->set_attribute(ir::Attribute::of_tensor("value", Tensor::from_values<float>({3}, c_values)));
  ir::Value* w = add_random_initializer(g, "w", {3}, 4);
  std::vector<float> w_values(w->initializer().values<float>().begin(), w->initializer().values<float>().end());
  g.add_node("Add", {c, w}, {k});
  g.add_node("Mul", {x, k}, {y1});
  g.add_node("Shape", {x}, {s});
  ir::Value *big = g.add_value("big"), *total = g.add_value("total"), *y2 = g.add_value("y2");
  g.add_node("ConstantOfShape", {ints(g, "big_shape", {2, 200, 200})}, {big})
      ->set_attribute(ir::Attribute::of_tensor("value", Tensor::from_values<float>({1}, std::vector<float>{0.5f})));
  g.add_node("ReduceSum", {big}, {total})->set_attribute(ir::Attribute::of_int("keepdims", 0));
  g.add_node("Add", {y1, total}, {y2});
  g.add_output(y2);
  g.add_output(s);
  ir::Model after = run_pass_checked(m, fold_constants, true, 3, {{"x", {5, 3}}});
  EXPECT_EQ(count_ops(after, "Constant"), 0u);
  EXPECT_EQ(count_ops(after, "Add"), 1u);  // y1 + total only
  EXPECT_EQ(count_ops(after, "Shape"), 1u);
  EXPECT_EQ(count_ops(after, "ConstantOfShape"), 1u);
  EXPECT_EQ(count_ops(after, "ReduceSum"), 1u);
  const ir::Value* folded = after.graph->find_value("k");
  ASSERT_TRUE(folded && folded->has_initializer());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(folded->initializer().values<float>()[i], c_values[i] + w_values[i]);
  ASSERT_TRUE(after.graph->find_value("c")->has_initializer());
  PassContext context;
  EXPECT_FALSE(fold_constants(after, context));
}

// Conv (group 2, bias) -> BN; ConvTranspose (group 2, no bias) -> BN; Gemm (transB, alpha,
// beta, C) -> BN; Gemm (no transB, no C) -> BN all fold. A Conv whose output is also a graph
// output keeps its BN.
TEST(FoldBatchNorm, FoldsIntoConvConvTransposeAndGemm) {
  ir::Model m;
  m.set_opset("", 15);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 4, 5, 5});
  ir::Value* x2 = add_float_value(g, "x2", {1, 4, 3, 3});
  ir::Value* a = add_float_value(g, "a", {3, 5});
  for (ir::Value* v : {x, x2, a}) g.add_input(v);
  auto value = [&](const std::string& name) { return g.add_value(name); };
  auto output = [&](const std::string& name) {
    ir::Value* v = value(name);
    g.add_output(v);
    return v;
  };
  ir::Value* conv = value("conv");
  ir::Node* c = g.add_node(
      "Conv", {x, add_random_initializer(g, "cw", {6, 2, 3, 3}, 10), add_random_initializer(g, "cb", {6}, 11)}, {conv});
  c->set_attribute(ir::Attribute::of_int("group", 2));
  add_batch_norm(g, "bn_conv", conv, output("y_conv"), 6, 20);

  ir::Value* deconv = value("deconv");
  ir::Node* t = g.add_node("ConvTranspose", {x2, add_random_initializer(g, "tw", {4, 3, 2, 2}, 12)}, {deconv});
  t->set_attribute(ir::Attribute::of_int("group", 2));
  t->set_attribute(ir::Attribute::of_ints("strides", {2, 2}));
  add_batch_norm(g, "bn_deconv", deconv, output("y_deconv"), 6, 30);

  ir::Value* gemm = value("gemm");
  ir::Node* gm = g.add_node(
      "Gemm", {a, add_random_initializer(g, "gw", {7, 5}, 13), add_random_initializer(g, "gc", {7}, 14)}, {gemm});
  gm->set_attribute(ir::Attribute::of_int("transB", 1));
  gm->set_attribute(ir::Attribute::of_float("alpha", 0.7f));
  gm->set_attribute(ir::Attribute::of_float("beta", 0.5f));
  add_batch_norm(g, "bn_gemm", gemm, output("y_gemm"), 7, 40);

  ir::Value* gemm2 = value("gemm2");
  g.add_node("Gemm", {a, add_random_initializer(g, "gw2", {5, 4}, 15)}, {gemm2});
  add_batch_norm(g, "bn_gemm2", gemm2, output("y_gemm2"), 4, 50);

  ir::Value* shared = output("shared");
  g.add_node("Conv", {x, add_random_initializer(g, "sw", {3, 4, 1, 1}, 16)}, {shared});
  add_batch_norm(g, "bn_shared", shared, output("y_shared"), 3, 60);

  ir::Model after = run_pass_checked(m, fold_batch_norm, true, 3);
  EXPECT_EQ(count_ops(after, "BatchNormalization"), 1u);
  EXPECT_EQ(after.graph->find_value("y_conv")->producer()->op_type, "Conv");
  EXPECT_EQ(after.graph->find_value("y_deconv")->producer()->op_type, "ConvTranspose");
  EXPECT_EQ(after.graph->find_value("y_gemm")->producer()->op_type, "Gemm");
  EXPECT_EQ(after.graph->find_value("y_gemm2")->producer()->op_type, "Gemm");
  EXPECT_EQ(after.graph->find_value("y_shared")->producer()->op_type, "BatchNormalization");
}

// A weight shared by two Convs is not changed under the other one: the folded Conv gets its own.
TEST(FoldBatchNorm, SharedWeightIsCopiedNotChanged) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 4, 4});
  g.add_input(x);
  ir::Value* w = add_random_initializer(g, "w", {3, 3, 1, 1}, 7);
  ir::Value *c1 = g.add_value("c1"), *y1 = g.add_value("y1"), *y2 = g.add_value("y2");
  g.add_node("Conv", {x, w}, {c1});
  add_batch_norm(g, "bn", c1, y1, 3, 70);
  g.add_node("Conv", {x, w}, {y2});
  g.add_output(y1);
  g.add_output(y2);
  ir::Model after = run_pass_checked(m, fold_batch_norm, true, 3);
  EXPECT_EQ(count_ops(after, "BatchNormalization"), 0u);
  EXPECT_EQ(after.graph->find_value("w")->uses().size(), 1u);
}

// K [1] * Conv (PaddlePaddle's scale layer: the constant first), Conv (no bias) * K [1,C,1,1],
// ConvTranspose (2 groups) * K [C,1,1] and Gemm * K [N] fold, and a Conv without a bias stays
// without one; K [1,C,4,4] (varies over space), a Conv output read twice, and a Mul of two
// computed values do not.
TEST(FoldChannelMul, FoldsPerChannelConstantsIntoTheWeights) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 4, 4, 4});
  g.add_input(x);
  auto node = [&](const std::string& op, std::vector<ir::Value*> in, const std::string& out) {
    ir::Value* v = g.add_value(out);
    g.add_node(op, std::move(in), {v}, out);
    return v;
  };
  auto output = [&](const std::string& op, std::vector<ir::Value*> in, const std::string& out) {
    ir::Value* v = node(op, std::move(in), out);
    g.add_output(v);
    return v;
  };
  auto weights = [&](const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
    return add_random_initializer(g, name, std::move(dims), seed);
  };
  ir::Value* c1 = node("Conv", {x, weights("w1", {5, 4, 1, 1}, 1), weights("b1", {5}, 2)}, "c1");
  output("Mul", {weights("k1", {1}, 3), c1}, "y1");
  ir::Value* c2 = node("Conv", {x, weights("w2", {5, 4, 3, 3}, 4)}, "c2");
  output("Mul", {c2, weights("k2", {1, 5, 1, 1}, 5)}, "y2");
  ir::Value* d = node("ConvTranspose", {x, weights("wd", {4, 3, 2, 2}, 6), weights("bd", {6}, 7)}, "d");
  d->producer()->set_attribute(ir::Attribute::of_int("group", 2));
  output("Mul", {d, weights("kd", {6, 1, 1}, 8)}, "yd");
  ir::Value* flat = node("Flatten", {x}, "flat");
  ir::Value* gm = node("Gemm", {flat, weights("wg", {64, 7}, 9), weights("bg", {7}, 10)}, "gm");
  output("Mul", {gm, weights("kg", {7}, 11)}, "yg");
  ir::Value* c3 = node("Conv", {x, weights("w3", {5, 4, 3, 3}, 12)}, "c3");
  c3->producer()->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  output("Mul", {c3, weights("k3", {1, 5, 4, 4}, 13)}, "y3");
  ir::Value* c4 = node("Conv", {x, weights("w4", {5, 4, 1, 1}, 14)}, "c4");
  output("Mul", {c4, weights("k4", {1}, 15)}, "y4");
  output("Relu", {c4}, "y4_relu");
  ir::Value* c5 = node("Conv", {x, weights("w5", {4, 4, 1, 1}, 16)}, "c5");
  output("Mul", {c5, x}, "y5");
  ir::Model after = run_pass_checked(m, fold_channel_mul, true, 3);
  EXPECT_EQ(count_ops(after, "Mul"), 3u);
  for (const char* y : {"y1", "y2", "yd", "yg"}) {
    const ir::Node* producer = after.graph->find_value(y)->producer();
    EXPECT_NE(producer->op_type, "Mul") << y;
    EXPECT_EQ(producer->input(1)->uses().size(), 1u) << y;
  }
  EXPECT_EQ(after.graph->find_value("y2")->producer()->input(2), nullptr);
  for (const char* y : {"y3", "y4", "y5"}) EXPECT_EQ(after.graph->find_value(y)->producer()->op_type, "Mul") << y;
}

// A BN on a 4-D value (after a Relu, so nothing to fold into) becomes a depthwise 1x1 Conv with
// vai_q_onnx's names; a BN without an epsilon attribute or of unknown rank is left alone.
TEST(ConvertBnToConv, LoneBatchNormBecomesDepthwiseConv) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 4, 5, 5});
  g.add_input(x);
  ir::Value* r = add_float_value(g, "r", {2, 4, 5, 5});
  g.add_node("Relu", {x}, {r});
  ir::Value* y = g.add_value("y");
  add_batch_norm(g, "bn", r, y, 4, 80);
  ir::Value* r2 = g.add_value("r2");  // rank unknown
  g.add_node("Sigmoid", {x}, {r2});
  ir::Value* y2 = g.add_value("y2");
  add_batch_norm(g, "bn_unknown_rank", r2, y2, 4, 90);
  ir::Value* y3 = g.add_value("y3");
  add_batch_norm(g, "bn_default_eps", r, y3, 4, 100)->attributes.clear();
  for (ir::Value* v : {y, y2, y3}) g.add_output(v);
  ir::Model after = run_pass_checked(m, convert_bn_to_conv, true, 3);
  EXPECT_EQ(count_ops(after, "BatchNormalization"), 2u);
  ir::Node* conv = after.graph->find_value("y")->producer();
  ASSERT_EQ(conv->op_type, "Conv");
  EXPECT_EQ(conv->name, "bn");
  EXPECT_EQ(conv->attr_int("group", 0), 4);
  EXPECT_EQ(conv->attr_ints("kernel_shape", {}), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv->input(1)->name(), "yweights");
  EXPECT_EQ(conv->input(1)->initializer().dims(), (std::vector<int64_t>{4, 1, 1, 1}));
  EXPECT_EQ(conv->input(2)->name(), "ybias");
  EXPECT_EQ(after.graph->find_value("bn_gamma"), nullptr);
}

// Conv (bias) + Add [1,C,1,1]; Conv (no bias) + Add(K [C,1,1], conv) the other way round; Conv +
// Add of a single value: all fold. Conv + Add [1,C,4,4] (varies over space) does not.
TEST(FuseConvAddBias, FoldsPerChannelAddsIntoTheBias) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 4, 4});
  g.add_input(x);
  auto conv = [&](const std::string& name, bool bias, uint32_t seed) {
    std::vector<ir::Value*> in = {x, add_random_initializer(g, name + "_w", {5, 3, 1, 1}, seed)};
    if (bias) in.push_back(add_random_initializer(g, name + "_b", {5}, seed + 1));
    ir::Value* out = g.add_value(name);
    g.add_node("Conv", in, {out}, name);
    return out;
  };
  auto output = [&](const std::string& name) {
    ir::Value* v = g.add_value(name);
    g.add_output(v);
    return v;
  };
  g.add_node("Add", {conv("c1", true, 1), add_random_initializer(g, "k1", {1, 5, 1, 1}, 3)}, {output("y1")});
  ir::Value* k2 = add_random_initializer(g, "k2", {5, 1, 1}, 4);
  g.add_node("Add", {k2, conv("c2", false, 5)}, {output("y2")});
  g.add_node("Add", {conv("c3", true, 7), add_random_initializer(g, "k3", {1}, 9)}, {output("y3")});
  g.add_node("Add", {conv("c4", true, 10), add_random_initializer(g, "k4", {1, 5, 4, 4}, 12)}, {output("y4")});
  ir::Model after = run_pass_checked(m, fuse_conv_add_bias, true, 3);
  EXPECT_EQ(count_ops(after, "Add"), 1u);
  for (const char* y : {"y1", "y2", "y3"}) EXPECT_EQ(after.graph->find_value(y)->producer()->op_type, "Conv") << y;
  EXPECT_EQ(after.graph->find_value("y4")->producer()->op_type, "Add");
}

}  // namespace
}  // namespace onnxptq::passes
