// Quantization inside subgraphs (EnableSubgraph): hand-built models whose work is inside an If
// (a Conv in each branch, the branch outputs of one name) and a Loop (two MatMuls in its body,
// one weight read from the enclosing graph). Calibration must count the body tensors, the
// written model must hold Q/DQ pairs inside the bodies with every name unique across the model
// (ONNX Runtime refuses a body value shadowing an outer one), the engine's run of it must equal
// the simulation, and ONNX Runtime's run of it must be within one quantization step of the
// engine's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "ir/model.h"
#include "quant/plan.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/model_run.h"

namespace onnxptq {
namespace {

using ir::DataType;
using ir::Tensor;

Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& e : v) e = u(rng);
  return Tensor::from_values<float>(std::move(dims), v);
}

ir::Value* typed(ir::Value* v, DataType type, std::vector<int64_t> dims) {
  v->type = ir::ValueType::tensor(type, dims);
  return v;
}

ir::Value* initializer(ir::Graph& g, const std::string& name, Tensor t) {
  ir::Value* v = g.add_value(name);
  g.set_initializer(v, std::move(t));
  return v;
}

void attach(ir::Node* n, const std::string& name, std::unique_ptr<ir::Graph> body) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::Graph;
  a.g = std::move(body);
  n->attributes.push_back(std::move(a));
}

// A branch: Conv(x, w, b) with pads 1 (then also Relu), its output named "y" in both branches.
std::unique_ptr<ir::Graph> conv_branch(ir::Graph& parent, const std::string& tag, ir::Value* x, bool relu,
                                       std::mt19937& rng) {
  auto body = std::make_unique<ir::Graph>(&parent);
  body->name = tag;
  ir::Value* w = initializer(*body, tag + "_w", random_tensor({3, 2, 3, 3}, rng, 0.5f));
  ir::Value* b = initializer(*body, tag + "_b", random_tensor({3}, rng, 0.2f));
  ir::Value* conv = body->add_value(relu ? tag + "_conv" : "y");
  body->add_node("Conv", {x, w, b}, {conv}, tag + "_Conv")->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  ir::Value* y = conv;
  if (relu) {
    y = body->add_value("y");
    body->add_node("Relu", {conv}, {y}, tag + "_Relu");
  }
  typed(y, DataType::Float, {1, 3, 6, 6});
  body->add_output(y);
  return body;
}

// x [1,2,6,6] -> If(ReduceMean(x) > 0.5): then Conv -> Relu, else Conv -> y [1,3,6,6]. The
// random reader's samples lie in [0, 1]: both branches run during calibration.
ir::Model if_model() {
  std::mt19937 rng(11);
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = typed(g.add_value("x"), DataType::Float, {1, 2, 6, 6});
  g.add_input(x);
  ir::Value* mean = g.add_value("mean");
  g.add_node("ReduceMean", {x}, {mean}, "mean")->set_attribute(ir::Attribute::of_int("keepdims", 0));
  ir::Value* zero = initializer(g, "zero", Tensor::from_values<float>({}, std::vector<float>{0.5f}));
  ir::Value* cond = g.add_value("cond");
  g.add_node("Greater", {mean, zero}, {cond}, "positive");
  ir::Value* y = typed(g.add_value("out"), DataType::Float, {1, 3, 6, 6});
  ir::Node* n = g.add_node("If", {cond}, {y}, "branch");
  attach(n, "then_branch", conv_branch(g, "then", x, true, rng));
  attach(n, "else_branch", conv_branch(g, "else", x, false, rng));
  g.add_output(y);
  return m;
}

// a [2,4] -> Loop(3 trips): v = MatMul(MatMul(v, w_outer), w_body) carried, each v scanned out.
ir::Model loop_model() {
  std::mt19937 rng(12);
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* a = typed(g.add_value("a"), DataType::Float, {2, 4});
  g.add_input(a);
  ir::Value* w_outer = initializer(g, "w_outer", random_tensor({4, 4}, rng, 0.7f));
  ir::Value* trips = initializer(g, "trips", Tensor::from_values<int64_t>({}, std::vector<int64_t>{3}));
  Tensor yes(DataType::Bool, {});
  yes.mutable_values<bool>()[0] = true;
  ir::Value* go = initializer(g, "go", yes);

  auto body = std::make_unique<ir::Graph>(&g);
  body->name = "loop_body";
  body->add_input(typed(body->add_value("i"), DataType::Int64, {}));
  ir::Value* cond_in = typed(body->add_value("cond_in"), DataType::Bool, {});
  body->add_input(cond_in);
  ir::Value* v = typed(body->add_value("v"), DataType::Float, {2, 4});
  body->add_input(v);
  ir::Value* w_body = initializer(*body, "w_body", random_tensor({4, 4}, rng, 0.7f));
  ir::Value* t = body->add_value("t");
  body->add_node("MatMul", {v, w_outer}, {t}, "body_MatMul_outer");
  ir::Value* v_next = typed(body->add_value("v_next"), DataType::Float, {2, 4});
  body->add_node("MatMul", {t, w_body}, {v_next}, "body_MatMul_inner");
  ir::Value* cond_out = typed(body->add_value("cond_out"), DataType::Bool, {});
  body->add_node("Identity", {cond_in}, {cond_out}, "body_cond");
  ir::Value* scanned = typed(body->add_value("scanned"), DataType::Float, {2, 4});
  body->add_node("Identity", {v_next}, {scanned}, "body_scan");
  for (ir::Value* out : {cond_out, v_next, scanned}) body->add_output(out);

  ir::Value* last = typed(g.add_value("last"), DataType::Float, {2, 4});
  ir::Value* all = typed(g.add_value("all"), DataType::Float, {3, 2, 4});
  ir::Node* n = g.add_node("Loop", {trips, go, a}, {last, all}, "loop");
  attach(n, "body", std::move(body));
  g.add_output(last);
  g.add_output(all);
  return m;
}

std::vector<ir::Graph*> all_graphs(const ir::Model& m) {
  std::vector<ir::Graph*> graphs = m.graph->nested_graphs();
  graphs.insert(graphs.begin(), m.graph.get());
  return graphs;
}

// Every value a graph holds (inputs, initializers, node outputs) and every named node, once
// across the whole model.
void expect_unique_names(const ir::Model& m) {
  std::set<std::string> values, nodes;
  for (const ir::Graph* g : all_graphs(m)) {
    std::set<const ir::Value*> own;
    for (ir::Value* v : g->inputs()) own.insert(v);
    for (ir::Value* v : g->initializers()) own.insert(v);
    for (const auto& n : g->nodes()) {
      for (ir::Value* v : n->outputs())
        if (v) own.insert(v);
      if (!n->name.empty()) EXPECT_TRUE(nodes.insert(n->name).second) << "node name '" << n->name << "' twice";
    }
    for (const ir::Value* v : own)
      if (v->graph() == g) EXPECT_TRUE(values.insert(v->name()).second) << "value name '" << v->name() << "' twice";
  }
}

// Each op_type node inside a body reads every float input through a DequantizeLinear (of the
// body or of an enclosing graph); returns how many such nodes there are.
size_t body_nodes_reading_dq(const ir::Model& m, const std::string& op_type) {
  size_t count = 0;
  for (const ir::Graph* g : m.graph->nested_graphs())
    for (const auto& n : g->nodes()) {
      if (n->op_type != op_type) continue;
      ++count;
      for (size_t i = 0; i < 2; ++i) {
        const ir::Node* p = n->input(i) ? n->input(i)->producer() : nullptr;
        EXPECT_TRUE(p && p->op_type == "DequantizeLinear") << n->name << " input " << i << " is not dequantized";
      }
    }
  return count;
}

size_t body_qdq_nodes(const ir::Model& m) {
  size_t count = 0;
  for (const ir::Graph* g : m.graph->nested_graphs())
    for (const auto& n : g->nodes()) count += n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear";
  return count;
}

// The tensors of the plan that live inside a body, and the largest activation scale (one step of
// the coarsest quantized activation: the tolerance between two runtimes of one written model).
std::vector<std::string> body_tensors(const ir::Model& prepared, const quant::Plan& plan) {
  std::vector<std::string> names;
  for (const std::string& t : plan.tensors_to_calibrate()) {
    const ir::Value* v = prepared.graph->find_value_nested(t);
    if (v && v->graph() != prepared.graph.get()) names.push_back(t);
  }
  return names;
}
double largest_step(const quant::Plan& plan) {
  double step = 0;
  for (const quant::TensorPlan& t : plan.tensors)
    if (t.role == quant::Role::Activation)
      for (const qmath::ScaleZeroPoint& p : plan.provider(t.name).params) step = std::max(step, p.scale);
  return step;
}

void check_quantized(const ir::Model& float_model, const quant::QuantizeResult& r,
                     const std::vector<std::map<std::string, Tensor>>& feeds) {
  const ir::Model& prepared = r.prepared ? *r.prepared : float_model;
  std::vector<std::string> inside = body_tensors(prepared, r.plan);
  EXPECT_GE(inside.size(), 1u) << "calibration counts no tensor inside the bodies";
  for (const std::string& t : inside) EXPECT_TRUE(r.calibration.ranges.count(t)) << t << " has no calibrated range";
  EXPECT_GT(body_qdq_nodes(r.model), 0u);
  expect_unique_names(r.model);

  quant::Simulation sim(prepared, r.plan, quant::QuantConfig{});
  const double step = largest_step(r.plan);
  ASSERT_GT(step, 0);
  for (const auto& f : feeds) {
    std::vector<Tensor> written = testing::run_model(r.model, f);
    testing::expect_bit_equal(sim.run(f), written, "engine's run of the written model against the simulation");
    std::vector<Tensor> ort = testing::ort_run_model(r.model, f);
    ASSERT_EQ(ort.size(), written.size());
    for (size_t i = 0; i < ort.size(); ++i)
      EXPECT_LE(testing::max_steps(ort[i], written[i], step), 1.0) << "output " << i << ": ONNX Runtime vs engine";
  }
}

TEST(SubgraphQuant, IfBranchesHoldQdq) {
  ir::Model m = if_model();
  quant::QuantConfig config;
  quant::QuantizeResult r = testing::quantize_random(m, config, 16, 1);
  EXPECT_EQ(body_nodes_reading_dq(r.model, "Conv"), 2u);
  // One feed down each branch: values in [0.3, 1.3] (mean above 0.5) and in [-0.3, 0.7] (below).
  std::map<std::string, Tensor> high = testing::random_feeds(m, 5), low = high;
  for (float& v : high["x"].mutable_values<float>()) v = std::fabs(v) / 1.5f + 0.3f;
  for (float& v : low["x"].mutable_values<float>()) v = std::fabs(v) / 1.5f - 0.3f;
  check_quantized(m, r, {high, low});
}

TEST(SubgraphQuant, LoopBodyHoldsQdqAndMergesIterations) {
  ir::Model m = loop_model();
  quant::QuantConfig config;
  quant::QuantizeResult r = testing::quantize_random(m, config, 8, 2);
  EXPECT_EQ(body_nodes_reading_dq(r.model, "MatMul"), 2u);
  check_quantized(m, r, {testing::random_feeds(m, 7), testing::random_feeds(m, 8)});
}

// EnableSubgraph false, and a format that writes no subgraphs: the bodies stay float, and the plan
// says so.
TEST(SubgraphQuant, BodiesStayFloatWithAWarningWhenNotQuantized) {
  ir::Model m = if_model();
  for (int variant = 0; variant < 2; ++variant) {
    quant::QuantConfig config;
    if (variant == 0)
      config.enable_subgraph = false;
    else
      config.format = quant::QuantFormat::QOperator;
    quant::QuantizeResult r = testing::quantize_random(m, config, 4, 1);
    EXPECT_EQ(body_qdq_nodes(r.model), 0u) << variant;
    bool said = std::any_of(r.plan.warnings.begin(), r.plan.warnings.end(), [](const std::string& w) {
      return w.find("nodes inside If/Loop/Scan bodies stay float") != std::string::npos;
    });
    EXPECT_TRUE(said) << variant;
  }
}

}  // namespace
}  // namespace onnxptq
