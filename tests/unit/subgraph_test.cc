// extract_model: a part of a model fed intermediate values computes what the whole model does.
#include "engine/subgraph.h"

#include <gtest/gtest.h>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "support/pass_check.h"

namespace onnxptq::engine {
namespace {

using testing::add_float_value;
using testing::add_random_initializer;
using testing::random_float;

// x[2,4] -> Relu -> a; a * k (k from a Constant node) -> b; b + a -> c; c * w (an initializer)
// -> y; Split(x) -> p, q; q + c -> z.
ir::Model two_headed_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 4});
  g.add_input(x);
  ir::Value* w = add_random_initializer(g, "w", {2, 4}, 5);
  auto value = [&](const std::string& name) { return g.add_value(name); };
  g.add_node("Relu", {x}, {value("a")}, "relu");
  ir::Node* k = g.add_node("Constant", {}, {value("k")}, "k");
  k->set_attribute(ir::Attribute::of_tensor("value", random_float({2, 4}, 6)));
  g.add_node("Mul", {g.find_value("a"), g.find_value("k")}, {value("b")}, "mul");
  g.add_node("Add", {g.find_value("b"), g.find_value("a")}, {value("c")}, "add");
  g.add_node("Mul", {g.find_value("c"), w}, {value("y")}, "scale");
  ir::Node* split = g.add_node("Split", {x}, {value("p"), value("q")}, "split");
  split->set_attribute(ir::Attribute::of_int("axis", 0));
  g.add_node("Add", {g.find_value("q"), g.find_value("c")}, {value("z")}, "join");
  g.add_output(g.find_value("y"));
  g.add_output(g.find_value("z"));
  return m;
}

TEST(ExtractModel, APartFedIntermediateValuesComputesWhatTheWholeModelDoes) {
  ir::Model m = two_headed_model();
  ir::Model with_a = ir::clone_model(m);
  with_a.graph->add_output(with_a.graph->find_value("a"));
  Session whole(with_a);
  std::map<std::string, ir::Tensor> feeds{{"x", random_float({2, 4}, 9)}};
  std::vector<ir::Tensor> expected = whole.run(feeds);  // y, z, a

  ir::Model part = extract_model(m, {"a"}, {"y"});
  ASSERT_EQ(part.graph->inputs().size(), 1u);
  EXPECT_EQ(part.graph->inputs()[0]->name(), "a");
  EXPECT_EQ(part.graph->node_count(), 4u) << "Constant, Mul, Add, Mul";
  EXPECT_TRUE(part.graph->find_value("w")->has_initializer());
  EXPECT_FALSE(part.graph->find_value("x"));
  std::vector<ir::Tensor> y = Session(part).run({{"a", expected[2]}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(testing::relative_diff({expected[0]}, y), 0.0);

  // A graph input and an intermediate value in, two outputs (one of them an input) out; c itself
  // from another part.
  ir::Model both = extract_model(m, {"x", "c"}, {"z", "c"});
  EXPECT_EQ(both.graph->node_count(), 2u) << "Split, Add";
  ir::Tensor c = Session(extract_model(m, {"x"}, {"c"})).run(feeds).at(0);
  std::vector<ir::Tensor> z = Session(both).run({{"x", feeds.at("x")}, {"c", c}});
  ASSERT_EQ(z.size(), 2u);
  EXPECT_EQ(testing::relative_diff({expected[1]}, {z[0]}), 0.0);
  EXPECT_EQ(testing::relative_diff({c}, {z[1]}), 0.0);
}

TEST(ExtractModel, ErrorsNameTheValue) {
  ir::Model m = two_headed_model();
  auto message = [&](const std::vector<std::string>& in, const std::vector<std::string>& out) {
    try {
      extract_model(m, in, out);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({"nope"}, {"y"}).find("'nope'"), std::string::npos);
  EXPECT_NE(message({"a"}, {"nope"}).find("'nope'"), std::string::npos);
  EXPECT_NE(message({"a"}, {"z"}).find("graph input"), std::string::npos) << "z needs x through Split";
  EXPECT_NE(message({"x", "p"}, {"z"}).find("'p'"), std::string::npos) << "Split computes p and q";
}

}  // namespace
}  // namespace onnxptq::engine
