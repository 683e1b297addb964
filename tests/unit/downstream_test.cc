// The downstream path of sensitivity against the whole-model path: a plan's error computed from
// the float values at its cut equals simulated_error's (a Simulation of the whole model, every
// sample run through it) on a built model with residual skips, a branch joined later, a second
// head, Relus removed by asymmetric activations, a Gemm whose bias holds beta, and the NPU path.
#include "accuracy/downstream.h"

#include <gtest/gtest.h>

#include <cmath>

#include "accuracy/sensitivity.h"
#include "calib/data_reader.h"
#include "onnxptq/error.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "support/pass_check.h"

namespace onnxptq::accuracy {
namespace {

using testing::add_float_value;
using testing::add_random_initializer;

// x[1,3,8,8] -> conv1 -> Relu -> a -> conv2 -> Relu -> r2 -> conv3 -> c3; a + c3 -> Relu -> r3 (a
// residual skip); r3 -> conv4 -> c4; a -> conv5 -> c5 (a branch from before the skip, joined
// later); c4 + c5 -> GlobalAveragePool -> Flatten -> Gemm (beta 0.5) -> y. A second head: r2 ->
// conv6 -> y2, which no node of the first path reaches.
ir::Model residual_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 8, 8});
  g.add_input(x);
  uint32_t seed = 11;
  auto conv = [&](const std::string& name, ir::Value* in, int64_t in_channels, int64_t kernel, const std::string& out) {
    ir::Value* w = add_random_initializer(g, name + ".w", {8, in_channels, kernel, kernel}, seed++, -0.5f, 0.5f);
    ir::Value* b = add_random_initializer(g, name + ".b", {8}, seed++, -0.2f, 0.2f);
    ir::Value* o = g.add_value(out);
    ir::Node* n = g.add_node("Conv", {in, w, b}, {o}, name);
    n->set_attribute(ir::Attribute::of_ints("pads", std::vector<int64_t>(4, kernel / 2)));
    return o;
  };
  auto unary = [&](const std::string& op, ir::Value* in, const std::string& out) {
    ir::Value* o = g.add_value(out);
    g.add_node(op, {in}, {o}, out + "_" + op);
    return o;
  };
  auto add = [&](ir::Value* a, ir::Value* b, const std::string& out) {
    ir::Value* o = g.add_value(out);
    g.add_node("Add", {a, b}, {o}, out + "_add");
    return o;
  };
  ir::Value* a = unary("Relu", conv("conv1", x, 3, 3, "c1"), "a");
  ir::Value* r2 = unary("Relu", conv("conv2", a, 8, 3, "c2"), "r2");
  ir::Value* c3 = conv("conv3", r2, 8, 1, "c3");
  ir::Value* r3 = unary("Relu", add(a, c3, "s1"), "r3");
  ir::Value* c4 = conv("conv4", r3, 8, 3, "c4");
  ir::Value* c5 = conv("conv5", a, 8, 1, "c5");
  ir::Value* f = unary("Flatten", unary("GlobalAveragePool", add(c4, c5, "s2"), "p"), "f");
  ir::Value* wg = add_random_initializer(g, "gemm.w", {4, 8}, seed++);
  ir::Value* bg = add_random_initializer(g, "gemm.b", {4}, seed++);
  ir::Value* y = g.add_value("y");
  ir::Node* gemm = g.add_node("Gemm", {f, wg, bg}, {y}, "gemm");
  gemm->set_attribute(ir::Attribute::of_int("transB", 1));
  gemm->set_attribute(ir::Attribute::of_float("beta", 0.5f));
  g.add_output(y);
  g.add_output(conv("conv6", r2, 8, 1, "y2"));
  return m;
}

std::unique_ptr<DataReader> residual_samples(const ir::Model& m, size_t count) {
  calib::RandomReaderOptions o;
  o.count = count;
  o.seed = 3;
  o.ranges["x"] = {-1.0, 1.0};
  return calib::make_random_reader(m.graph->fed_inputs(), o);
}

// Each measure to float rounding. On this model both paths compute the same bits; on others the
// engine may run a part along another path than the whole simulated model (fused, channels-last),
// and a value on the other side of a rounding boundary moves the sums in their last bits (on
// MobileNetV2, XINT8, 4 samples: 52 of 297 measures differ, by at most 0.012 dB).
void expect_same(const OutputMetrics& downstream, const OutputMetrics& whole, const std::string& what) {
  if (std::isinf(whole.sqnr_db)) {
    EXPECT_EQ(downstream.sqnr_db, whole.sqnr_db) << what;
  } else {
    EXPECT_NEAR(downstream.sqnr_db, whole.sqnr_db, 1e-9 * std::abs(whole.sqnr_db)) << what;
  }
  EXPECT_NEAR(downstream.cosine, whole.cosine, 1e-12) << what;
  EXPECT_NEAR(downstream.rmse, whole.rmse, 1e-9 * whole.rmse) << what;
  EXPECT_EQ(downstream.kl.has_value(), whole.kl.has_value()) << what;
}

struct Case {
  std::string name;
  quant::QuantConfig config;
  size_t output_index = 0;
  bool removes_relus = false;
};

std::vector<Case> cases() {
  quant::QuantConfig symmetric;
  symmetric.calibrate_method = calib::Method::MinMax;
  symmetric.activation_symmetric = true;
  symmetric.optimize_model = false;
  symmetric.calib.threads = 1;
  quant::QuantConfig asymmetric = symmetric;  // uint8 activations: the Relus go, their Q/DQ clips
  asymmetric.activation_type = ir::DataType::UInt8;
  asymmetric.activation_symmetric = false;
  quant::QuantConfig xint8;  // power-of-two scales, enable_dpu, its passes and CLE
  quant::apply_preset(xint8, "XINT8");
  xint8.calib.threads = 1;
  return {{"symmetric", symmetric},
          {"asymmetric", asymmetric, 0, true},
          {"asymmetric, second output", asymmetric, 1, true},
          {"XINT8", xint8}};
}

// Every node's plan alone, of its weight and of its activations: the downstream path gives what
// the whole simulated model run on every sample gives.
TEST(Downstream, EqualsWholeModelSimulationOfEachNodesParts) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    ir::Model float_model = residual_model();
    auto reader = residual_samples(float_model, 5);
    quant::QuantizeResult q = quant::quantize_static(float_model, *reader, c.config);
    const ir::Model& model = q.prepared ? *q.prepared : float_model;
    reader->rewind();
    ReferenceOutputs reference = reference_outputs(float_model, *reader, c.output_index, 0, 1);
    ASSERT_GE(q.plan.quantized_nodes.size(), 7u);
    EXPECT_EQ(!q.plan.removed_activations.empty(), c.removes_relus);

    std::vector<std::vector<quant::Plan>> groups;
    for (const std::string& node : q.plan.quantized_nodes) {
      groups.emplace_back();
      for (NodePart part : {NodePart::All, NodePart::Weight, NodePart::Activations})
        groups.back().push_back(plan_of_node(q.plan, *model.graph, node, part));
    }
    DownstreamStats stats;
    std::vector<std::vector<OutputMetrics>> got = downstream_errors(model, groups, c.config, reference, 1, &stats);
    ASSERT_EQ(got.size(), groups.size());
    size_t errors = 0;
    for (size_t i = 0; i < groups.size(); ++i)
      for (size_t p = 0; p < groups[i].size(); ++p) {
        OutputMetrics whole = simulated_error(model, groups[i][p], c.config, reference, 1);
        expect_same(got[i][p], whole, q.plan.quantized_nodes[i] + " part " + std::to_string(p));
        errors += std::isfinite(whole.sqnr_db);
      }
    EXPECT_GT(errors, groups.size()) << "the measures see errors";
    // Regions are parts of the model, and the float values at the cuts are not all held at once.
    EXPECT_LT(stats.region_nodes, 0.8);
    EXPECT_EQ(stats.float_runs % 5, 0u);
  }
}

// Plans of several nodes at once, and a plan of no tensor, in one group.
TEST(Downstream, PlansOfSeveralNodesAndEmptyPlans) {
  ir::Model model = residual_model();
  quant::QuantConfig c = cases()[1].config;
  auto reader = residual_samples(model, 3);
  quant::QuantizeResult q = quant::quantize_static(model, *reader, c);
  reader->rewind();
  ReferenceOutputs reference = reference_outputs(model, *reader, 0, 0, 1);
  quant::Plan two = plan_of_node(q.plan, *model.graph, "conv2");
  for (const quant::TensorPlan& t : plan_of_node(q.plan, *model.graph, "conv5").tensors) {
    if (two.find(t.name)) continue;
    two.index[t.name] = two.tensors.size();
    two.tensors.push_back(t);
  }
  two.removed_activations.insert(q.plan.removed_activations.begin(), q.plan.removed_activations.end());
  std::erase_if(two.removed_activations, [&](const std::string& n) { return !two.find(n); });
  std::vector<std::vector<OutputMetrics>> got = downstream_errors(model, {{two, quant::Plan{}}, {q.plan}}, c, reference, 1);
  expect_same(got[0][0], simulated_error(model, two, c, reference, 1), "conv2 and conv5");
  EXPECT_TRUE(std::isinf(got[0][1].sqnr_db));
  expect_same(got[1][0], simulated_error(model, q.plan, c, reference, 1), "the whole plan");
  // Samples on three threads (a session of one thread each): the same bits.
  std::vector<std::vector<OutputMetrics>> threaded =
      downstream_errors(model, {{two, quant::Plan{}}, {q.plan}}, c, reference, 3);
  EXPECT_EQ(threaded[0][0].sqnr_db, got[0][0].sqnr_db);
  EXPECT_EQ(threaded[1][0].rmse, got[1][0].rmse);

  quant::Plan stray;
  stray.tensors.emplace_back().name = "nowhere";
  stray.index["nowhere"] = 0;
  EXPECT_THROW(downstream_errors(model, {{stray}}, c, reference, 1), Error);
}

}  // namespace
}  // namespace onnxptq::accuracy
