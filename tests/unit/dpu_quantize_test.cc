// quantize_static with enable_dpu (as vai_q_onnx 1.16's quantize_static): each rewrite runs where
// vai_q_onnx runs it and only when its extra_options key is on (a key off leaves its pattern
// alone), the rewrites skip nodes the node filter rejects, the dpu quantizer's QDQ removal takes
// the Q/DQ out between an annotated producer and its activation, and the dpu quantizer's
// constraints are one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "engine/session.h"
#include "quant/dpu_plan.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/cli_run.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

using ir::Tensor;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::count_ops;
using testing::ints;
using testing::output;
using testing::producer;
using testing::quantize_random;
using testing::scalar;

// One branch per rewrite, each ending in a graph output named after it:
// x [1,4,8,8] -> Conv -> LeakyRelu(0.1)                         (RemoveQDQConvLeakyRelu, DPU slope)
//             -> Conv -> Relu -> BatchNormalization             (QDQ removal; ConvertBNToConv)
//             -> ReduceMean(axes 2,3)                           (ConvertReduceMeanToGlobalAvgPool)
//             -> ReduceMean(axis 1)                             (ConvertReduceMeanToDPUVersion)
//             -> Split([1, 3])                                  (ConvertSplitToSlice)
//             -> Clip(0, 6)                                     (ConvertClipToRelu)
//             -> Sigmoid, HardSigmoid(1/6), AveragePool 3x3     (SimulateDPU)
//             -> Softmax                                        (ConvertSoftmaxToDPUVersion)
//             -> InstanceNormalization                          (ConvertInstanceNormToDPUVersion)
// x2 [1,2,32,32] -> GlobalAveragePool                           (SplitLargeKernelPool: 1024 > 512)
ir::Model all_patterns() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 4, 8, 8});
  g.add_input(x);
  ir::Value* x2 = add_float_value(g, "x2", {1, 2, 32, 32});
  g.add_input(x2);

  ir::Value* c1 = g.add_value("c1");
  ir::Node* conv1 = g.add_node("Conv",
                               {x, add_random_initializer(g, "w1", {4, 4, 3, 3}, 1, -0.5f, 0.5f),
                                add_random_initializer(g, "b1", {4}, 2, -0.3f, 0.3f)},
                               {c1}, "conv1");
  conv1->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("LeakyRelu", {c1}, {output(g, "leaky")}, "leaky")->set_attribute(ir::Attribute::of_float("alpha", 0.1f));

  ir::Value *c2 = g.add_value("c2"), *r2 = g.add_value("r2");
  g.add_node("Conv", {x, add_random_initializer(g, "w2", {4, 4, 1, 1}, 3, -0.5f, 0.5f)}, {c2}, "conv2");
  g.add_node("Relu", {c2}, {r2}, "relu2");
  ir::Node* bn = g.add_node(
      "BatchNormalization",
      {r2, add_random_initializer(g, "gamma", {4}, 4, 0.5f, 1.5f),
       add_random_initializer(g, "beta", {4}, 5, -0.5f, 0.5f), add_random_initializer(g, "mean", {4}, 6, -0.5f, 0.5f),
       add_random_initializer(g, "var", {4}, 7, 0.5f, 1.5f)},
      {output(g, "bn")}, "bn");
  bn->set_attribute(ir::Attribute::of_float("epsilon", 1e-5f));

  g.add_node("ReduceMean", {x}, {output(g, "rm23")}, "rm23")->set_attribute(ir::Attribute::of_ints("axes", {2, 3}));
  g.add_node("ReduceMean", {x}, {output(g, "rm1")}, "rm1")->set_attribute(ir::Attribute::of_ints("axes", {1}));
  g.add_node("Split", {x, ints(g, "sizes", {1, 3})}, {output(g, "s1"), output(g, "s2")}, "split")
      ->set_attribute(ir::Attribute::of_int("axis", 1));
  g.add_node("Clip", {x, scalar(g, "lo", 0.0f), scalar(g, "hi", 6.0f)}, {output(g, "clip")}, "clip");
  g.add_node("Sigmoid", {x}, {output(g, "sig")}, "sig");
  g.add_node("HardSigmoid", {x}, {output(g, "hs")}, "hs")->set_attribute(ir::Attribute::of_float("alpha", 1.0f / 6));
  ir::Node* ap = g.add_node("AveragePool", {x}, {output(g, "ap")}, "ap");
  ap->set_attribute(ir::Attribute::of_ints("kernel_shape", {3, 3}));
  g.add_node("Softmax", {x}, {output(g, "sm")}, "sm");
  g.add_node("InstanceNormalization",
             {x, add_random_initializer(g, "in_scale", {4}, 8, 0.5f, 1.5f),
              add_random_initializer(g, "in_bias", {4}, 9, -0.5f, 0.5f)},
             {output(g, "inorm")}, "inorm");
  g.add_node("GlobalAveragePool", {x2}, {output(g, "gap")}, "gap");
  return m;
}

QuantConfig npu_config() {  // the seeds' "CNNs on NPU": QDQ, QUInt8 / QInt8, MinMSE, ActivationSymmetric
  QuantConfig c;
  c.activation_type = ir::DataType::UInt8;
  c.weight_type = ir::DataType::Int8;
  c.activation_symmetric = true;
  c.enable_dpu = true;
  c.calib.threads = 1;
  return c;
}

std::string producer_op(const ir::Model& m, const std::string& name) {
  const ir::Node* n = producer(m, name);
  return n ? n->op_type : "";
}

float leaky_alpha(const ir::Model& m) {
  for (const auto& n : m.graph->nodes())
    if (n->op_type == "LeakyRelu") return n->attr_float("alpha", -1.0f);
  return -1.0f;
}

// The QuantizeLinear nodes reading `name` in the exported model (for a graph output, what its
// producer writes instead: "<name>_QuantizeLinear_Input").
size_t quantizers_of(const ir::Model& exported, const std::string& name) {
  size_t n = 0;
  for (const std::string& v : {name, name + "_QuantizeLinear_Input"})
    if (const ir::Value* value = exported.graph->find_value(v))
      for (const ir::Use& u : value->uses()) n += u.node->op_type == "QuantizeLinear";
  return n;
}

TEST(DpuQuantize, DefaultsRewriteEveryPatternTheSpecTurnsOn) {
  ir::Model m = all_patterns();
  QuantizeResult r = quantize_random(m, npu_config(), 2, 11);
  ASSERT_TRUE(r.prepared);
  const ir::Model& p = *r.prepared;
  // The pre-calibration rewrites: on by default.
  EXPECT_EQ(count_ops(p, "BatchNormalization"), 0u);
  EXPECT_EQ(producer_op(p, "bn"), "Conv");
  EXPECT_EQ(count_ops(p, "ReduceMean"), 1u);  // rm1 stays a ReduceMean (axis 1)
  EXPECT_EQ(count_ops(p, "Split"), 0u);
  EXPECT_EQ(count_ops(p, "Slice"), 2u);
  EXPECT_EQ(count_ops(p, "AveragePool"), 2u);  // ap, and the 4x4 part of the split 32x32 pool
  // ConvertClipToRelu: off by default.
  EXPECT_EQ(producer_op(p, "clip"), "Clip");
  // Under SimulateDPU: LeakyRelu slope, Sigmoid -> HardSigmoid, scaling Muls.
  EXPECT_EQ(leaky_alpha(p), 26.0f / 256.0f);
  EXPECT_EQ(count_ops(p, "Sigmoid"), 0u);
  EXPECT_EQ(producer_op(p, "hs"), "Mul");
  EXPECT_EQ(producer_op(p, "sig"), "Mul");  // now a HardSigmoid(1/6) with its DPU Mul
  EXPECT_EQ(producer_op(p, "ap"), "Mul");
  EXPECT_EQ(producer_op(p, "rm1"), "Mul");
  EXPECT_EQ(producer_op(p, "sm"), "Softmax");  // ConvertSoftmaxToDPUVersion is off by default
  EXPECT_EQ(producer_op(p, "inorm"), "InstanceNormalization");  // ConvertInstanceNormToDPUVersion too
  // The scaled values "<out>_Mul" stay float: no Q/DQ in the export.
  EXPECT_EQ(r.plan.find("ap_Mul"), nullptr);
  EXPECT_EQ(quantizers_of(r.model, "ap_Mul"), 0u);
  EXPECT_EQ(quantizers_of(r.model, "ap"), 1u);
  // QDQ removal: Conv -> Relu without a Q/DQ between them; Conv -> LeakyRelu keeps it (option off).
  EXPECT_EQ(r.plan.find("c2"), nullptr);
  EXPECT_EQ(r.plan.fused_activations.at("c2"), "r2");
  EXPECT_EQ(quantizers_of(r.model, "c2"), 0u);
  EXPECT_EQ(producer_op(r.model, "r2"), "Relu");  // the Relu stays, float, before the Q/DQ
  EXPECT_EQ(quantizers_of(r.model, "r2"), 1u);
  EXPECT_NE(r.plan.find("c1"), nullptr);
  EXPECT_EQ(quantizers_of(r.model, "c1"), 1u);
}

struct Switch {
  const char* key;
  bool value;  // the non-default value
  std::function<void(const QuantizeResult&)> check;
};

TEST(DpuQuantize, EachKeyOffLeavesItsPatternAlone) {
  ir::Model m = all_patterns();
  std::vector<Switch> switches = {
      {"ConvertBNToConv", false,
       [](const QuantizeResult& r) { EXPECT_EQ(producer_op(*r.prepared, "bn"), "BatchNormalization"); }},
      {"ConvertReduceMeanToGlobalAvgPool", false,
       [](const QuantizeResult& r) { EXPECT_EQ(count_ops(*r.prepared, "ReduceMean"), 2u); }},
      {"SplitLargeKernelPool", false,
       [](const QuantizeResult& r) { EXPECT_EQ(count_ops(*r.prepared, "AveragePool"), 1u); }},
      {"ConvertSplitToSlice", false, [](const QuantizeResult& r) { EXPECT_EQ(count_ops(*r.prepared, "Split"), 1u); }},
      {"ConvertClipToRelu", true,
       [](const QuantizeResult& r) {
         EXPECT_EQ(producer_op(*r.prepared, "clip"), "Relu");
         EXPECT_EQ(count_ops(*r.prepared, "Clip"), 0u);
       }},
      {"SimulateDPU", false,
       [](const QuantizeResult& r) {
         EXPECT_EQ(leaky_alpha(*r.prepared), 0.1f);
         EXPECT_EQ(count_ops(*r.prepared, "Sigmoid"), 1u);
         EXPECT_EQ(producer_op(*r.prepared, "ap"), "AveragePool");
         EXPECT_EQ(producer_op(*r.prepared, "hs"), "HardSigmoid");
       }},
      {"ConvertLeakyReluToDPUVersion", false,
       [](const QuantizeResult& r) { EXPECT_EQ(leaky_alpha(*r.prepared), 0.1f); }},
      {"ConvertSigmoidToHardSigmoid", false,
       [](const QuantizeResult& r) { EXPECT_EQ(producer_op(*r.prepared, "sig"), "Sigmoid"); }},
      {"ConvertHardSigmoidToDPUVersion", false,
       [](const QuantizeResult& r) {
         EXPECT_EQ(producer_op(*r.prepared, "hs"), "HardSigmoid");
         EXPECT_EQ(producer_op(*r.prepared, "sig"), "HardSigmoid");  // converted, not scaled
       }},
      {"ConvertAvgPoolToDPUVersion", false,
       [](const QuantizeResult& r) { EXPECT_EQ(producer_op(*r.prepared, "ap"), "AveragePool"); }},
      {"ConvertReduceMeanToDPUVersion", false,
       [](const QuantizeResult& r) { EXPECT_EQ(producer_op(*r.prepared, "rm1"), "ReduceMean"); }},
      {"ConvertSoftmaxToDPUVersion", true,
       [](const QuantizeResult& r) { EXPECT_EQ(count_ops(*r.prepared, "Softmax"), 0u); }},
      {"ConvertInstanceNormToDPUVersion", true,
       [](const QuantizeResult& r) {
         const ir::Node* n = producer(r.model, "inorm_QuantizeLinear_Input");
         ASSERT_TRUE(n);
         EXPECT_EQ(n->op_type, "ExtendedInstanceNormalization");
         EXPECT_EQ(n->domain, "com.amd.quark");
         EXPECT_EQ(r.model.opset("com.amd.quark"), 1);
         EXPECT_EQ(n->input(0)->producer()->op_type, "DequantizeLinear");  // its input and output quantized
       }},
      {"RemoveQDQConvLeakyRelu", true,
       [](const QuantizeResult& r) {
         EXPECT_EQ(r.plan.find("c1"), nullptr);
         EXPECT_EQ(quantizers_of(r.model, "c1"), 0u);
         const ir::Node* leaky = producer(r.model, "leaky_QuantizeLinear_Input");
         ASSERT_TRUE(leaky);
         EXPECT_EQ(leaky->op_type, "LeakyRelu");
         EXPECT_EQ(leaky->input(0)->producer()->op_type, "Conv");
       }},
  };
  for (const Switch& s : switches) {
    SCOPED_TRACE(s.key);
    QuantConfig c = npu_config();
    apply_extra_option(c, s.key, nlohmann::json(s.value));
    QuantizeResult r = quantize_random(m, c, 2, 11);
    ASSERT_TRUE(r.prepared);
    s.check(r);
  }
}

// u = Unsqueeze(x), y = u * Reciprocal(Sqrt(Max(ReduceSum(u * u, axes -1), 1e-12))): FuseL2Norm's pattern.
ir::Model l2_norm() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  auto v = [&](const std::string& name) { return g.add_value(name); };
  auto f = [&](const std::string& name) { return g.find_value(name); };
  ir::Value* x = add_float_value(g, "x", {3, 8});
  g.add_input(x);
  g.add_node("Unsqueeze", {x, ints(g, "unsq_axes", {1})}, {v("u")}, "unsqueeze");
  g.add_node("Mul", {f("u"), f("u")}, {v("sq")}, "square");
  g.add_node("ReduceSum", {f("sq"), ints(g, "axes", {-1})}, {v("sum")}, "sum");
  g.add_node("Max", {f("sum"), scalar(g, "eps", 1e-12f)}, {v("clamped")}, "max");
  g.add_node("Sqrt", {f("clamped")}, {v("norm")}, "sqrt");
  g.add_node("Reciprocal", {f("norm")}, {v("inv")}, "inv");
  g.add_node("Mul", {f("u"), f("inv")}, {output(g, "y")}, "root");
  return m;
}

TEST(DpuQuantize, OptInFusionsRunOnlyWhenAskedFor) {
  ir::Model m = l2_norm();
  QuantizeResult r = quantize_random(m, npu_config(), 2, 11);  // FuseL2Norm: false by default (vai)
  EXPECT_EQ(count_ops(*r.prepared, "LpNormalization"), 0u);
  EXPECT_EQ(producer_op(*r.prepared, "y"), "Mul");
  QuantConfig c = npu_config();
  apply_extra_option(c, "FuseL2Norm", nlohmann::json(true));
  r = quantize_random(m, c, 2, 11);
  EXPECT_EQ(producer_op(*r.prepared, "y"), "LpNormalization");
  EXPECT_EQ(count_ops(*r.prepared, "Sqrt"), 0u);
}

TEST(DpuQuantize, NodeFilterKeepsExcludedNodesAsTheyAre) {
  ir::Model m = all_patterns();
  QuantConfig c = npu_config();
  c.nodes_to_exclude = {"split", "sig", "ap", "bn", "leaky"};
  QuantizeResult r = quantize_random(m, c, 2, 11);
  const ir::Model& p = *r.prepared;
  EXPECT_EQ(count_ops(p, "Split"), 1u);
  EXPECT_EQ(producer_op(p, "sig"), "Sigmoid");
  EXPECT_EQ(producer_op(p, "ap"), "AveragePool");
  EXPECT_EQ(producer_op(p, "bn"), "BatchNormalization");
  EXPECT_EQ(leaky_alpha(p), 0.1f);
  EXPECT_EQ(producer_op(p, "hs"), "Mul");  // not excluded: rewritten
  EXPECT_EQ(producer_op(p, "rm1"), "Mul");

  // op_types_to_quantize: only the listed types are rewritten (BatchNormalization is added by ConvertBNToConv).
  c = npu_config();
  c.op_types_to_quantize = {"Conv", "Relu", "LeakyRelu"};
  r = quantize_random(m, c, 2, 11);
  EXPECT_EQ(producer_op(*r.prepared, "bn"), "Conv");
  EXPECT_EQ(leaky_alpha(*r.prepared), 26.0f / 256.0f);
  EXPECT_EQ(count_ops(*r.prepared, "Split"), 1u);
  EXPECT_EQ(producer_op(*r.prepared, "sig"), "Sigmoid");
  EXPECT_EQ(producer_op(*r.prepared, "rm1"), "ReduceMean");
}

// x -> Conv -> LeakyRelu -> Conv -> y, and the same with a second reader of the first Conv's output.
ir::Model conv_leaky_relu(bool second_reader) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 6, 6});
  g.add_input(x);
  ir::Value *c = g.add_value("c"), *l = g.add_value("l");
  g.add_node("Conv", {x, add_random_initializer(g, "w", {4, 3, 3, 3}, 21, -0.5f, 0.5f)}, {c}, "conv");
  g.add_node("LeakyRelu", {c}, {l}, "leaky")->set_attribute(ir::Attribute::of_float("alpha", 0.2f));
  g.add_node("Conv", {l, add_random_initializer(g, "w2", {2, 4, 1, 1}, 22, -0.5f, 0.5f)}, {output(g, "y")}, "conv2");
  if (second_reader) g.add_node("Sigmoid", {c}, {output(g, "z")}, "other");
  return m;
}

TEST(DpuQuantize, RemoveQdqBetweenConvAndLeakyRelu) {
  QuantConfig c = npu_config();
  c.remove_qdq_conv_leaky_relu = true;
  ir::Model m = conv_leaky_relu(false);
  QuantizeResult r = quantize_random(m, c, 2, 11);
  EXPECT_EQ(r.plan.find("c"), nullptr);
  EXPECT_EQ(r.plan.fused_activations.at("c"), "l");
  EXPECT_EQ(quantizers_of(r.model, "c"), 0u);
  EXPECT_EQ(quantizers_of(r.model, "l"), 1u);
  EXPECT_EQ(count_ops(r.model, "LeakyRelu"), 1u);
  EXPECT_EQ(leaky_alpha(r.model), 51.0f / 256.0f);  // DPU slope: 0.2 -> 51/256
  // The LeakyRelu reads the Conv's float output directly.
  const ir::Node* leaky = producer(r.model, "l");
  ASSERT_TRUE(leaky);
  EXPECT_EQ(leaky->input(0)->producer()->op_type, "Conv");

  // The simulation is the exported model, exactly.
  calib::RandomReaderOptions ro;
  ro.seed = 99;
  auto feeds = *calib::make_random_reader(m.graph->fed_inputs(), ro)->next();
  Simulation sim(*r.prepared, r.plan, c, 1);
  engine::Session exported(r.model);
  auto a = sim.run(feeds), b = exported.run(feeds);
  ASSERT_EQ(a.size(), 1u);
  auto av = a[0].values<float>(), bv = b[0].values<float>();
  ASSERT_EQ(av.size(), bv.size());
  for (size_t i = 0; i < av.size(); ++i) ASSERT_EQ(av[i], bv[i]) << i;

  // Without the option the pair keeps its Q/DQ.
  c.remove_qdq_conv_leaky_relu = false;
  r = quantize_random(m, c, 2, 11);
  EXPECT_NE(r.plan.find("c"), nullptr);
  EXPECT_EQ(quantizers_of(r.model, "c"), 1u);

  // A second reader of the Conv's output: the Q/DQ stays, with a warning.
  c.remove_qdq_conv_leaky_relu = true;
  r = quantize_random(conv_leaky_relu(true), c, 2, 11);
  EXPECT_NE(r.plan.find("c"), nullptr);
  bool warned = false;
  for (const std::string& w : r.plan.warnings) warned = warned || w.find("'c' is also read") != std::string::npos;
  EXPECT_TRUE(warned);
}

// Quark's RemoveQDQConvRelu and RemoveQDQConvClip: false keeps the Q/DQ between a Conv and its
// Relu or Clip(0, 6), which vai_q_onnx always removes.
TEST(DpuQuantize, RemoveQdqConvReluAndClipSwitches) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 3, 6, 6});
  g.add_input(x);
  ir::Value *c1 = g.add_value("c1"), *r = g.add_value("r"), *c2 = g.add_value("c2");
  g.add_node("Conv", {x, add_random_initializer(g, "w1", {4, 3, 3, 3}, 31, -0.5f, 0.5f)}, {c1}, "conv1");
  g.add_node("Relu", {c1}, {r}, "relu");
  g.add_node("Conv", {r, add_random_initializer(g, "w2", {2, 4, 1, 1}, 32, -0.5f, 0.5f)}, {c2}, "conv2");
  g.add_node("Clip", {c2, scalar(g, "lo", 0.0f), scalar(g, "hi", 6.0f)}, {output(g, "y")}, "clip");

  QuantConfig c = npu_config();
  QuantizeResult fused = quantize_random(m, c, 2, 11);
  EXPECT_EQ(fused.plan.find("c1"), nullptr);
  EXPECT_EQ(fused.plan.find("c2"), nullptr);
  EXPECT_EQ(quantizers_of(fused.model, "c1"), 0u);

  c.remove_qdq_conv_relu = false;
  QuantizeResult relu_kept = quantize_random(m, c, 2, 11);
  EXPECT_NE(relu_kept.plan.find("c1"), nullptr);
  EXPECT_EQ(quantizers_of(relu_kept.model, "c1"), 1u);
  EXPECT_EQ(relu_kept.plan.find("c2"), nullptr);

  c.remove_qdq_conv_relu = true;
  c.remove_qdq_conv_clip = false;
  QuantizeResult clip_kept = quantize_random(m, c, 2, 11);
  EXPECT_EQ(clip_kept.plan.find("c1"), nullptr);
  EXPECT_NE(clip_kept.plan.find("c2"), nullptr);
  EXPECT_EQ(quantizers_of(clip_kept.model, "c2"), 1u);

  // Only the NPU path removes these Q/DQ: elsewhere keeping them is what happens anyway, and
  // removing them is refused by name.
  QuantConfig plain;
  plain.remove_qdq_conv_clip = false;
  EXPECT_EQ(testing::error_of([&] { check_config(plain); }), "");
  plain.remove_qdq_conv_leaky_relu = true;
  EXPECT_NE(
      testing::error_of([&] { check_config(plain); }).find("RemoveQDQConvLeakyRelu takes effect only with enable_dpu"),
      std::string::npos);
}

TEST(DpuQuantize, ConstraintsAreOneLineErrors) {
  auto error = [](const std::function<void(QuantConfig&)>& change) {
    QuantConfig c = npu_config();
    change(c);
    return testing::error_of([&] { check_config(c); });
  };
  EXPECT_EQ(error([](QuantConfig&) {}), "");
  EXPECT_NE(error([](QuantConfig& c) { c.per_channel = true; }).find("enable_dpu: per_channel"), std::string::npos);
  EXPECT_NE(error([](QuantConfig& c) { c.reduce_range = true; }).find("enable_dpu: reduce_range"), std::string::npos);
  EXPECT_NE(error([](QuantConfig& c) { c.weight_type = ir::DataType::UInt8; }).find("weight_type must be QInt8"),
            std::string::npos);
  EXPECT_NE(error([](QuantConfig& c) { c.weight_symmetric = false; }).find("WeightSymmetric"), std::string::npos);
  EXPECT_NE(error([](QuantConfig& c) { c.activation_symmetric = false; }).find("ActivationSymmetric"),
            std::string::npos);
  EXPECT_NE(error([](QuantConfig& c) { c.calibrate_method = calib::Method::MinMax; }).find("power-of-two"),
            std::string::npos);
  EXPECT_NE(error([](QuantConfig& c) { c.format = QuantFormat::QOperator; }).find("QuantFormat.QDQ"),
            std::string::npos);
  // A DPU simulation key without enable_dpu would do nothing: refused by name.
  EXPECT_NE(error([](QuantConfig& c) {
              c.enable_dpu = false;
              apply_extra_option(c, "ConvertLeakyReluToDPUVersion", nlohmann::json(true));
            }).find("ConvertLeakyReluToDPUVersion takes effect only with enable_dpu"),
            std::string::npos);
  // Keys and config entries parse; an unbuilt Quark key is refused by name.
  QuantConfig c;
  apply_config_json(c, nlohmann::json::parse(R"({"enable_dpu": true, "extra_options": {"SimulateDPU": false,
      "RemoveQDQConvPRelu": true, "FuseL2Norm": true}})"));
  EXPECT_TRUE(c.enable_dpu);
  EXPECT_FALSE(c.simulate_dpu);
  EXPECT_TRUE(c.remove_qdq_conv_prelu);
  EXPECT_TRUE(c.dpu_pass_switches.at("FuseL2Norm"));
  EXPECT_NE(testing::error_of([&] {
              apply_extra_option(c, "ConvertGridSampleToDPUVersion", nlohmann::json(true));
            }).find("ConvertGridSampleToDPUVersion"),
            std::string::npos);
}

// `onnxptq quantize --enable-dpu`: the constraint is a one-line error; with it the report lists the
// fused pairs and the written model has no Q/DQ between the Conv and its Relu.
TEST(DpuQuantize, CommandLineFlag) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_dpu_cli_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ir::save_model(all_patterns(), dir / "m.onnx");
  std::string base = "quantize " + (dir / "m.onnx").string() + " -o " + (dir / "q.onnx").string() +
                     " --random 2 --quiet --enable-dpu --activation-type QUInt8";
  cli_test::CliRun bad = cli_test::onnxptq(base);
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err.rfind("error: enable_dpu: ActivationSymmetric must be True", 0), 0u) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "q.onnx"));
  cli_test::CliRun ok =
      cli_test::onnxptq(base + " --extra-option ActivationSymmetric=true --report " + (dir / "r.json").string());
  ASSERT_EQ(ok.code, 0) << ok.err;
  nlohmann::json report = nlohmann::json::parse(cli_test::slurp(dir / "r.json"));
  EXPECT_EQ(report["fused_activations"]["c2"], "r2");
  EXPECT_EQ(quantizers_of(ir::load_model(dir / "q.onnx"), "c2"), 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq::quant
