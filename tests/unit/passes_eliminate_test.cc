// The passes that remove nodes or initializers: eliminate_identity, eliminate_noop,
// eliminate_dead, dedupe_initializers. Each runs on a small built graph; the engine's outputs
// before and after must agree and the graph must have changed as the pass claims.
#include <gtest/gtest.h>

#include <limits>

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

// x -> Identity -> a -> Relu -> b -> Dropout (mask unused) -> c -> Identity -> y (graph output).
TEST(EliminateIdentity, RemovesIdentityAndDropoutKeepingTheOutputName) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 3});
  g.add_input(x);
  ir::Value *a = g.add_value("a"), *b = g.add_value("b"), *c = g.add_value("c"), *mask = g.add_value("mask"),
            *y = g.add_value("y");
  g.add_node("Identity", {x}, {a});
  g.add_node("Relu", {a}, {b});
  g.add_node("Dropout", {b}, {c, mask});
  g.add_node("Identity", {c}, {y});
  g.add_output(y);
  ir::Model after = run_pass_checked(m, eliminate_identity, true, 1);
  EXPECT_EQ(after.graph->node_count(), 1u);
  ASSERT_EQ(after.graph->outputs().size(), 1u);
  EXPECT_EQ(after.graph->outputs()[0]->name(), "y");
  EXPECT_EQ(after.graph->outputs()[0]->producer()->op_type, "Relu");
  EXPECT_EQ(after.graph->outputs()[0]->producer()->input(0)->name(), "x");
  EXPECT_EQ(after.graph->find_value("mask"), nullptr);
}

// A graph input straight to a graph output: the interface keeps both names, so the Identity stays.
TEST(EliminateIdentity, KeepsInputToOutputIdentity) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {4});
  g.add_input(x);
  ir::Value* y = g.add_value("y");
  g.add_node("Identity", {x}, {y});
  g.add_output(y);
  ir::Model after = run_pass_checked(m, eliminate_identity, false, 1);
  EXPECT_EQ(count_ops(after, "Identity"), 1u);
}

// A Dropout in training mode (ratio 0, so the engine can run it) and one whose mask is used stay.
TEST(EliminateIdentity, KeepsTrainingDropoutAndUsedMask) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {4});
  g.add_input(x);
  ir::Value* ratio = g.add_value("ratio");
  g.set_initializer(ratio, Tensor::from_values<float>({}, std::vector<float>{0.0f}));
  ir::Value* training = g.add_value("training");
  Tensor on(DataType::Bool, {});
  on.mutable_values<bool>()[0] = true;
  g.set_initializer(training, on);
  ir::Value *t = g.add_value("t"), *u = g.add_value("u"), *u_mask = g.add_value("u_mask");
  g.add_node("Dropout", {x, ratio, training}, {t});
  g.add_node("Dropout", {t}, {u, u_mask});
  g.add_output(u);
  g.add_output(u_mask);
  ir::Model after = run_pass_checked(m, eliminate_identity, false, 1);
  EXPECT_EQ(count_ops(after, "Dropout"), 2u);
}

// Every op here leaves x as it is: Reshape to [2,0,-1] (= [2,3,4]), Transpose [0,1,2], Cast to
// float, Slice of all of axis 1 (ends INT64_MAX) and of axis -1 (ends past the end), Pad by 0.
TEST(EliminateNoop, RemovesOpsThatChangeNothing) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 3, 4});
  g.add_input(x);
  std::vector<ir::Value*> v;
  for (int i = 0; i < 7; ++i) v.push_back(g.add_value("v" + std::to_string(i)));
  // Shapes are known for the values the checks read.
  for (ir::Value* value : v) value->type = ir::ValueType::tensor(DataType::Float, {2, 3, 4});
  g.add_node("Reshape", {x, ints(g, "shape", {2, 0, -1})}, {v[0]});
  ir::Node* t = g.add_node("Transpose", {v[0]}, {v[1]});
  t->set_attribute(ir::Attribute::of_ints("perm", {0, 1, 2}));
  g.add_node("Cast", {v[1]}, {v[2]})->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(DataType::Float)));
  g.add_node(
      "Slice",
      {v[2], ints(g, "starts", {0}), ints(g, "ends", {std::numeric_limits<int64_t>::max()}), ints(g, "axes", {1})},
      {v[3]});
  g.add_node("Slice",
             {v[3], ints(g, "starts2", {-4}), ints(g, "ends2", {10}), ints(g, "axes2", {-1}), ints(g, "steps2", {1})},
             {v[4]});
  g.add_node("Pad", {v[4], ints(g, "pads", {0, 0, 0, 0, 0, 0})}, {v[5]});
  ir::Value* y = g.add_value("y");
  g.add_node("Relu", {v[5]}, {y});
  g.add_output(y);
  ir::Model after = run_pass_checked(m, eliminate_noop, true, 1);
  EXPECT_EQ(after.graph->node_count(), 1u);
  EXPECT_EQ(after.graph->outputs()[0]->producer()->input(0)->name(), "x");
}

// The same ops where they do change something stay.
TEST(EliminateNoop, KeepsOpsThatChangeSomething) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 3, 4});
  g.add_input(x);
  auto out = [&](const std::string& name) {
    ir::Value* o = g.add_value(name);
    g.add_output(o);
    return o;
  };
  g.add_node("Reshape", {x, ints(g, "shape", {2, 12})}, {out("r")});
  g.add_node("Transpose", {x}, {out("t")})->set_attribute(ir::Attribute::of_ints("perm", {0, 2, 1}));
  g.add_node("Cast", {x}, {out("c")})
      ->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(DataType::Double)));
  g.add_node("Slice", {x, ints(g, "starts", {0}), ints(g, "ends", {2}), ints(g, "axes", {2})}, {out("s")});
  g.add_node("Slice",
             {x, ints(g, "starts2", {0}), ints(g, "ends2", {10}), ints(g, "axes2", {2}), ints(g, "steps2", {2})},
             {out("s2")});
  g.add_node("Pad", {x, ints(g, "pads", {0, 0, 1, 0, 0, 0})}, {out("p")});
  ir::Model after = run_pass_checked(m, eliminate_noop, false, 1);
  EXPECT_EQ(after.graph->node_count(), 6u);
}

// A Slice whose end only covers the axis if the (unknown) dimension is small enough stays.
TEST(EliminateNoop, SliceOfUnknownDimensionIsNotProvable) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {-1, 4});
  g.add_input(x);
  ir::Value* y = g.add_value("y");
  g.add_node("Slice", {x, ints(g, "starts", {0}), ints(g, "ends", {1000}), ints(g, "axes", {0})}, {y});
  g.add_output(y);
  ir::Model after = ir::clone_model(m);
  PassContext context;
  EXPECT_FALSE(eliminate_noop(after, context));
}

// x -> Relu -> y; dead: Sigmoid -> Exp (nobody reads it), an unused initializer, value_info of
// the dead values.
TEST(EliminateDead, RemovesUnusedNodesInitializersAndValueInfo) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {3});
  g.add_input(x);
  ir::Value *y = g.add_value("y"), *s = g.add_value("s"), *e = g.add_value("e");
  g.add_node("Relu", {x}, {y});
  g.add_node("Sigmoid", {x}, {s});
  ir::Value* w = add_random_initializer(g, "w", {3}, 5);
  g.add_node("Mul", {s, w}, {e});
  add_random_initializer(g, "unused", {7}, 6);
  s->type = ir::ValueType::tensor(DataType::Float, {3});
  g.add_value_info(s);
  g.add_output(y);
  ir::Model after = run_pass_checked(m, eliminate_dead, true, 1);
  EXPECT_EQ(after.graph->node_count(), 1u);
  EXPECT_TRUE(after.graph->initializers().empty());
  EXPECT_TRUE(after.graph->value_info().empty());
  // Nothing left to remove: a second run changes nothing.
  PassContext context;
  EXPECT_FALSE(eliminate_dead(after, context));
}

// w1 and w2 are equal (same type, shape, bytes), w3 differs in one element, w4 has w1's bytes
// in another shape: only w2 goes.
TEST(DedupeInitializers, SharesEqualInitializers) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 3});
  g.add_input(x);
  ir::Value* w1 = add_random_initializer(g, "w1", {2, 3}, 9);
  ir::Value* w2 = add_random_initializer(g, "w2", {2, 3}, 9);
  ir::Value* w3 = add_random_initializer(g, "w3", {2, 3}, 9);
  w3->mutable_initializer().mutable_values<float>()[5] += 1.0f;
  ir::Value* w4 = add_random_initializer(g, "w4", {6}, 9);
  ir::Value* shape = ints(g, "shape", {2, 3});
  ir::Value *a = g.add_value("a"), *b = g.add_value("b"), *c = g.add_value("c"), *d = g.add_value("d"),
            *r = g.add_value("r");
  g.add_node("Add", {x, w1}, {a});
  g.add_node("Mul", {a, w2}, {b});
  g.add_node("Sub", {b, w3}, {c});
  g.add_node("Reshape", {w4, shape}, {r});
  g.add_node("Add", {c, r}, {d});
  g.add_output(d);
  ir::Model after = run_pass_checked(m, dedupe_initializers, true, 1);
  EXPECT_EQ(after.graph->initializers().size(), 4u);
  EXPECT_EQ(after.graph->find_value("w2"), nullptr);
  EXPECT_EQ(after.graph->find_value("w1")->uses().size(), 2u);
  PassContext context;
  EXPECT_FALSE(dedupe_initializers(after, context));
}

}  // namespace
}  // namespace onnxptq::passes
