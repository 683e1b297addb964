// Mixed precision by hand (quant/overrides.h): NodePrecision, TensorQuantOverrides (the keys of
// ONNX Runtime's tensor_quant_overrides.py) and Quark's MixedPrecisionTensor give the exact Q/DQ
// layout asked for, block formats (QBFP, QMX) among the other types; the simulation computes what
// the exported model does; ONNX Runtime runs the result.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "ir/file_io.h"
#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/overrides.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/accuracy_models.h"
#include "support/export_models.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;
using testing::outlier_model;
using testing::samples;

// x -> conv1 -> a -> conv2 -> c -> Tanh -> t -> conv3 -> y (support/accuracy_models.h), QDQ
// MinMax int8, without preparation so that the names stay.
QuantConfig base_config() {
  QuantConfig c = testing::qdq_config();
  c.optimize_model = false;
  return c;
}

QuantizeResult quantized(const QuantConfig& config) {
  ir::Model m = outlier_model();
  auto reader = samples(m, 6);
  check_config(config);
  return quantize_static(m, *reader, config);
}

void extra(QuantConfig& c, const std::string& key, const std::string& json) {
  apply_extra_option(c, key, nlohmann::json::parse(json));
}

DataType type_of(const Plan& plan, const std::string& tensor) {
  const TensorPlan* t = plan.find(tensor);
  return t ? t->type : DataType::Undefined;
}

// The node of `op_type` reading `value`, or null.
const ir::Node* reader_of(const ir::Model& m, const std::string& value, const std::string& op_type) {
  for (const auto& n : m.graph->nodes())
    for (const ir::Value* v : n->inputs())
      if (v && v->name() == value && n->op_type == op_type) return n.get();
  return nullptr;
}

DataType zero_point_type(const ir::Model& m, const ir::Node& q) {
  return m.graph->find_value(q.input(2)->name())->initializer().dtype();
}

// The exported model run by the engine and the plan's simulation give the same outputs.
void expect_simulation_matches_export(const QuantizeResult& r, const QuantConfig& config) {
  ir::Model m = outlier_model();
  Simulation simulation(m, r.plan, config, 1);
  engine::SessionOptions so;
  so.threads = 1;
  engine::Session exported(r.model, so);
  auto reader = samples(m, 3);
  for (auto feed = reader->next(); feed; feed = reader->next()) {
    std::vector<ir::Tensor> a = simulation.run(*feed), b = exported.run(*feed);
    ASSERT_EQ(a.size(), b.size());
    auto x = a[0].values<float>(), y = b[0].values<float>();
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5f * (1 + std::fabs(x[i]))) << i;
  }
}

TEST(NodePrecision, RaisesTheNodesTensorsAndOnlyThose) {
  QuantConfig c = base_config();
  c.node_precision["conv2"] = parse_node_precision("int16,int8");
  QuantizeResult r = quantized(c);
  // conv2 reads a and writes c: both int16; its weight int8 as asked; the rest int8.
  EXPECT_EQ(type_of(r.plan, "a"), DataType::Int16);
  EXPECT_EQ(type_of(r.plan, "c"), DataType::Int16);
  EXPECT_EQ(type_of(r.plan, "w2"), DataType::Int8);
  for (const char* t : {"x", "t", "y", "w1", "w3"}) EXPECT_EQ(type_of(r.plan, t), DataType::Int8) << t;
  // Opset 13: the 16-bit pairs are com.microsoft's, with int16 zero points; no conversion anywhere.
  const ir::Node* q_a = reader_of(r.model, "a", "QuantizeLinear");
  ASSERT_NE(q_a, nullptr);
  EXPECT_EQ(q_a->domain, "com.microsoft");
  EXPECT_EQ(zero_point_type(r.model, *q_a), DataType::Int16);
  const ir::Node* q_x = reader_of(r.model, "x", "QuantizeLinear");
  ASSERT_NE(q_x, nullptr);
  EXPECT_EQ(zero_point_type(r.model, *q_x), DataType::Int8);
  EXPECT_EQ(testing::count_ops(r.model, "QuantizeLinear"), 5);  // x, a, c, t, y
  // The 16-bit parameters hold the same range in 256 times finer steps (symmetric: 32767 / 127).
  QuantizeResult all8 = quantized(base_config());
  double ratio = all8.plan.find("a")->params[0].scale / r.plan.find("a")->params[0].scale;
  EXPECT_NEAR(ratio, 32767.0 / 127.0, 1e-3);
  expect_simulation_matches_export(r, c);
}

TEST(NodePrecision, DualQuantNodesConvertForTheLowerReaders) {
  QuantConfig c = base_config();
  c.node_precision["conv1"] = parse_node_precision("int16");
  extra(c, "EnableDualQuantNodePairs", "true");
  QuantizeResult r = quantized(c);
  // conv1 writes a in int16; conv2 (int8) reads it converted: a -> Q16 -> DQ16 -> Q8 -> DQ8 -> conv2.
  const TensorPlan* a = r.plan.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DataType::Int16);
  ASSERT_TRUE(a->convert.has_value());
  EXPECT_EQ(a->convert->type, DataType::Int8);
  EXPECT_EQ(a->convert->recv_nodes, std::set<std::string>{"conv2"});
  const ir::Node* q16 = reader_of(r.model, "a", "QuantizeLinear");
  ASSERT_NE(q16, nullptr);
  EXPECT_EQ(zero_point_type(r.model, *q16), DataType::Int16);
  const ir::Node* dq16 = reader_of(r.model, q16->output(0)->name(), "DequantizeLinear");
  ASSERT_NE(dq16, nullptr);
  const ir::Node* q8 = reader_of(r.model, dq16->output(0)->name(), "QuantizeLinear");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(zero_point_type(r.model, *q8), DataType::Int8);
  const ir::Node* dq8 = reader_of(r.model, q8->output(0)->name(), "DequantizeLinear");
  ASSERT_NE(dq8, nullptr);
  EXPECT_NE(reader_of(r.model, dq8->output(0)->name(), "Conv"), nullptr);
  // The converted scale holds the int16 range: int8's own scale, from the same range.
  QuantizeResult all8 = quantized(base_config());
  EXPECT_NEAR(a->convert->params->scale / all8.plan.find("a")->params[0].scale, 1.0, 1e-3);
  expect_simulation_matches_export(r, c);
  // Without dual pairs, conv2 reads the int16 tensor itself.
  c.dual_quant_nodes = false;
  EXPECT_FALSE(quantized(c).plan.find("a")->convert.has_value());
}

TEST(NodePrecision, FloatLeavesTheNodeOut) {
  QuantConfig c = base_config();
  c.node_precision["conv2"] = parse_node_precision("float");
  QuantizeResult r = quantized(c);
  EXPECT_TRUE(r.plan.float_nodes.count("conv2"));
  EXPECT_EQ(r.plan.find("w2"), nullptr);
}

TEST(TensorQuantOverrides, EveryKeyReachesThePlan) {
  QuantConfig c = base_config();
  extra(c, "TensorQuantOverrides", R"({
    "c": [{"quant_type": "QUInt16", "symmetric": false}],
    "a": [{"rmin": -2.0, "rmax": 2.0}],
    "w2": [{"axis": 0}],
    "w3": [{"quant_type": "QInt8", "reduce_range": true}],
    "t": [{"scale": 0.0078125, "zero_point": 0}]
  })");
  QuantizeResult r = quantized(c);
  const TensorPlan* tc = r.plan.find("c");
  EXPECT_EQ(tc->type, DataType::UInt16);
  EXPECT_FALSE(tc->symmetric);
  // a: symmetric int8 over [-2, 2] whatever the data.
  EXPECT_EQ(r.plan.find("a")->params[0].scale, static_cast<float>(2.0 / 127.0));  // scales are float32
  EXPECT_EQ(r.plan.find("w2")->params.size(), 4u);  // per channel
  EXPECT_EQ(r.plan.find("w1")->params.size(), 1u);
  // reduce_range: 7-bit int8 weights, |q| <= 64.
  for (int8_t q : r.plan.find("w3")->data->values<int8_t>()) EXPECT_LE(std::abs(q), 64);
  EXPECT_DOUBLE_EQ(r.plan.find("t")->params[0].scale, 0.0078125);
  EXPECT_EQ(r.plan.find("t")->params[0].zero_point, 0);
  expect_simulation_matches_export(r, c);
}

TEST(TensorQuantOverrides, ConvertGoesToTheReceivingNodesOnly) {
  // x is read by conv1 only: a convert of it to int16 for conv1.
  QuantConfig c = base_config();
  extra(c, "TensorQuantOverrides",
        R"({"a": [{"quant_type": "QInt16", "convert": {"quant_type": "QInt8", "recv_nodes": ["conv2"]}}]})");
  QuantizeResult r = quantized(c);
  EXPECT_EQ(r.plan.find("a")->type, DataType::Int16);
  EXPECT_EQ(r.plan.find("a")->convert->type, DataType::Int8);
  EXPECT_EQ(testing::count_ops(r.model, "QuantizeLinear"), 6);  // x, a, a converted, c, t, y
  expect_simulation_matches_export(r, c);
}

TEST(TensorQuantOverrides, MixedPrecisionTensorNeedsItsSwitch) {
  QuantConfig c = base_config();
  extra(c, "MixedPrecisionTensor", R"({"QInt16": ["c"]})");
  EXPECT_THROW(check_config(c), Error);
  c.specific_tensor_precision = true;
  EXPECT_EQ(quantized(c).plan.find("c")->type, DataType::Int16);
  // TensorQuantOverrides win over it.
  extra(c, "TensorQuantOverrides", R"({"c": [{"quant_type": "QUInt8"}]})");
  EXPECT_EQ(quantized(c).plan.find("c")->type, DataType::UInt8);
}

// Each mistake is a one-line error naming what is wrong.
TEST(MixedPrecision, BadRequestsAreRefusedByName) {
  auto error_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto planned = [](const QuantConfig& c) { quantized(c); };
  QuantConfig c = base_config();
  c.node_precision["nope"] = parse_node_precision("int16");
  EXPECT_NE(error_of([&] { planned(c); }).find("no node named 'nope' (in NodePrecision)"), std::string::npos);

  c = base_config();
  c.node_precision["conv2"] = parse_node_precision("bfloat16");
  EXPECT_NE(error_of([&] { check_config(c); }).find("bfloat16 needs ExtendedQuantFormat.QDQ"), std::string::npos);
  c.format = QuantFormat::QOperator;
  EXPECT_NE(error_of([&] { check_config(c); }).find("QOperator"), std::string::npos);

  c = base_config();
  c.calibrate_method = calib::Method::MinMSE;
  c.node_precision["conv2"] = parse_node_precision("float16");
  c.format = QuantFormat::ExtendedQDQ;
  EXPECT_NE(error_of([&] { check_config(c); }).find("no power-of-two scale"), std::string::npos);

  c = base_config();
  extra(c, "TensorQuantOverrides", R"({"a": [{"convert": {"quant_type": "QInt16", "recv_nodes": ["conv3"]}}]})");
  EXPECT_NE(error_of([&] { planned(c); }).find("'conv3', which does not read the tensor"), std::string::npos);

  c = base_config();
  extra(c, "TensorQuantOverrides", R"({"ghost": [{"quant_type": "QInt16"}]})");
  EXPECT_NE(error_of([&] { planned(c); }).find("TensorQuantOverrides['ghost']: the model has no tensor"),
            std::string::npos);

  c = base_config();
  EXPECT_NE(error_of([&] { extra(c, "TensorQuantOverrides", R"({"a": [{"rmin": 1}]})"); }).find("rmin and rmax go together"),
            std::string::npos);
  EXPECT_NE(error_of([&] { extra(c, "TensorQuantOverrides", R"({"a": [{"colour": 1}]})"); }).find("unknown key 'colour'"),
            std::string::npos);
  c = base_config();
  extra(c, "TensorQuantOverrides", R"({"a": [{"axis": 0}]})");
  EXPECT_NE(error_of([&] { planned(c); }).find("axis applies to initializers"), std::string::npos);
  EXPECT_NE(error_of([] { parse_node_precision("int12"); }).find("unknown precision 'int12'"), std::string::npos);
}

// Power-of-two positions are calibrated for each tensor's own type: the int16 tensor's position
// is about 8 finer than the int8 one of the same tensor.
TEST(NodePrecision, PowerOfTwoPositionsFollowTheType) {
  QuantConfig c = base_config();
  c.calibrate_method = calib::Method::NonOverflow;
  QuantizeResult all8 = quantized(c);
  c.node_precision["conv2"] = parse_node_precision("int16,int8");
  QuantizeResult mixed = quantized(c);
  ASSERT_TRUE(mixed.plan.find("a")->pos && all8.plan.find("a")->pos);
  EXPECT_EQ(*mixed.plan.find("a")->pos - *all8.plan.find("a")->pos, 8);
  EXPECT_EQ(*mixed.plan.find("x")->pos, *all8.plan.find("x")->pos);
  expect_simulation_matches_export(mixed, c);
}

// ONNX Runtime loads and runs the mixed models (16-bit com.microsoft pairs and conversion
// chains) and computes what the engine computes.
TEST(MixedPrecision, OnnxRuntimeRunsTheResult) {
  ir::TemporaryFolder dir("onnxptq_mixed_precision_");
  QuantConfig c = base_config();
  c.node_precision["conv1"] = parse_node_precision("int16");
  c.node_precision["conv3"] = parse_node_precision("uint16,int8");
  extra(c, "EnableDualQuantNodePairs", "true");
  QuantizeResult r = quantized(c);
  EXPECT_TRUE(r.plan.find("a")->convert.has_value());
  std::filesystem::path file = dir.path() / "mixed.onnx";
  ir::save_model(r.model, file);
  auto feeds = testing::random_feeds(r.model, 3);
  std::vector<ir::Tensor> ort = testing::ort_run(file, r.model, feeds, dir.path());
  std::vector<ir::Tensor> ours = testing::run_model(r.model, feeds);
  ASSERT_EQ(ort.size(), 1u);
  // y is int8-quantized: one step of its scale at most between two correct runtimes.
  EXPECT_LE(testing::max_steps(ort[0], ours[0], r.plan.find("y")->params[0].scale), 1.0);
}

// The node reading `value` through one node of `op_type` (value -> op -> reader), or null.
const ir::Node* through(const ir::Model& m, const std::string& value, const std::string& op_type) {
  const ir::Node* n = reader_of(m, value, op_type);
  return n && !n->output(0)->uses().empty() ? n->output(0)->uses()[0].node : nullptr;
}

// A block format for one node: its input, output and weight take the block node (a block
// format ranks above the 8-bit integers, so the tensors it shares with int8 nodes are blocks);
// every other tensor keeps its int8 pair.
TEST(NodePrecision, BlockFormatsMixWithScaledTypes) {
  QuantConfig c = base_config();
  c.format = QuantFormat::ExtendedQDQ;
  c.node_precision["conv2"] = parse_node_precision("bfp");
  QuantizeResult r = quantized(c);
  for (const char* t : {"a", "c", "w2"}) EXPECT_EQ(type_of(r.plan, t), kQBfp) << t;
  for (const char* t : {"x", "t", "y", "w1", "w3"}) EXPECT_EQ(type_of(r.plan, t), DataType::Int8) << t;
  EXPECT_EQ(testing::count_ops(r.model, "BFPQuantizeDequantize"), 3);
  EXPECT_EQ(r.plan.find("a")->block_axis, 1);  // Conv's channels
  const ir::Node* conv2 = through(r.model, "a", "BFPQuantizeDequantize");
  ASSERT_NE(conv2, nullptr);
  EXPECT_EQ(conv2->name, "conv2");
  expect_simulation_matches_export(r, c);

  // MX the same way, with its attributes.
  c.node_precision["conv2"] = parse_node_precision("mx");
  r = quantized(c);
  for (const char* t : {"a", "c", "w2"}) EXPECT_EQ(type_of(r.plan, t), kQMx) << t;
  EXPECT_EQ(testing::count_ops(r.model, "MXQuantizeDequantize"), 3);
  expect_simulation_matches_export(r, c);
}

// BF16_MIXED_BFP16's layout: bfloat16 everywhere, one node in BFP16; with dual quant nodes the
// node reads its bfloat16 input through a BFP node of its own, and a higher-precision reader keeps
// the bfloat16 tensor.
TEST(NodePrecision, DualQuantNodesConvertToABlockFormat) {
  QuantConfig c = base_config();
  c.format = QuantFormat::ExtendedQDQ;
  c.activation_type = c.weight_type = DataType::BFloat16;
  c.node_precision["conv2"] = parse_node_precision("bfp");
  c.dual_quant_nodes = true;
  QuantizeResult r = quantized(c);
  const TensorPlan* a = r.plan.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DataType::BFloat16);
  ASSERT_TRUE(a->convert.has_value());
  EXPECT_EQ(a->convert->type, kQBfp);
  EXPECT_EQ(a->convert->recv_nodes, std::set<std::string>{"conv2"});
  EXPECT_EQ(a->convert->block_axis, 1);
  EXPECT_EQ(type_of(r.plan, "w2"), kQBfp);
  // conv2 reads a's bfloat16 copy through the BFP node.
  const ir::Node* conv2 = nullptr;
  for (const auto& n : r.model.graph->nodes())
    if (n->name == "conv2") conv2 = n.get();
  ASSERT_NE(conv2, nullptr);
  const ir::Node* bfp = conv2->input(0)->producer();
  ASSERT_NE(bfp, nullptr);
  EXPECT_EQ(bfp->op_type, "BFPQuantizeDequantize");
  ASSERT_NE(bfp->input(0)->producer(), nullptr);
  EXPECT_NE(bfp->input(0)->producer()->op_type, "Conv");  // a's bfloat16 pair comes first
  expect_simulation_matches_export(r, c);
  // Without dual quant nodes, conv2 reads the bfloat16 tensor itself.
  c.dual_quant_nodes = false;
  QuantizeResult plain = quantized(c);
  EXPECT_FALSE(plain.plan.find("a")->convert.has_value());
  EXPECT_EQ(testing::count_ops(plain.model, "BFPQuantizeDequantize"), 1);  // w2 only
  expect_simulation_matches_export(plain, c);
}

// A block tensor read converted by a lower node: the conversion takes the tensor's calibrated
// range, the scale the same tensor gets when it is int8 itself.
TEST(NodePrecision, ABlockTensorConvertsWithItsCalibratedRange) {
  QuantConfig c = base_config();
  c.format = QuantFormat::ExtendedQDQ;
  c.activation_type = c.weight_type = kQBfp;
  c.node_precision["conv2"] = parse_node_precision("int8");
  c.dual_quant_nodes = true;
  QuantizeResult r = quantized(c);
  const TensorPlan* a = r.plan.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, kQBfp);
  ASSERT_TRUE(a->convert && a->convert->params);
  EXPECT_EQ(a->convert->type, DataType::Int8);
  QuantizeResult all8 = quantized(base_config());
  EXPECT_DOUBLE_EQ(a->convert->params->scale, all8.plan.find("a")->params[0].scale);
  EXPECT_EQ(type_of(r.plan, "w2"), DataType::Int8);
  expect_simulation_matches_export(r, c);
}

// ONNX Runtime runs a model mixing int8 pairs and BFP/MX nodes once these are standard ops.
TEST(MixedPrecision, OnnxRuntimeRunsBlockFormatsMixedIn) {
  ir::TemporaryFolder dir("onnxptq_mixed_block_");
  QuantConfig c = base_config();
  c.format = QuantFormat::ExtendedQDQ;
  c.node_precision["conv2"] = parse_node_precision("bfp");
  c.node_precision["conv3"] = parse_node_precision("mx");
  c.block_qdq_as_standard_ops = true;
  QuantizeResult r = quantized(c);
  EXPECT_EQ(testing::count_ops(r.model, "BFPQuantizeDequantize"), 0);
  std::filesystem::path file = dir.path() / "mixed.onnx";
  ir::save_model(r.model, file);
  auto feeds = testing::random_feeds(r.model, 3);
  std::vector<ir::Tensor> ort = testing::ort_run(file, r.model, feeds, dir.path());
  std::vector<ir::Tensor> ours = testing::run_model(r.model, feeds);
  ASSERT_EQ(ort.size(), 1u);
  // y is MX int8 (conv3's output): a block's step is 2^-6 of its largest binade, at most 2^-6 of y's largest
  // value; two correct runtimes differ by one step at most (a tie the float Conv tipped).
  auto x = ort[0].values<float>(), y = ours[0].values<float>();
  ASSERT_EQ(x.size(), y.size());
  float largest = 0;
  for (float v : y) largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], largest * 0x1p-6f) << i;
}

}  // namespace
}  // namespace onnxptq::quant
