// Per-node sensitivity on a built graph: each measure against the brute force, the metrics, the
// report formats.
#include "accuracy/sensitivity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "quant/quantize.h"
#include "support/accuracy_models.h"

namespace onnxptq::accuracy {
namespace {

using testing::outlier_model;
using testing::qdq_config;
using testing::samples;

// The outlier model quantized whole (without preparation, so the plan's model is `model`), and
// the float outputs on the same samples.
struct Quantized {
  Quantized() {
    config.optimize_model = false;
    whole = quant::quantize_static(model, *reader, config);
    reader->rewind();
    reference = reference_outputs(model, *reader, 0, 0, 1);
  }
  ir::Model model = outlier_model();
  quant::QuantConfig config = qdq_config();
  std::unique_ptr<DataReader> reader = samples(model, 6);
  quant::QuantizeResult whole;
  ReferenceOutputs reference;
};

// Each node's SQNR with only it quantized, from one plan's simulation, equals the brute force:
// the model quantized with nodes_to_quantize = {that node}, run whole.
TEST(Sensitivity, RankingEqualsQuantizingEachNodeAlone) {
  Quantized setup;
  const ir::Model& m = setup.model;
  const quant::QuantConfig& c = setup.config;
  const ReferenceOutputs& reference = setup.reference;
  const quant::Plan& plan = setup.whole.plan;
  std::vector<NodeSensitivity> ranked = analyze_nodes(m, plan, c, reference, 1, /*split=*/true);
  ASSERT_EQ(ranked.size(), 3u);
  for (size_t i = 1; i < ranked.size(); ++i) EXPECT_LE(ranked[i - 1].alone.sqnr_db, ranked[i].alone.sqnr_db);
  EXPECT_EQ(ranked[0].node, "conv2");

  for (const NodeSensitivity& s : ranked) {
    quant::QuantConfig alone = c;
    alone.nodes_to_quantize = {s.node};
    setup.reader->rewind();
    quant::QuantizeResult q = quant::quantize_static(m, *setup.reader, alone);
    engine::Session session(q.model);
    double brute_force = compare_to_reference(reference, [&](const Feed& f) { return session.run(f); }).sqnr_db;
    // Not bit-exact: calibration observing fewer tensors lets the engine compute y along another
    // path (fused, another layout), and its range differs in the last bits.
    EXPECT_NEAR(s.alone.sqnr_db, brute_force, 1e-4) << s.node;
  }
}

// conv2's output has the channel imbalance of its weight (channel 0 about 400 times the others),
// so a per-tensor scale for either loses the channels y depends on: each part alone is as bad as
// the node. Elsewhere the two parts make independent errors, whose noise powers add up.
TEST(Sensitivity, SplitsANodesErrorIntoWeightAndActivations) {
  Quantized setup;
  const ir::Model& m = setup.model;
  const quant::QuantConfig& c = setup.config;
  const ReferenceOutputs& reference = setup.reference;
  const quant::Plan& plan = setup.whole.plan;
  std::vector<NodeSensitivity> nodes = analyze_nodes(m, plan, c, reference, 1, /*split=*/true);
  const NodeSensitivity& conv2 = nodes.at(0);
  ASSERT_EQ(conv2.node, "conv2");
  EXPECT_LT(conv2.alone.sqnr_db, 3);
  ASSERT_TRUE(conv2.weight && conv2.activations);
  EXPECT_NEAR(conv2.activations->sqnr_db, conv2.alone.sqnr_db, 1.0);
  EXPECT_NEAR(conv2.weight->sqnr_db, conv2.alone.sqnr_db, 1.0);
  auto noise = [](double db) { return std::pow(10.0, -db / 10); };
  for (const NodeSensitivity& s : nodes) {
    if (s.node == "conv2") continue;
    double sum = noise(s.weight->sqnr_db) + noise(s.activations->sqnr_db);
    EXPECT_NEAR(noise(s.alone.sqnr_db) / sum, 1.0, 0.2) << s.node;
  }
  // Each part is its own plan: the weight part quantizes no activation, and the other way round.
  for (const quant::TensorPlan& t : plan_of_node(plan, *m.graph, "conv2", NodePart::Weight).tensors)
    EXPECT_NE(t.role, quant::Role::Activation) << t.name;
  for (const quant::TensorPlan& t : plan_of_node(plan, *m.graph, "conv2", NodePart::Activations).tensors)
    EXPECT_EQ(t.role, quant::Role::Activation) << t.name;
  EXPECT_FALSE(conv2.left_float.has_value());
  // Without the split, the same alone measures and no parts.
  std::vector<NodeSensitivity> alone = analyze_nodes(m, plan, c, reference, 1, /*split=*/false);
  ASSERT_EQ(alone.size(), nodes.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(alone[i].node, nodes[i].node);
    EXPECT_EQ(alone[i].alone.sqnr_db, nodes[i].alone.sqnr_db) << alone[i].node;
    EXPECT_FALSE(alone[i].weight || alone[i].activations) << alone[i].node;
  }
}

// The whole analysis from a reader: the whole model's error is that of the model quantize_static
// writes, run by the engine, and the nodes are the plan's.
TEST(Sensitivity, AnalysisOfAConfigurationOnItsData) {
  ir::Model m = outlier_model();
  quant::QuantConfig c = qdq_config();
  auto reader = samples(m, 6);
  SensitivityReport report = analyze_sensitivity(m, *reader, c, {.samples = 4, .threads = 1});
  EXPECT_EQ(report.samples, 4u);
  ASSERT_EQ(report.nodes.size(), 3u);
  EXPECT_EQ(report.nodes[0].node, "conv2");
  reader->rewind();
  quant::QuantizeResult q = quant::quantize_static(m, *reader, c);
  reader->rewind();
  ReferenceOutputs reference = reference_outputs(m, *reader, 0, 4, 1);
  engine::Session session(q.model);
  double exported = compare_to_reference(reference, [&](const Feed& f) { return session.run(f); }).sqnr_db;
  EXPECT_NEAR(report.whole_model.sqnr_db, exported, 1e-9);
}

TEST(OutputError, MetricsAgainstTheirDefinitions) {
  auto tensor = [](std::vector<float> v) { return ir::Tensor::from_values<float>({2, 2}, v); };
  OutputError e;
  // Rows are distributions: KL(ref || x) = mean over rows of sum ref ln(ref / x).
  e.add(tensor({0.5f, 0.5f, 0.25f, 0.75f}), tensor({0.25f, 0.75f, 0.25f, 0.75f}), "s");
  OutputMetrics m = e.metrics();
  double kl_row0 = 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75);
  ASSERT_TRUE(m.kl.has_value());
  EXPECT_NEAR(*m.kl, kl_row0 / 2, 1e-7);
  double signal = 0.25 + 0.25 + 0.0625 + 0.5625, noise = 0.0625 + 0.0625;
  EXPECT_NEAR(m.sqnr_db, 10 * std::log10(signal / noise), 1e-9);
  EXPECT_NEAR(m.rmse, std::sqrt(noise / 4), 1e-9);
  double dot = 0.125 + 0.375 + 0.0625 + 0.5625, xx = 0.0625 + 0.5625 + 0.0625 + 0.5625;
  EXPECT_NEAR(m.cosine, dot / std::sqrt(signal * xx), 1e-9);

  OutputError not_probabilities;
  not_probabilities.add(tensor({2, -1, 0, 0}), tensor({2, -1, 0, 0}), "s");
  EXPECT_FALSE(not_probabilities.metrics().kl.has_value());
  EXPECT_TRUE(std::isinf(not_probabilities.metrics().sqnr_db));

  OutputError shapes;
  EXPECT_THROW(shapes.add(tensor({1, 2, 3, 4}), ir::Tensor::from_values<float>({4}, std::vector<float>{1, 2, 3, 4}), "s"),
               Error);
}

TEST(Sensitivity, ReportsHoldEveryNodeAndEscapeNames) {
  NodeSensitivity a;
  a.node = "conv<1>&\"x\"";
  a.op_type = "Conv";
  a.alone.sqnr_db = 12.5;
  a.weight.emplace().sqnr_db = 13;
  a.activations.emplace().sqnr_db = -std::numeric_limits<double>::infinity();
  NodeSensitivity b;
  b.node = "add,1";
  b.op_type = "Add";
  b.left_float.emplace().sqnr_db = 40;
  SensitivityReport report;
  report.nodes = {a, b};
  report.whole_model.sqnr_db = 11;
  report.whole_model.cosine = 0.99;
  report.whole_model.rmse = 0.1;
  report.samples = 3;
  nlohmann::json j = sensitivity_json(report);
  EXPECT_EQ(j["samples"], 3);
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["alone"]["sqnr_db"], 12.5);
  EXPECT_TRUE(j["nodes"][0]["activations"]["sqnr_db"].is_null());
  EXPECT_TRUE(j["nodes"][0]["left_float"].is_null());
  EXPECT_TRUE(j["nodes"][1]["weight"].is_null());  // not measured
  EXPECT_EQ(j["nodes"][1]["left_float"]["sqnr_db"], 40);

  std::string csv = sensitivity_csv({a, b});
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("\"add,1\",Add,inf"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\"conv<1>&\"\"x\"\"\",Conv,12.500000"), std::string::npos) << csv;

  std::string html = sensitivity_html(report, "m.onnx (XINT8)");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("conv&lt;1&gt;&amp;&quot;x&quot;"), std::string::npos);
  EXPECT_EQ(html.find("conv<1>"), std::string::npos) << "names are escaped";
  EXPECT_NE(html.find("11.00 dB"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://www.w3.org/2000/svg\""), html.find("http"));  // no link but the SVG namespace
}

}  // namespace
}  // namespace onnxptq::accuracy
