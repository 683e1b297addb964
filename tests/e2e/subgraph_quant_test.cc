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
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/plan.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/model_run.h"
#include "support/test_paths.h"

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

// x [1,2,6,6] -> If(ReduceMean(x) > threshold): then Conv -> Relu, else Conv -> y [1,3,6,6].
// The random reader's samples lie in [0, 1]: with 0.5 both branches run during calibration.
ir::Model if_model(float threshold = 0.5f) {
  std::mt19937 rng(11);
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = typed(g.add_value("x"), DataType::Float, {1, 2, 6, 6});
  g.add_input(x);
  ir::Value* mean = g.add_value("mean");
  g.add_node("ReduceMean", {x}, {mean}, "mean")->set_attribute(ir::Attribute::of_int("keepdims", 0));
  ir::Value* zero = initializer(g, "zero", Tensor::from_values<float>({}, std::vector<float>{threshold}));
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
      if (!n->name.empty()) {
        EXPECT_TRUE(nodes.insert(n->name).second) << "node name '" << n->name << "' twice";
      }
    }
    for (const ir::Value* v : own)
      if (v->graph() == g) {
        EXPECT_TRUE(values.insert(v->name()).second) << "value name '" << v->name() << "' twice";
      }
  }
}

// The op_type nodes inside bodies whose first two inputs are each read through a
// DequantizeLinear (of the body or of an enclosing graph).
size_t body_nodes_reading_dq(const ir::Model& m, const std::string& op_type) {
  auto dequantized = [](const ir::Value* v) {
    return v && v->producer() && v->producer()->op_type == "DequantizeLinear";
  };
  size_t count = 0;
  for (const ir::Graph* g : m.graph->nested_graphs())
    for (const auto& n : g->nodes())
      count += n->op_type == op_type && dequantized(n->input(0)) && dequantized(n->input(1));
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

void check_quantized(const ir::Model& float_model, const quant::QuantizeResult& r, const quant::QuantConfig& config,
                     const std::vector<std::map<std::string, Tensor>>& feeds) {
  const ir::Model& prepared = r.prepared ? *r.prepared : float_model;
  std::vector<std::string> inside = body_tensors(prepared, r.plan);
  EXPECT_GE(inside.size(), 1u) << "calibration counts no tensor inside the bodies";
  for (const std::string& t : inside) EXPECT_TRUE(r.calibration.ranges.count(t)) << t << " has no calibrated range";
  EXPECT_GT(body_qdq_nodes(r.model), 0u);
  expect_unique_names(r.model);

  quant::Simulation sim(prepared, r.plan, config);
  const double step = largest_step(r.plan);
  ASSERT_GT(step, 0);
  for (const auto& f : feeds) {
    std::vector<Tensor> written = testing::run_model(r.model, f);
    testing::expect_bit_equal(sim.run(f), written, "engine's run of the written model against the simulation");
    // Literal: ONNX Runtime's fused QLinear kernels saturate int8 products on AVX2 machines without
    // VNNI (its quantization documentation's reduce_range advice), which the ONNX ops do not.
    std::vector<Tensor> ort = testing::ort_run_model(r.model, f, true);
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
  check_quantized(m, r, config, {high, low});
}

TEST(SubgraphQuant, LoopBodyHoldsQdqAndMergesIterations) {
  ir::Model m = loop_model();
  quant::QuantConfig config;
  quant::QuantizeResult r = testing::quantize_random(m, config, 8, 2);
  EXPECT_EQ(body_nodes_reading_dq(r.model, "MatMul"), 2u);
  check_quantized(m, r, config, {testing::random_feeds(m, 7), testing::random_feeds(m, 8)});
}

bool warned(const quant::Plan& plan, const std::string& text) {
  return std::any_of(plan.warnings.begin(), plan.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

// A branch no calibration sample takes has no ranges: its nodes stay float, with a warning, and
// the branch that ran is quantized. The written model runs either branch.
TEST(SubgraphQuant, ABranchCalibrationNeverTookStaysFloat) {
  ir::Model m = if_model(-5.0f);  // random samples in [0, 1]: always the then branch
  quant::QuantConfig config;
  quant::QuantizeResult r = testing::quantize_random(m, config, 8, 1);
  EXPECT_TRUE(warned(r.plan, "nodes stay float in 1 bodies no calibration sample ran ('else')"));
  EXPECT_TRUE(r.plan.float_nodes.count("else_Conv"));
  EXPECT_TRUE(std::count(r.plan.quantized_nodes.begin(), r.plan.quantized_nodes.end(), "then_Conv"));
  EXPECT_EQ(body_nodes_reading_dq(r.model, "Conv"), 1u);
  std::map<std::string, Tensor> high = testing::random_feeds(m, 5), low = high;
  for (float& v : high["x"].mutable_values<float>()) v = std::fabs(v) / 1.5f;
  for (float& v : low["x"].mutable_values<float>()) v = -std::fabs(v) - 6.0f;  // the else branch
  check_quantized(m, r, config, {high, low});
}

// nodes_to_exclude reaches body nodes by name, and an excluded If leaves its branches float.
TEST(SubgraphQuant, NodesToExcludeNamesBodyNodesAndWholeIfs) {
  ir::Model m = if_model();
  quant::QuantConfig config;
  config.nodes_to_exclude = {"then_Conv"};
  quant::QuantizeResult r = testing::quantize_random(m, config, 8, 1);
  EXPECT_TRUE(r.plan.float_nodes.count("then_Conv"));
  EXPECT_EQ(body_nodes_reading_dq(r.model, "Conv"), 1u);

  config.nodes_to_exclude = {"branch"};
  r = testing::quantize_random(m, config, 8, 1);
  EXPECT_TRUE(r.plan.float_nodes.count("then_Conv") && r.plan.float_nodes.count("else_Conv"));
  EXPECT_EQ(body_qdq_nodes(r.model), 0u);

  config.nodes_to_exclude = {"^then_.*"};
  r = testing::quantize_random(m, config, 8, 1);
  EXPECT_TRUE(r.plan.float_nodes.count("then_Conv") && r.plan.float_nodes.count("then_Relu"));
  EXPECT_EQ(body_nodes_reading_dq(r.model, "Conv"), 1u);
}

// Every calibration method on a Loop body's values, seen once per iteration: the MinMax range of
// "v_next" is that of the scan output "all" (which holds every iteration's "v_next") over the
// same samples; each method's written model equals the simulation.
TEST(SubgraphQuant, EveryCalibrationMethodMergesIterations) {
  ir::Model m = loop_model();
  float lo = 0, hi = 0;
  calib::RandomReaderOptions ro;  // the samples quantize_random(m, config, 8, 3) reads
  ro.count = 8;
  ro.seed = 3;
  auto reader = calib::make_random_reader(m.graph->fed_inputs(), ro);
  while (std::optional<calib::Feed> feed = reader->next()) {
    const std::vector<Tensor> outputs = testing::run_model(m, *feed);
    for (float v : outputs.at(1).values<float>()) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  for (const char* method :
       {"MinMax", "NonOverflow", "Percentile", "Entropy", "Distribution", "MinMSE", "LayerWisePercentile"}) {
    SCOPED_TRACE(method);
    quant::QuantConfig config;
    config.calibrate_method = calib::parse_method(method);
    if (calib::is_power_of_two(config.calibrate_method)) quant::apply_preset(config, "XINT8");
    quant::QuantizeResult r = testing::quantize_random(m, config, 8, 3);
    ASSERT_TRUE(r.calibration.ranges.count("v_next"));
    if (std::string(method) == "MinMax") {
      EXPECT_EQ(r.calibration.ranges.at("v_next").lo, lo);
      EXPECT_EQ(r.calibration.ranges.at("v_next").hi, hi);
    }
    check_quantized(m, r, config, {testing::random_feeds(m, 7)});
  }
}

// XINT8 (power-of-two scales, enable_dpu): the bodies hold Q/DQ pairs of power-of-two scales too;
// the DPU's rewrites and fusions stay in the main graph (an NPU runs no control flow).
TEST(SubgraphQuant, Xint8QuantizesTheBodies) {
  for (bool loop : {false, true}) {
    ir::Model m = loop ? loop_model() : if_model();
    quant::QuantConfig config;
    quant::apply_preset(config, "XINT8");
    quant::QuantizeResult r = testing::quantize_random(m, config, 8, 1);
    EXPECT_EQ(body_nodes_reading_dq(r.model, loop ? "MatMul" : "Conv"), 2u) << loop;
    const ir::Model& prepared = r.prepared ? *r.prepared : m;
    for (const std::string& t : body_tensors(prepared, r.plan))
      for (const qmath::ScaleZeroPoint& p : r.plan.provider(t).params)
        EXPECT_EQ(std::exp2(std::round(std::log2(p.scale))), p.scale) << t << " scale is not a power of two";
    std::map<std::string, Tensor> one = testing::random_feeds(m, 5), other = testing::random_feeds(m, 6);
    if (!loop)  // one feed down each branch, as in IfBranchesHoldQdq
      for (float& v : other["x"].mutable_values<float>()) v = std::fabs(v) / 1.5f + 0.3f;
    check_quantized(m, r, config, {one, other});
  }
}

// The torch.jit.script loop of tests/models/export_loop.py quantized A8W8 and XINT8: the Gemm and
// MatMul nodes of its Loop body read their inputs through DequantizeLinear, and ONNX Runtime runs
// the written model as the engine's simulation does, for loops of 1, 5 and 9 iterations.
TEST(SubgraphQuant, TorchScriptLoopQuantized) {
  std::filesystem::path dir = testing::fresh_dir("subgraph_torch_loop");
  std::filesystem::path file = dir / "loop.onnx";
  std::string command = "/usr/bin/python3 " + (testing::kSource / "tests/models/export_loop.py").string() + " " +
                        file.string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  ir::Model m = ir::load_model(file);
  auto feed = [&](uint32_t seed, int64_t steps) {
    std::mt19937 rng(seed);
    return std::map<std::string, Tensor>{{"x", random_tensor({2, 16}, rng, 1.5f)},
                                         {"steps", Tensor::from_values<int64_t>({}, std::vector<int64_t>{steps})}};
  };
  std::vector<Feed> samples;
  for (uint32_t i = 0; i < 8; ++i) samples.push_back(feed(100 + i, 3 + i % 4));
  for (const char* preset : {"A8W8", "XINT8"}) {
    SCOPED_TRACE(preset);
    quant::QuantConfig config;
    quant::apply_preset(config, preset);
    config.calib.threads = 2;
    testing::FeedListReader reader(samples);
    quant::QuantizeResult r = quant::quantize_static(m, reader, config);
    size_t linear = 0;
    for (const char* op : {"Gemm", "MatMul"}) linear += body_nodes_reading_dq(r.model, op);
    EXPECT_GE(linear, 2u) << "the cell's two linear layers";
    check_quantized(m, r, config, {feed(1, 1), feed(2, 5), feed(3, 9)});
  }
  std::filesystem::remove_all(dir);
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
    EXPECT_TRUE(warned(r.plan, "nodes inside If/Loop/Scan bodies stay float")) << variant;
  }
}

}  // namespace
}  // namespace onnxptq
