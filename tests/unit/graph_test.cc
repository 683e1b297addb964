#include <gtest/gtest.h>

#include "ir/graph.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {
namespace {

// x -> Relu -> a -> Add(a, w) -> y, with w an initializer.
struct SmallGraph {
  Graph g;
  Value *x, *a, *w, *y;
  Node *relu, *add;
  SmallGraph() {
    x = g.add_value("x");
    a = g.add_value("a");
    w = g.add_value("w");
    y = g.add_value("y");
    g.set_initializer(w, Tensor(DataType::Float, {1}));
    g.add_input(x);
    relu = g.add_node("Relu", {x}, {a}, "relu");
    add = g.add_node("Add", {a, w}, {y}, "add");
    g.add_output(y);
  }
};

TEST(Graph, LinksProducersAndUses) {
  SmallGraph s;
  EXPECT_EQ(s.a->producer(), s.relu);
  ASSERT_EQ(s.a->uses().size(), 1u);
  EXPECT_EQ(s.a->uses()[0].node, s.add);
  EXPECT_EQ(s.a->uses()[0].input, 0u);
  EXPECT_EQ(s.w->uses()[0].input, 1u);
  EXPECT_TRUE(s.w->has_initializer());
  EXPECT_EQ(s.w->initializer().name, "w");
}

TEST(Graph, ReplaceUsesAndRemoveNode) {
  SmallGraph s;
  s.g.replace_uses(s.a, s.x);  // bypass the Relu
  EXPECT_TRUE(s.a->uses().empty());
  EXPECT_EQ(s.add->input(0), s.x);
  EXPECT_EQ(s.x->uses().size(), 2u);
  s.g.remove_node(s.relu);
  EXPECT_EQ(s.a->producer(), nullptr);
  EXPECT_EQ(s.x->uses().size(), 1u);
  s.g.remove_value(s.a);
  EXPECT_EQ(s.g.find_value("a"), nullptr);
  EXPECT_EQ(s.g.node_count(), 1u);
}

TEST(Graph, ValuesInUseCannotBeRemoved) {
  SmallGraph s;
  EXPECT_THROW(s.g.remove_value(s.a), Error);
  EXPECT_THROW(s.g.remove_value(s.y), Error);
  EXPECT_THROW(s.g.add_value("a"), Error);
}

TEST(Graph, AValueHasOneProducer) {
  SmallGraph s;
  try {
    s.g.add_node("Neg", {s.x}, {s.a}, "neg");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "value 'a' is produced by node 'relu' (Relu) and cannot also be an output of node 'neg' (Neg)");
  }
}

TEST(Graph, FreshNamesAreUniqueAcrossTheModel) {
  SmallGraph s;
  EXPECT_EQ(s.g.fresh_name("q"), "q");
  std::string second = s.g.fresh_name("q");
  EXPECT_NE(second, "q");
  EXPECT_NE(s.g.fresh_name("relu"), "relu");  // node names count too
  Value* v = s.g.add_unique_value("a");
  EXPECT_NE(v->name(), "a");
}

TEST(Graph, TopologicalOrderFixesFileOrderAndKeepsItWhenValid) {
  Graph g;
  Value* x = g.add_value("x");
  Value* a = g.add_value("a");
  Value* b = g.add_value("b");
  g.add_input(x);
  Node* second = g.add_node("Neg", {a}, {b}, "second");
  Node* first = g.add_node("Neg", {x}, {a}, "first");
  g.add_output(b);
  auto order = g.topological_order();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], first);
  EXPECT_EQ(order[1], second);
  SmallGraph s;
  auto kept = s.g.topological_order();
  EXPECT_EQ(kept[0], s.relu);
  EXPECT_EQ(kept[1], s.add);
}

TEST(Graph, ACycleIsAnErrorNamingANodeOnIt) {
  Graph g;
  g.name = "main";
  Value* x = g.add_value("x");
  Value* a = g.add_value("a");
  Value* b = g.add_value("b");
  Value* c = g.add_value("c");
  g.add_input(x);
  g.add_node("Add", {x, b}, {a}, "n1");
  g.add_node("Neg", {a}, {b}, "n2");
  g.add_node("Neg", {b}, {c}, "downstream");
  try {
    g.topological_order();
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(m == "graph 'main' has a cycle through node 'n1' (Add)" ||
                m == "graph 'main' has a cycle through node 'n2' (Neg)") << m;
  }
}

TEST(Graph, SubgraphsSeeOuterValuesAndTheirUsesAreTracked) {
  Graph g;
  Value* cond = g.add_value("cond");
  Value* x = g.add_value("x");
  Value* y = g.add_value("y");
  g.add_input(cond);
  g.add_input(x);
  Node* if_node = g.add_node("If", {cond}, {y}, "if");
  Attribute branch;
  branch.name = "then_branch";
  branch.type = AttrType::Graph;
  branch.g = std::make_unique<Graph>(&g);
  Graph& then_graph = *branch.g;
  Value* inner = then_graph.add_value("inner");
  EXPECT_EQ(then_graph.lookup("x"), x);
  EXPECT_EQ(then_graph.find_value("x"), nullptr);
  then_graph.add_node("Neg", {x}, {inner}, "neg");
  then_graph.add_output(inner);
  if_node->attributes.push_back(std::move(branch));
  EXPECT_EQ(g.implicit_inputs(if_node), std::vector<Value*>{x});
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_NE(g.fresh_name("inner"), "inner");  // names in subgraphs are taken too
  g.remove_node(if_node);
  EXPECT_TRUE(x->uses().empty());  // the subgraph's use went with it
}

TEST(Graph, InsertBeforeAndAttributes) {
  SmallGraph s;
  Value* t = s.g.add_value("t");
  Node* n = s.g.insert_node_before(s.add, "Identity", {s.a}, {t}, "id");
  EXPECT_EQ(s.g.nodes()[1].get(), n);
  n->set_attribute(Attribute::of_int("axis", 1));
  n->set_attribute(Attribute::of_int("axis", 2));
  EXPECT_EQ(n->attributes.size(), 1u);
  EXPECT_EQ(n->attr_int("axis", 0), 2);
  EXPECT_EQ(n->attr_int("missing", 7), 7);
  EXPECT_THROW(n->attr_float("axis", 0), Error);
  EXPECT_EQ(n->attr_ints("perm", {1, 0}), (std::vector<int64_t>{1, 0}));
}

TEST(ValueType, ShapesAndText) {
  ValueType t = ValueType::tensor(DataType::Float, {1, 3});
  EXPECT_EQ(*t.static_shape(), (std::vector<int64_t>{1, 3}));
  t.shape.push_back(Dim::symbol("W"));
  EXPECT_FALSE(t.static_shape());
  EXPECT_EQ(t.to_string(), "float[1,3,W]");
  EXPECT_EQ(ValueType::tensor(DataType::Int8).to_string(), "int8[?...]");
}

}  // namespace
}  // namespace onnxptq::ir

#include "ir/model.h"

namespace onnxptq::ir {
namespace {

TEST(CloneModel, IsIndependentButSharesTensorStorage) {
  Model m;
  m.set_opset("", 13);
  Graph& g = *m.graph;
  Value* x = g.add_value("x");
  Value* w = g.add_value("w");
  Value* y = g.add_value("y");
  g.set_initializer(w, Tensor::from_values<float>({2}, std::vector<float>{1, 2}));
  g.add_input(x);
  g.add_node("Add", {x, w}, {y}, "add");
  g.add_output(y);

  Model c = clone_model(m);
  EXPECT_EQ(serialize_model(c), serialize_model(m));
  EXPECT_TRUE(c.graph->find_value("w")->initializer().bytes().same_storage(w->initializer().bytes()));
  c.graph->find_value("w")->mutable_initializer().mutable_values<float>()[0] = 5;
  c.graph->remove_node(c.graph->nodes()[0].get());
  EXPECT_EQ(w->initializer().values<float>()[0], 1.0f);  // the original keeps its data
  EXPECT_EQ(g.node_count(), 1u);
  EXPECT_EQ(x->uses().size(), 1u);
}

}  // namespace
}  // namespace onnxptq::ir
