// Quark's node selection (quant/node_selection.h, its quant_utils.py get_all_target_nodes and
// match_subgraphs): nodes_to_exclude's regular expressions, subgraphs_to_exclude, and
// extra_op_types_to_quantize, on a small graph whose nodes are named like an exporter's.
#include "quant/node_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "quant/config_keys.h"
#include "quant/export.h"
#include "quant/plan.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;
using testing::error_of;

// x -> /layer0/conv -> /layer0/relu -> r0 -> /layer1/conv -> /layer1/relu -> r1
//   -> /head/add(r1, r0) -> /head/neg -> y
ir::Model layered_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1, 2, 4, 4});
  g.add_input(x);
  auto conv = [&](const std::string& layer, ir::Value* in) {
    ir::Value* w = g.add_value(layer + "/w");
    g.set_initializer(w, ir::Tensor::from_values<float>({2, 2, 1, 1}, std::vector<float>{1, -0.5f, 0.25f, 2}));
    ir::Value* b = g.add_value(layer + "/b");
    g.set_initializer(b, ir::Tensor::from_values<float>({2}, std::vector<float>{0.1f, -0.2f}));
    ir::Value* c = g.add_value(layer + "/c");
    ir::Value* r = g.add_value(layer + "/r");
    g.add_node("Conv", {in, w, b}, {c}, layer + "/conv");
    g.add_node("Relu", {c}, {r}, layer + "/relu");
    return r;
  };
  ir::Value* r0 = conv("/layer0", x);
  ir::Value* r1 = conv("/layer1", r0);
  ir::Value* s = g.add_value("s");
  ir::Value* y = g.add_value("y");
  g.add_node("Add", {r1, r0}, {s}, "/head/add");
  g.add_node("Neg", {s}, {y}, "/head/neg");
  g.add_output(y);
  return m;
}

QuantConfig minmax() {
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_symmetric = true;  // the Relus stay, so every node is in the plan's lists
  return c;
}

std::vector<std::string> excluded_in(const Plan& p) {
  std::vector<std::string> out;
  for (const auto& [name, why] : p.float_nodes)
    if (why == "excluded") out.push_back(name);
  return out;
}

bool is_quantized(const Plan& p, const std::string& node) {
  return std::find(p.quantized_nodes.begin(), p.quantized_nodes.end(), node) != p.quantized_nodes.end();
}

// The node `name` of the exported model reads its first input through a DequantizeLinear.
bool reads_dequantized(const ir::Model& q, const std::string& name) {
  for (const auto& n : q.graph->nodes())
    if (n->name == name) return n->input(0)->producer() && n->input(0)->producer()->op_type == "DequantizeLinear";
  ADD_FAILURE() << "no node " << name;
  return false;
}

TEST(NodeSelection, QuarkPatternsAreSearchedInNodeNames) {
  ir::Model m = layered_model();
  QuantConfig c = minmax();
  c.nodes_to_exclude = {"^/layer0/.*"};
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(excluded_in(p), (std::vector<std::string>{"/layer0/conv", "/layer0/relu"}));
  EXPECT_TRUE(is_quantized(p, "/layer1/conv") && is_quantized(p, "/layer1/relu") && is_quantized(p, "/head/add"));
  // In the written model the first layer reads the float input, the second its Q/DQ pair.
  Plan calibrated = testing::calibrated_plan(m, c);
  ir::Model q = export_qdq(m, calibrated, c);
  EXPECT_FALSE(reads_dequantized(q, "/layer0/conv"));
  EXPECT_TRUE(reads_dequantized(q, "/layer1/conv"));
  EXPECT_EQ(q.graph->find_value("/layer0/w")->uses()[0].node->op_type, "Conv");  // a float weight

  // re.search from the start (the ^), with no end anchor: "^/layer.*/re" matches both Relus.
  c.nodes_to_exclude = {"^/layer.*/re"};
  EXPECT_EQ(excluded_in(make_plan(m, c, testing::all_float(m))),
            (std::vector<std::string>{"/layer0/relu", "/layer1/relu"}));
  // Names and patterns together; a name stays exact.
  c.nodes_to_exclude = {"/head/add", "^/layer1/c.*"};
  EXPECT_EQ(excluded_in(make_plan(m, c, testing::all_float(m))),
            (std::vector<std::string>{"/head/add", "/layer1/conv"}));
}

TEST(NodeSelection, PatternsThatMatchNothingAreErrorsOrWarningsAsInQuark) {
  ir::Model m = layered_model();
  QuantConfig c = minmax();
  // No pattern matches any node: Quark raises.
  c.nodes_to_exclude = {"^/nope/.*", "^/none/.*"};
  EXPECT_EQ(error_of([&] { make_plan(m, c, testing::all_float(m)); }),
            "nodes_to_exclude: no node name matches the regular expressions '^/nope/.*', '^/none/.*'");
  // One matches: the other is a warning (Quark says nothing).
  c.nodes_to_exclude = {"^/nope/.*", "^/head/.*"};
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(excluded_in(p), std::vector<std::string>{"/head/add"});  // Neg is not quantized anyway
  EXPECT_NE(std::find(p.warnings.begin(), p.warnings.end(),
                      "nodes_to_exclude: no node name matches the regular expression '^/nope/.*'"),
            p.warnings.end());
  // Starting with ^ without .*: Quark drops it with a warning; the node stays quantized.
  c.nodes_to_exclude = {"^/layer0/conv"};
  p = make_plan(m, c, testing::all_float(m));
  EXPECT_TRUE(excluded_in(p).empty());
  EXPECT_TRUE(is_quantized(p, "/layer0/conv"));
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "nodes_to_exclude: '^/layer0/conv' is ignored: it starts with ^ but has no .*, and Quark matches only "
            "such patterns");
  // Not a pattern and not a node; a pattern that does not compile.
  c.nodes_to_exclude = {"/layer0/.*"};
  EXPECT_EQ(error_of([&] { make_plan(m, c, testing::all_float(m)); }),
            "the model has no node named '/layer0/.*' (in nodes_to_exclude)");
  c.nodes_to_exclude = {"^/layer[.*"};
  EXPECT_EQ(error_of([&] {
              make_plan(m, c, testing::all_float(m));
            }).rfind("nodes_to_exclude: '^/layer[.*' is not a valid regular expression (", 0),
            0u);
  // Quark expands patterns in nodes_to_exclude only: nodes_to_quantize takes names.
  c.nodes_to_exclude = {};
  c.nodes_to_quantize = {"^/layer0/.*"};
  EXPECT_EQ(error_of([&] { make_plan(m, c, testing::all_float(m)); }),
            "the model has no node named '^/layer0/.*' (in nodes_to_quantize)");
}

TEST(NodeSelection, SubgraphsToExcludeTakeEveryNodeFromStartToEnd) {
  ir::Model m = layered_model();
  QuantConfig c = minmax();
  // The Add's other input, r0, comes from before the start node: going back from the end reaches
  // the graph input without a start node on that path (Quark's "closed subgraph" error).
  c.subgraphs_to_exclude = {{{"/layer1/conv"}, {"/head/add"}}};
  EXPECT_EQ(error_of([&] { make_plan(m, c, testing::all_float(m)); }),
            "subgraphs_to_exclude[0]: going back from end node '/head/add', node '/layer0/conv' reads graph input "
            "'x' before any start node (the start and end nodes must close the subgraph)");
  // Start nodes on every path: both layers' outputs meet at the Add.
  c.subgraphs_to_exclude = {{{"/layer0/relu"}, {"/head/add"}}};
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(excluded_in(p), (std::vector<std::string>{"/head/add", "/layer0/relu", "/layer1/conv", "/layer1/relu"}));
  EXPECT_TRUE(is_quantized(p, "/layer0/conv"));
  // Two pairs (a node both start and end is a pair of its own), and with nodes_to_exclude.
  c.subgraphs_to_exclude = {{{"/layer0/conv"}, {"/layer0/relu"}}, {{"/head/add"}, {"/head/add"}}};
  c.nodes_to_exclude = {"/layer1/relu"};
  p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(excluded_in(p), (std::vector<std::string>{"/head/add", "/layer0/conv", "/layer0/relu", "/layer1/relu"}));
  EXPECT_TRUE(is_quantized(p, "/layer1/conv"));
  // The exclusions reach the enable_dpu rewrites' filter too.
  EXPECT_EQ(excluded_nodes(m, c), (std::set<std::string>{"/head/add", "/layer0/conv", "/layer0/relu", "/layer1/relu"}));
}

TEST(NodeSelection, BadSubgraphPairsAreOneLineErrorsNamingTheNode) {
  ir::Model m = layered_model();
  auto error = [&](QuantConfig::Subgraph pair) {
    QuantConfig c = minmax();
    c.subgraphs_to_exclude = {{{"/layer0/conv"}, {"/layer0/relu"}}, pair};
    return error_of([&] { make_plan(m, c, testing::all_float(m)); });
  };
  EXPECT_EQ(error({{"/layer9/conv"}, {"/head/add"}}),
            "subgraphs_to_exclude[1]: the model has no node named '/layer9/conv' (a start node)");
  EXPECT_EQ(error({{"/layer1/conv"}, {"/head/ad"}}),
            "subgraphs_to_exclude[1]: the model has no node named '/head/ad' (an end node)");
  // The end before the start: going back from /layer0/relu reaches x without passing /head/add.
  EXPECT_EQ(error({{"/head/add"}, {"/layer0/relu"}}),
            "subgraphs_to_exclude[1]: going back from end node '/layer0/relu', node '/layer0/conv' reads graph input "
            "'x' before any start node (the start and end nodes must close the subgraph)");
  // A second start node off every path from the first to the end.
  EXPECT_EQ(error({{"/layer0/relu", "/head/neg"}, {"/head/add"}}),
            "subgraphs_to_exclude[1]: start node '/head/neg' leads to none of the end nodes");
  EXPECT_EQ(error({{}, {"/head/add"}}), "subgraphs_to_exclude[1]: needs at least one start node and one end node");

  // A node computed from constants only: no graph input on the way back, and no start node.
  ir::Model k = layered_model();
  ir::Graph& g = *k.graph;
  ir::Value* c1 = g.add_value("c1");
  g.set_initializer(c1, ir::Tensor::from_values<float>({1}, std::vector<float>{2}));
  ir::Value* c2 = g.add_value("c2");
  g.add_node("Neg", {c1}, {c2}, "/const/neg");
  ir::Value* out = g.add_value("out");
  g.add_node("Mul", {g.find_value("y"), c2}, {out}, "/const/mul");
  QuantConfig c = minmax();
  c.subgraphs_to_exclude = {{{"/head/neg"}, {"/const/neg"}}};
  EXPECT_EQ(error_of([&] { make_plan(k, c, testing::all_float(k)); }),
            "subgraphs_to_exclude[0]: no start node leads to end node '/const/neg'");
}

TEST(NodeSelection, ExtraOpTypesAreQuantizedWithTheGenericRule) {
  ir::Model m = layered_model();
  QuantConfig c = minmax();
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(p.float_nodes.at("/head/neg"), "op type Neg is not quantized");
  c.extra_op_types_to_quantize = {"Neg", "Tanh"};
  p = make_plan(m, c, testing::all_float(m));
  EXPECT_TRUE(is_quantized(p, "/head/neg"));
  ASSERT_TRUE(p.find("y"));  // the generic rule: its float output gets parameters of its own
  EXPECT_TRUE(p.find("y")->shared_from.empty());
  EXPECT_EQ(p.warnings, std::vector<std::string>{"extra_op_types_to_quantize: the model has no Tanh node"});
  // Added to op_types_to_quantize too (Quark's get_static_op_types).
  c.op_types_to_quantize = {"Conv"};
  p = make_plan(m, c, testing::all_float(m));
  EXPECT_TRUE(is_quantized(p, "/layer0/conv") && is_quantized(p, "/head/neg"));
  EXPECT_EQ(p.float_nodes.at("/head/add"), "op type Add is not quantized");
  // The written model quantizes Neg's output.
  c.op_types_to_quantize = {};
  Plan calibrated = testing::calibrated_plan(m, c);
  ir::Model q = export_qdq(m, calibrated, c);
  EXPECT_EQ(q.graph->outputs()[0]->producer()->op_type, "DequantizeLinear");
  EXPECT_TRUE(reads_dequantized(q, "/head/neg"));
}

TEST(NodeSelection, ConfigKeysReadQuarksForms) {
  QuantConfig c;
  apply_config_json(c, nlohmann::json::parse(R"({"subgraphs_to_exclude": [[["a", "b"], ["c"]]],
                                                 "extra_op_types_to_quantize": ["Neg"],
                                                 "nodes_to_exclude": ["^/x/.*"]})"));
  ASSERT_EQ(c.subgraphs_to_exclude.size(), 1u);
  EXPECT_EQ(c.subgraphs_to_exclude[0].start_nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.subgraphs_to_exclude[0].end_nodes, std::vector<std::string>{"c"});
  EXPECT_EQ(c.extra_op_types_to_quantize, std::vector<std::string>{"Neg"});
  EXPECT_EQ(error_of([&] { apply_config_json(c, nlohmann::json::parse(R"({"subgraphs_to_exclude": [["a", "c"]]})")); }),
            "option subgraphs_to_exclude: expected a list of [[start nodes], [end nodes]], got [[\"a\",\"c\"]]");
}

}  // namespace
}  // namespace onnxptq::quant
