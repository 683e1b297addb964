// Quark's graph pre- and post-processing keys through quantize_static: CopySharedInit, CopyBiasInit,
// DedicateDQNode, RemoveQDQMulAdd, RemoveQDQBetweenOps, RemoveQDQConvGelu, RemoveQDQInstanceNorm and
// Int16Bias. Each test quantizes a small built graph, checks the change in the written model, and
// runs that model in ONNX Runtime (npm onnxruntime-node): its outputs must equal the engine's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "calib/data_reader.h"
#include "quant/config_keys.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::producer;
using testing::quantize_random;

QuantConfig config_with_options(const json& extra, calib::Method method = calib::Method::MinMax) {
  QuantConfig c;
  c.calibrate_method = method;
  c.calib.threads = 1;
  for (const auto& [key, value] : extra.items()) apply_extra_option(c, key, value);
  return c;
}

// The written model saved, loaded again, and run by ONNX Runtime and by the engine on the same
// seeded inputs: every output equal. `literal`: ORT with its graph optimizations off.
void expect_ort_agrees(const ir::Model& q, const std::string& label, bool literal = false) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_post_process_" + std::to_string(getpid()) + "_" + label);
  fs::remove_all(dir);
  fs::create_directories(dir);
  ir::save_model(q, dir / "q.onnx");
  ir::Model reloaded = ir::load_model(dir / "q.onnx");
  std::map<std::string, ir::Tensor> feeds = testing::seeded_feeds(reloaded, 7);
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", reloaded, feeds, dir / "ort", literal);
  std::vector<ir::Tensor> ours = testing::run_model(reloaded, feeds, true);
  ASSERT_EQ(ort.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ort[i].dims(), ours[i].dims()) << label << " output " << i;
    EXPECT_EQ(testing::values_of(ort[i]), testing::values_of(ours[i])) << label << " output " << i;
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// Nodes of the written model reading `value`.
size_t readers_of(const ir::Model& m, const std::string& value) {
  const ir::Value* v = m.graph->find_value(value);
  return v ? v->uses().size() : 0;
}

// x [4,1] -> MatMul(W) -> a -> MatMul(W) -> y, W [1,1] shared: products of one term, which every
// runtime rounds alike.
ir::Model shared_weight() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.add_input(add_float_value(g, "x", {4, 1}));
  ir::Value* w = add_random_initializer(g, "W", {1, 1}, 3, 0.5f, 1.5f);
  g.add_node("MatMul", {g.find_value("x"), w}, {g.add_value("a")}, "mm1");
  g.add_node("MatMul", {g.find_value("a"), w}, {add_float_value(g, "y", {4, 1})}, "mm2");
  g.add_output(g.find_value("y"));
  return m;
}

TEST(CopySharedInit, GivesEachReaderOfTheListedOpTypesItsOwnWeight) {
  ir::Model m = shared_weight();
  QuantizeResult off = quantize_random(m, config_with_options({}), 3, 5);
  EXPECT_TRUE(off.plan.find("W"));
  EXPECT_FALSE(off.plan.find("duplicatedW2"));
  EXPECT_EQ(readers_of(off.model, "W_DequantizeLinear_Output"), 2u);  // one DequantizeLinear for both

  for (const json& ops : {json::array({"MatMul"}), json::array()}) {  // [] is every op type
    SCOPED_TRACE(ops.dump());
    QuantizeResult r = quantize_random(m, config_with_options({{"CopySharedInit", ops}}), 3, 5);
    ASSERT_TRUE(r.prepared);
    EXPECT_EQ(producer(*r.prepared, "y")->input(1)->name(), "duplicatedW2");
    ASSERT_TRUE(r.plan.find("W") && r.plan.find("duplicatedW2"));
    EXPECT_EQ(r.plan.find("duplicatedW2")->role, Role::Weight);
    EXPECT_EQ(readers_of(r.model, "W_DequantizeLinear_Output"), 1u);
    EXPECT_EQ(readers_of(r.model, "duplicatedW2_DequantizeLinear_Output"), 1u);
    expect_ort_agrees(r.model, "copy_shared_init");
  }
  // Other op types than the readers' leave it shared; null is Quark's None.
  EXPECT_FALSE(quantize_random(m, config_with_options({{"CopySharedInit", json::array({"Conv"})}}), 3, 5)
                   .plan.find("duplicatedW2"));
  EXPECT_FALSE(quantize_random(m, config_with_options({{"CopySharedInit", nullptr}}), 3, 5).plan.find("duplicatedW2"));
}

// x [1,2,5,5] -> Conv(w1 [3,2,3,3], b) -> a -> Conv(w2 [3,3,1,1], b) -> y: one bias for both.
ir::Model shared_bias(float bias_scale = 0.3f) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.add_input(add_float_value(g, "x", {1, 2, 5, 5}));
  ir::Value* b = add_random_initializer(g, "b", {3}, 4, -bias_scale, bias_scale);
  ir::Node* c1 = g.add_node("Conv", {g.find_value("x"), add_random_initializer(g, "w1", {3, 2, 3, 3}, 5), b},
                            {g.add_value("a")}, "conv1");
  c1->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("Conv", {g.find_value("a"), add_random_initializer(g, "w2", {3, 3, 1, 1}, 6), b},
             {add_float_value(g, "y", {1, 3, 5, 5})}, "conv2");
  g.add_output(g.find_value("y"));
  return m;
}

TEST(CopyBiasInit, CopiesSharedBiasesForIntegerTypesWithOrtMethodsByDefault) {
  ir::Model m = shared_bias();
  QuantizeResult r = quantize_random(m, config_with_options({}), 3, 5);  // MinMax, int8: Quark's default list applies
  const TensorPlan* b = r.plan.find("b");
  const TensorPlan* copy = r.plan.find("duplicatedb2");
  ASSERT_TRUE(b && copy);
  EXPECT_EQ(b->role, Role::Bias);
  EXPECT_EQ(copy->role, Role::Bias);
  EXPECT_EQ(copy->bias_input, "a");  // quantized with the second Conv's input scale
  EXPECT_NE(b->params.at(0).scale, copy->params.at(0).scale);
  EXPECT_EQ(producer(r.model, "duplicatedb2")->op_type, "DequantizeLinear");
  expect_ort_agrees(r.model, "copy_bias_init", /*literal=*/true);

  // Power-of-two methods, float types and None keep the bias shared (quantized for its first reader).
  EXPECT_FALSE(quantize_random(m, config_with_options({}, calib::Method::MinMSE), 3, 5).plan.find("duplicatedb2"));
  EXPECT_FALSE(quantize_random(m, config_with_options({{"CopyBiasInit", nullptr}}), 3, 5).plan.find("duplicatedb2"));
  QuantConfig bf16 = config_with_options({});
  bf16.format = QuantFormat::ExtendedQDQ;
  bf16.activation_type = bf16.weight_type = ir::DataType::BFloat16;
  EXPECT_FALSE(quantize_random(m, bf16, 3, 5).plan.find("duplicatedb2"));
  EXPECT_FALSE(quantize_random(m, config_with_options({{"CopyBiasInit", json::array({"Gemm"})}}), 3, 5)
                   .plan.find("duplicatedb2"));
}

// x [2,3,4,4] -> Mul(k) -> m -> Add(c) -> a; a -> Mul(k2) -> y1; a -> Sub(d) -> y2 (Sub not
// quantized): elementwise, so every runtime rounds alike.
ir::Model branching() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.add_input(add_float_value(g, "x", {2, 3, 4, 4}));
  g.add_node("Mul", {g.find_value("x"), add_random_initializer(g, "k", {1, 3, 1, 1}, 1, 0.5f, 1.5f)},
             {g.add_value("m")}, "mul");
  g.add_node("Add", {g.find_value("m"), add_random_initializer(g, "c", {1, 3, 1, 1}, 2)}, {g.add_value("a")}, "add");
  g.add_node("Mul", {g.find_value("a"), add_random_initializer(g, "k2", {1, 3, 1, 1}, 3, 0.5f, 1.5f)},
             {add_float_value(g, "y1", {2, 3, 4, 4})}, "mul2");
  g.add_node("Sub", {g.find_value("a"), add_random_initializer(g, "d", {1, 3, 1, 1}, 4)},
             {add_float_value(g, "y2", {2, 3, 4, 4})}, "sub");
  g.add_output(g.find_value("y1"));
  g.add_output(g.find_value("y2"));
  return m;
}

TEST(DedicateDQNode, GivesEachReaderItsOwnDequantizeLinear) {
  ir::Model m = branching();
  QuantizeResult off = quantize_random(m, config_with_options({}), 3, 5);
  EXPECT_EQ(readers_of(off.model, "a_DequantizeLinear_Output"), 2u);
  QuantizeResult r = quantize_random(m, config_with_options({{"DedicateDQNode", true}}), 3, 5);
  EXPECT_EQ(testing::count_ops(r.model, std::string("DequantizeLinear")),
            testing::count_ops(off.model, std::string("DequantizeLinear")) + 1);
  EXPECT_EQ(readers_of(r.model, "a_DequantizeLinear_Output"), 1u);
  EXPECT_EQ(readers_of(r.model, "a_DequantizeLinear_Output_1"), 1u);
  std::set<std::string> read;
  for (const auto& n : r.model.graph->nodes())
    if (n->name == "mul2" || n->name == "sub") read.insert(n->input(0)->name());
  EXPECT_EQ(read, (std::set<std::string>{"a_DequantizeLinear_Output", "a_DequantizeLinear_Output_1"}));
  EXPECT_EQ(producer(r.model, "a_DequantizeLinear_Output_1")->name, "a_DequantizeLinear_1");
  // Both read the one QuantizeLinear of a; every DequantizeLinear has one reader now.
  EXPECT_EQ(producer(r.model, "a_DequantizeLinear_Output_1")->input(0)->name(), "a_QuantizeLinear_Output");
  for (const auto& n : r.model.graph->nodes())
    if (n->op_type == "DequantizeLinear") {
      EXPECT_LE(n->output(0)->uses().size(), 1u) << n->name;
    }
  expect_ort_agrees(r.model, "dedicate_dq_node");
}

TEST(DedicateDQNode, CopiesTheQuantizeOfASharedWeightPair) {
  QuantizeResult r = quantize_random(
      shared_weight(), config_with_options({{"DedicateDQNode", true}, {"AddQDQPairToWeight", true}}), 3, 5);
  EXPECT_EQ(readers_of(r.model, "W_DequantizeLinear_Output"), 1u);
  const ir::Node* dq = producer(r.model, "W_DequantizeLinear_Output_1");
  ASSERT_TRUE(dq);
  EXPECT_EQ(dq->input(0)->name(), "W_QuantizeLinear_Output_1");
  EXPECT_EQ(producer(r.model, "W_QuantizeLinear_Output_1")->input(0)->name(), "W");
  expect_ort_agrees(r.model, "dedicate_dq_node_weight");
}

TEST(RemoveQDQMulAdd, RemovesThePairBetweenMulAndItsOnlyReaderAdd) {
  ir::Model m = branching();
  QuantizeResult r = quantize_random(m, config_with_options({{"RemoveQDQMulAdd", true}}), 3, 5);
  EXPECT_EQ(r.plan.find("m"), nullptr);
  const ir::Node* add = nullptr;
  for (const auto& n : r.model.graph->nodes())
    if (n->op_type == "Add") add = n.get();
  ASSERT_TRUE(add);
  EXPECT_EQ(add->input(0)->name(), "m");  // the Mul's float output
  EXPECT_EQ(add->input(0)->producer()->op_type, "Mul");
  EXPECT_EQ(
      testing::count_ops(r.model, std::string("QuantizeLinear")),
      testing::count_ops(quantize_random(m, config_with_options({}), 3, 5).model, std::string("QuantizeLinear")) - 1);
  // The simulation of the plan computes what the written model does.
  std::map<std::string, ir::Tensor> feeds = testing::seeded_feeds(m, 9);
  Simulation sim(*r.prepared, r.plan, config_with_options({}), 1);
  std::vector<ir::Tensor> simulated = sim.run(feeds), written = testing::run_model(r.model, feeds, true);
  for (size_t i = 0; i < written.size(); ++i)
    EXPECT_EQ(testing::values_of(simulated[i]), testing::values_of(written[i]));
  expect_ort_agrees(r.model, "remove_qdq_mul_add");
}

TEST(RemoveQDQBetweenOps, RemovesPairsBetweenTheListedOpTypesWithOneReader) {
  ir::Model m = branching();
  QuantizeResult r = quantize_random(
      m, config_with_options({{"RemoveQDQBetweenOps", json::array({json::array({"Mul", "Add"})})}}), 3, 5);
  EXPECT_EQ(r.plan.find("m"), nullptr);
  EXPECT_TRUE(r.plan.find("a"));
  expect_ort_agrees(r.model, "remove_qdq_between_ops");
  // a is read by the Mul and the Sub: its DequantizeLinear has two readers, so its pair stays.
  QuantizeResult two = quantize_random(
      m, config_with_options({{"RemoveQDQBetweenOps", json::array({json::array({"Add", "Mul"})})}}), 3, 5);
  EXPECT_TRUE(two.plan.find("a"));
  // With a pair per reader (DedicatedQDQPair) they all stay, with a warning.
  QuantizeResult dedicated =
      quantize_random(m,
                      config_with_options({{"RemoveQDQBetweenOps", json::array({json::array({"Add", "Mul"})})},
                                           {"DedicatedQDQPair", true}}),
                      3, 5);
  EXPECT_TRUE(dedicated.plan.find("a"));
  ASSERT_FALSE(dedicated.plan.warnings.empty());
  EXPECT_NE(dedicated.plan.warnings.back().find("DedicatedQDQPair"), std::string::npos);
  // null is Quark's None: nothing removed.
  EXPECT_TRUE(quantize_random(m, config_with_options({{"RemoveQDQBetweenOps", nullptr}}), 3, 5).plan.find("m"));
}

QuantConfig npu_config_with(const json& extra) {  // the seeds' "CNNs on NPU": MinMSE, QUInt8 / QInt8, symmetric
  QuantConfig c = config_with_options(extra, calib::Method::MinMSE);
  c.activation_type = ir::DataType::UInt8;
  c.activation_symmetric = true;
  c.enable_dpu = true;
  return c;
}

// x [1,2,5,5] -> Conv(w, b) -> c -> Gelu (opset 20) -> g -> Mul(k) -> y: the Mul quantizes the
// Gelu's float output, which runtimes compute to within an ulp, not bit for bit.
ir::Model conv_gelu() {
  ir::Model m;
  m.set_opset("", 20);
  ir::Graph& g = *m.graph;
  g.add_input(add_float_value(g, "x", {1, 2, 5, 5}));
  g.add_node("Conv",
             {g.find_value("x"), add_random_initializer(g, "w", {3, 2, 1, 1}, 5),
              add_random_initializer(g, "b", {3}, 6, -0.2f, 0.2f)},
             {g.add_value("c")}, "conv");
  g.add_node("Gelu", {g.find_value("c")}, {g.add_value("g")}, "gelu");
  g.add_node("Mul", {g.find_value("g"), add_random_initializer(g, "k", {1, 3, 1, 1}, 7, 0.5f, 1.5f)},
             {add_float_value(g, "y", {1, 3, 5, 5})}, "mul");
  g.add_output(g.find_value("y"));
  return m;
}

TEST(RemoveQDQConvGelu, TheConvWritesTheGeluInputWithoutQDQOnTheNpuPath) {
  ir::Model m = conv_gelu();
  QuantizeResult off = quantize_random(m, npu_config_with({}), 3, 5);
  EXPECT_TRUE(off.plan.find("c"));
  QuantizeResult r = quantize_random(m, npu_config_with({{"RemoveQDQConvGelu", true}}), 3, 5);
  EXPECT_EQ(r.plan.find("c"), nullptr);
  EXPECT_EQ(r.plan.fused_activations.at("c"), "g");
  EXPECT_EQ(producer(r.model, "g_QuantizeLinear_Output")->input(0)->producer()->op_type, "Gelu");
  EXPECT_EQ(producer(r.model, "g")->input(0)->producer()->op_type, "Conv");
  expect_ort_agrees(r.model, "remove_qdq_conv_gelu", /*literal=*/true);
}

// x [1,3,4,4] -> InstanceNormalization -> n -> Relu -> y.
ir::Model instance_norm_relu() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.add_input(add_float_value(g, "x", {1, 3, 4, 4}));
  g.add_node("InstanceNormalization",
             {g.find_value("x"), add_random_initializer(g, "s", {3}, 7, 0.5f, 1.5f),
              add_random_initializer(g, "t", {3}, 8, -0.5f, 0.5f)},
             {g.add_value("n")}, "in");
  g.add_node("Relu", {g.find_value("n")}, {add_float_value(g, "y", {1, 3, 4, 4})}, "relu");
  g.add_output(g.find_value("y"));
  return m;
}

TEST(RemoveQDQInstanceNorm, InstanceNormalizationBecomesAnAnnotatedProducer) {
  ir::Model m = instance_norm_relu();
  EXPECT_TRUE(quantize_random(m, npu_config_with({}), 3, 5).plan.find("n"));
  QuantizeResult r = quantize_random(m, npu_config_with({{"RemoveQDQInstanceNorm", true}}), 3, 5);
  EXPECT_EQ(r.plan.find("n"), nullptr);
  EXPECT_EQ(r.plan.fused_activations.at("n"), "y");
  const ir::Node* relu = nullptr;
  for (const auto& n : r.model.graph->nodes())
    if (n->op_type == "Relu") relu = n.get();
  ASSERT_TRUE(relu);
  EXPECT_EQ(relu->input(0)->producer()->op_type, "InstanceNormalization");
  expect_ort_agrees(r.model, "remove_qdq_instance_norm", /*literal=*/true);
}

TEST(Int16Bias, StoresInt32BiasesAsInt16) {
  ir::Model m = shared_bias(40.0f);  // biases large against s_in * s_w: some beyond int16
  QuantizeResult r = quantize_random(m, config_with_options({{"Int16Bias", true}, {"CopyBiasInit", nullptr}}), 3, 5);
  const TensorPlan* b = r.plan.find("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->type, ir::DataType::Int16);
  const ir::Node* dq = producer(r.model, "b");
  ASSERT_TRUE(dq);
  EXPECT_EQ(dq->op_type, "DequantizeLinear");
  EXPECT_EQ(dq->domain, "com.microsoft");  // opset 13: the standard op takes int16 from opset 21
  EXPECT_EQ(dq->input(0)->initializer().dtype(), ir::DataType::Int16);
  EXPECT_EQ(dq->input(2)->initializer().dtype(), ir::DataType::Int16);
  // The int32 values clipped to int16, with their scale (Quark's np.clip).
  QuantizeResult int32 = quantize_random(m, config_with_options({{"CopyBiasInit", nullptr}}), 3, 5);
  const TensorPlan* b32 = int32.plan.find("b");
  ASSERT_TRUE(b32 && b32->data);
  EXPECT_EQ(b->params.at(0).scale, b32->params.at(0).scale);
  std::vector<double> wide = testing::values_of(*b32->data), narrow = testing::values_of(*b->data);
  bool clipped = false;
  for (size_t i = 0; i < wide.size(); ++i) {
    EXPECT_EQ(narrow[i], std::clamp(wide[i], -32768.0, 32767.0));
    clipped = clipped || wide[i] != narrow[i];
  }
  EXPECT_TRUE(clipped);
  bool warned = false;
  for (const std::string& w : r.plan.warnings) warned = warned || w.find("Int16Bias: bias 'b'") != std::string::npos;
  EXPECT_TRUE(warned);
  expect_ort_agrees(r.model, "int16_bias", /*literal=*/true);

  // At opset 21 the standard DequantizeLinear.
  ir::Model m21 = shared_bias(40.0f);
  m21.set_opset("", 21);
  QuantizeResult r21 = quantize_random(m21, config_with_options({{"Int16Bias", true}}), 3, 5);
  EXPECT_EQ(producer(r21.model, "b")->domain, "");
  EXPECT_EQ(producer(r21.model, "b")->input(0)->initializer().dtype(), ir::DataType::Int16);
  expect_ort_agrees(r21.model, "int16_bias_21", /*literal=*/true);

  // ExtendedQuantFormat.QDQ: com.microsoft's DequantizeLinear, int16.
  QuantConfig extended = config_with_options({{"Int16Bias", true}});
  extended.format = QuantFormat::ExtendedQDQ;
  QuantizeResult e = quantize_random(m, extended, 3, 5);
  EXPECT_EQ(producer(e.model, "b")->input(0)->initializer().dtype(), ir::DataType::Int16);
  expect_ort_agrees(e.model, "int16_bias_extended", /*literal=*/true);
}

TEST(PostProcessKeys, BadValuesAreOneLineErrors) {
  auto error = [](const json& extra, QuantFormat format = QuantFormat::QDQ, bool dpu = false) {
    return testing::error_of([&] {
      QuantConfig c = config_with_options(extra);
      c.format = format;
      if (dpu) {
        c.enable_dpu = true;
        c.calibrate_method = calib::Method::MinMSE;
        c.activation_symmetric = true;
      }
      check_config(c);
    });
  };
  EXPECT_EQ(error({{"RemoveQDQBetweenOps", json::array({json::array({"Mul", "Rleu"})})}}),
            "extra option RemoveQDQBetweenOps: 'Rleu' is not an ONNX op type");
  EXPECT_EQ(error({{"RemoveQDQBetweenOps", json::array({"Mul", "Add"})}}),
            "extra option RemoveQDQBetweenOps: expected a pair [op, op], got \"Mul\"");
  EXPECT_EQ(error({{"RemoveQDQBetweenOps", "Mul,Add"}}),
            "extra option RemoveQDQBetweenOps: expected a list of [op, op] pairs, got \"Mul,Add\"");
  EXPECT_EQ(error({{"CopySharedInit", true}}),
            "extra option CopySharedInit: expected null or a list of op types, got true");
  EXPECT_EQ(error({{"CopyBiasInit", json::array({"Conv", 3})}}),
            "extra option CopyBiasInit: expected an op type (a string), got 3");
  EXPECT_EQ(error({{"DedicateDQNode", "yes"}}), "extra option DedicateDQNode: expected true or false, got \"yes\"");
  EXPECT_EQ(error({{"Int16Bias", true}}, QuantFormat::QOperator),
            "extra option Int16Bias converts the int32 bias of a DequantizeLinear, which quant_format QOperator does "
            "not write (QDQ or ExtendedQuantFormat.QDQ do)");
  EXPECT_NE(error({{"Int16Bias", true}}, QuantFormat::QDQ, true).find("enable_dpu quantizes biases as int8"),
            std::string::npos);
  EXPECT_NE(error({{"RemoveQDQMulAdd", true}}, QuantFormat::VitisQDQ).find("RemoveQDQMulAdd removes"),
            std::string::npos);
  EXPECT_NE(error({{"DedicateDQNode", true}}, QuantFormat::QOperator).find("DedicateDQNode copies"), std::string::npos);
  EXPECT_EQ(error({{"RemoveQDQConvGelu", true}}),
            "extra option RemoveQDQConvGelu takes effect only with enable_dpu (the NPU CNN quantizer's)");
  EXPECT_EQ(error({{"RemoveQDQInstanceNorm", true}}),
            "extra option RemoveQDQInstanceNorm takes effect only with enable_dpu (the NPU CNN quantizer's)");
  EXPECT_EQ(error({{"RemoveQDQBetweenOps", json::array({json::array({"Conv", "Relu"})})}, {"CopySharedInit", nullptr}}),
            "");
}

}  // namespace
}  // namespace onnxptq::quant
