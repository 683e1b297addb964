// passes/dedicate.h on built graphs: CopySharedInit's and CopyBiasInit's copies (names, which
// reads, which initializers) and DedicateDQNode's (which DequantizeLinear nodes, the graph output's,
// a weight pair's quantize); outputs unchanged.
#include <gtest/gtest.h>

#include "passes/dedicate.h"
#include "support/pass_check.h"

namespace onnxptq::passes {
namespace {

using testing::add_float_value;
using testing::add_random_initializer;

// x [2,4] -> Add(W) -> a -> Mul(W) -> b -> Gemm(Wm, W as C) -> y; W [4] read three times.
ir::Model three_reads() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.add_input(add_float_value(g, "x", {2, 4}));
  ir::Value* w = add_random_initializer(g, "W", {4}, 1);
  g.add_node("Add", {g.find_value("x"), w}, {g.add_value("a")}, "add");
  g.add_node("Mul", {g.find_value("a"), w}, {g.add_value("b")}, "mul");
  g.add_node("Gemm", {g.find_value("b"), add_random_initializer(g, "Wm", {4, 4}, 2), w},
             {add_float_value(g, "y", {2, 4})}, "gemm");
  g.add_output(g.find_value("y"));
  return m;
}

TEST(CopySharedInitializers, LaterReadsOfTheListedOpTypesGetNumberedCopies) {
  ir::Model m = three_reads();
  testing::Feeds feeds = testing::seeded_feeds(m, 3);
  std::vector<ir::Tensor> before = testing::run_model(m, feeds);
  PassContext context;
  ASSERT_TRUE(copy_shared_initializers(m, {}, false, context));
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(g.find_value("W")->uses().size(), 1u);  // the Add, first in node order
  EXPECT_EQ(g.find_value("duplicatedW2")->uses().at(0).node->op_type, "Mul");
  EXPECT_EQ(g.find_value("duplicatedW3")->uses().at(0).node->op_type, "Gemm");
  EXPECT_EQ(g.find_value("duplicatedW3")->type.elem_type, ir::DataType::Float);
  EXPECT_EQ(testing::relative_diff(before, testing::run_model(m, feeds)), 0.0);
  EXPECT_FALSE(copy_shared_initializers(m, {}, false, context));  // nothing shared any more
}

TEST(CopySharedInitializers, OnlyTheListedOpTypesAndBiasInputsCount) {
  ir::Model m = three_reads();
  PassContext context;
  // Reads by other op types do not count: the Gemm's is the first among Mul and Gemm.
  ASSERT_TRUE(copy_shared_initializers(m, {"Mul", "Gemm"}, false, context));
  EXPECT_EQ(m.graph->find_value("W")->uses().size(), 2u);
  EXPECT_EQ(m.graph->find_value("duplicatedW2")->uses().at(0).node->op_type, "Gemm");
  ir::Model biases = three_reads();
  // Bias only: input 2, of which only the Gemm reads W; nothing to copy.
  EXPECT_FALSE(copy_shared_initializers(biases, {}, true, context));
  ir::Model input = three_reads();  // an initializer that is also a graph input stays shared
  input.graph->add_input(input.graph->find_value("W"));
  EXPECT_FALSE(copy_shared_initializers(input, {}, false, context));
}

// x [2,3] -> QuantizeLinear -> DequantizeLinear -> d (a graph output) -> Relu, Neg; a weight pair
// (QuantizeLinear of the initializer W) read by two Muls; a stored weight's DequantizeLinear
// read by two Adds.
ir::Model shared_dequantize() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  auto scalar = [&](const std::string& name, ir::Tensor t) {
    ir::Value* v = g.add_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  };
  ir::Value* s = scalar("s", ir::Tensor::from_values<float>({}, {0.05f}));
  ir::Value* z = scalar("z", ir::Tensor::from_values<int8_t>({}, {int8_t{0}}));
  g.add_input(add_float_value(g, "x", {2, 3}));
  g.add_node("QuantizeLinear", {g.find_value("x"), s, z}, {g.add_value("xq")}, "q");
  g.add_node("DequantizeLinear", {g.find_value("xq"), s, z}, {add_float_value(g, "d", {2, 3})}, "dq");
  g.add_output(g.find_value("d"));
  g.add_node("Relu", {g.find_value("d")}, {add_float_value(g, "r", {2, 3})}, "relu");
  g.add_node("Neg", {g.find_value("d")}, {add_float_value(g, "n", {2, 3})}, "neg");
  g.add_output(g.find_value("r"));
  g.add_output(g.find_value("n"));
  ir::Value* w = add_random_initializer(g, "W", {3}, 4);
  g.add_node("QuantizeLinear", {w, s, z}, {g.add_value("wq")}, "wq");
  g.add_node("DequantizeLinear", {g.find_value("wq"), s, z}, {g.add_value("wd")}, "wdq");
  g.add_node("Mul", {g.find_value("x"), g.find_value("wd")}, {add_float_value(g, "m1", {2, 3})}, "mul1");
  g.add_node("Mul", {g.find_value("r"), g.find_value("wd")}, {add_float_value(g, "m2", {2, 3})}, "mul2");
  g.add_output(g.find_value("m1"));
  g.add_output(g.find_value("m2"));
  ir::Value* stored = scalar("V", ir::Tensor::from_values<int8_t>({3}, {int8_t{1}, int8_t{-2}, int8_t{3}}));
  g.add_node("DequantizeLinear", {stored, s, z}, {g.add_value("vd")}, "vdq");
  g.add_node("Add", {g.find_value("x"), g.find_value("vd")}, {add_float_value(g, "a1", {2, 3})}, "add1");
  g.add_node("Add", {g.find_value("n"), g.find_value("vd")}, {add_float_value(g, "a2", {2, 3})}, "add2");
  g.add_output(g.find_value("a1"));
  g.add_output(g.find_value("a2"));
  return m;
}

TEST(DedicateDqNodes, EachReaderGetsItsOwnDequantizeLinear) {
  ir::Model m = shared_dequantize();
  testing::Feeds feeds = testing::seeded_feeds(m, 5);
  std::vector<ir::Tensor> before = testing::run_model(m, feeds);
  PassContext context;
  ASSERT_TRUE(dedicate_dq_nodes(m, context));
  const ir::Graph& g = *m.graph;
  // The graph output keeps the original; Relu and Neg get d_1 and d_2 from copies of the DequantizeLinear.
  EXPECT_TRUE(g.find_value("d")->uses().empty());
  EXPECT_EQ(g.find_value("d_1")->producer()->name, "dq_1");
  EXPECT_EQ(g.find_value("d_1")->uses().at(0).node->op_type, "Relu");
  EXPECT_EQ(g.find_value("d_2")->uses().at(0).node->op_type, "Neg");
  EXPECT_EQ(g.find_value("d_2")->producer()->input(0)->name(), "xq");  // one QuantizeLinear for activations
  // The weight pair: the second Mul reads a copy of both nodes.
  EXPECT_EQ(g.find_value("wd")->uses().size(), 1u);
  EXPECT_EQ(g.find_value("wd_1")->producer()->input(0)->name(), "wq_1");
  EXPECT_EQ(g.find_value("wq_1")->producer()->input(0)->name(), "W");
  // A stored weight's DequantizeLinear (no quantize in front) stays shared, as in Quark.
  EXPECT_EQ(g.find_value("vd")->uses().size(), 2u);
  EXPECT_EQ(testing::count_ops(m, "DequantizeLinear"), 6u);
  EXPECT_EQ(testing::count_ops(m, "QuantizeLinear"), 3u);
  EXPECT_EQ(testing::relative_diff(before, testing::run_model(m, feeds)), 0.0);
  EXPECT_FALSE(dedicate_dq_nodes(m, context));
}

}  // namespace
}  // namespace onnxptq::passes
