// Extra options of vai_q_onnx and Quark that change scales or rewrite the float graph:
// Int16Scale (M / 2^N scales), UsePowerOf2Scale false (float scales from a power-of-two method),
// ConvertOpsetVersion, ConvertClipToDPUVersion, and the graph rewrites run by their keys without
// an NPU flag (as Quark's quantize_static runs them, and its VINT8 preset sets them).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "passes/dpu.h"
#include "passes/rewrite.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

using ir::Tensor;
using nlohmann::json;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::error_of;
using testing::output;
using testing::quantize_random;
using testing::scalar;

// x [1,4,8,8] -> Conv -> BatchNormalization -> Clip(0, 6) -> Conv -> y, and x -> Clip(0.4, 6.6) -> c,
// x -> Clip(min 0, no max) -> d. Without `bn`, no BatchNormalization.
ir::Model conv_bn_clip(int64_t opset = 13, bool bn = true) {
  ir::Model m;
  m.set_opset("", opset);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 4, 8, 8});
  g.add_input(x);
  // Typed as a prepared model's would be: ConvertBNToConv needs the BatchNormalization's rank.
  ir::Value *c1 = add_float_value(g, "c1", {1, 4, 8, 8}), *b1 = bn ? g.add_value("b1") : c1, *r1 = g.add_value("r1");
  g.add_node("Conv", {x, add_random_initializer(g, "w1", {4, 4, 3, 3}, 1, -0.5f, 0.5f)}, {c1}, "conv1")
      ->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  if (bn)
    g.add_node(
         "BatchNormalization",
         {c1, add_random_initializer(g, "gamma", {4}, 2, 0.5f, 1.5f),
          add_random_initializer(g, "beta", {4}, 3, -0.5f, 0.5f),
          add_random_initializer(g, "mean", {4}, 4, -0.5f, 0.5f), add_random_initializer(g, "var", {4}, 5, 0.5f, 1.5f)},
         {b1}, "bn")
        ->set_attribute(ir::Attribute::of_float("epsilon", 1e-5f));

  g.add_node("Clip", {b1, scalar(g, "lo", 0.0f), scalar(g, "hi", 6.0f)}, {r1}, "clip6");
  g.add_node("Conv",
             {r1, add_random_initializer(g, "w2", {4, 4, 1, 1}, 6, -0.5f, 0.5f),
              add_random_initializer(g, "bias2", {4}, 7, -0.2f, 0.2f)},
             {output(g, "y")}, "conv2");
  g.add_node("Clip", {x, scalar(g, "lo2", 0.4f), scalar(g, "hi2", 6.6f)}, {output(g, "c")}, "clip_frac");
  g.add_node("Clip", {x, scalar(g, "lo3", 0.0f)}, {output(g, "d")}, "clip_open");
  return m;
}

int ops(const ir::Model& m, const std::string& op_type) { return testing::count_ops(m, op_type); }

QuantConfig u8s8_unoptimized() {
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_type = ir::DataType::UInt8;
  c.optimize_model = false;
  c.calib.threads = 1;
  return c;
}

// The scalar scale of every QuantizeLinear / DequantizeLinear of the written model, by the tensor quantized.
std::map<std::string, double> scales(const ir::Model& model) {
  std::map<std::string, double> out;
  for (const auto& n : model.graph->nodes()) {
    if (n->op_type != "QuantizeLinear" && n->op_type != "DequantizeLinear") continue;
    const Tensor* s = passes::constant_of(n->input(1));
    if (s && s->size() == 1) out[n->input(0)->name()] = testing::values_of(*s)[0];
  }
  return out;
}

bool is_power_of_two(double s) {
  int e = 0;
  return std::frexp(s, &e) == 0.5;
}

std::vector<float> clip_bounds(const ir::Model& m, const std::string& node) {
  for (const auto& n : m.graph->nodes())
    if (n->name == node) {
      std::vector<float> b;
      for (size_t i = 1; i < n->inputs().size(); ++i)
        b.push_back(n->input(i) ? passes::float_constant_of(n->input(i))->values<float>()[0] : NAN);
      return b;
    }
  return {};
}

TEST(RewriteKeys, RunByTheirKeysWithoutAnNpuFlag) {
  ir::Model m = conv_bn_clip();
  QuantConfig plain = u8s8_unoptimized();
  EXPECT_EQ(ops(quantize_random(m, plain, 2, 11).model, "BatchNormalization"), 1);
  QuantConfig c = u8s8_unoptimized();
  apply_extra_option(c, "ConvertBNToConv", json(true));
  apply_extra_option(c, "ConvertClipToRelu", json(true));
  ir::Model q = quantize_random(m, c, 2, 11).model;
  EXPECT_EQ(ops(q, "BatchNormalization"), 0);
  EXPECT_EQ(ops(q, "Conv"), 3);  // the BatchNormalization is a depthwise 1x1 Conv
  // Clip(0, 6) and the open Clip(0, .) become Relu after calibration (the first then goes, as ORT
  // removes a Relu its quantized producer's output covers); Clip(0.4, 6.6) stays.
  auto op_of = [&](const std::string& name) {
    for (const auto& n : q.graph->nodes())
      if (n->name == name) return n->op_type;
    return std::string();
  };
  EXPECT_EQ(op_of("clip_open"), "Relu");
  EXPECT_EQ(op_of("clip_frac"), "Clip");
  EXPECT_EQ(ops(q, "Clip"), 1);
  // A key false without an NPU flag is what happens anyway: accepted. What only the NPU CNN
  // quantizer does (simulating the DPU, removing Q/DQ around activations) is refused by name.
  QuantConfig off = u8s8_unoptimized();
  apply_extra_option(off, "ConvertSplitToSlice", json(false));
  apply_extra_option(off, "SimulateDPU", json(false));
  apply_extra_option(off, "RemoveQDQConvRelu", json(false));
  EXPECT_EQ(error_of([&] { check_config(off); }), "");
  for (const char* key : {"ConvertSigmoidToHardSigmoid", "ConvertClipToDPUVersion", "RemoveQDQConvPRelu"}) {
    QuantConfig bad = u8s8_unoptimized();
    apply_extra_option(bad, key, json(true));
    EXPECT_EQ(error_of([&] { check_config(bad); }),
              std::string("extra option ") + key + " takes effect only with enable_dpu (the NPU CNN quantizer's)");
  }
}

TEST(RewriteKeys, Vint8PresetQuantizesWithItsRewrites) {
  QuantConfig c;
  apply_preset(c, "VINT8");
  c.calib.threads = 1;
  EXPECT_EQ(error_of([&] { check_config(c); }), "");
  ir::Model q = quantize_random(conv_bn_clip(), c, 2, 11).model;
  EXPECT_EQ(ops(q, "BatchNormalization"), 0);  // ConvertBNToConv (optimize_model is off)
  EXPECT_EQ(ops(q, "Clip"), 1);                // ReplaceClip6Relu, ConvertClipToRelu: Clip(0.4, 6.6) is left
  for (const auto& [tensor, s] : scales(q)) EXPECT_TRUE(is_power_of_two(s)) << tensor << " " << s;
}

TEST(RewriteKeys, ConvertClipToDpuVersionRoundsBoundsToInt8Integers) {
  ir::Model m = conv_bn_clip();
  passes::PassContext context;
  EXPECT_TRUE(passes::convert_clip_to_dpu_version(m, context));
  EXPECT_EQ(clip_bounds(m, "clip_frac"), (std::vector<float>{0.0f, 7.0f}));    // round(0.4), round(6.6)
  EXPECT_EQ(clip_bounds(m, "clip_open"), (std::vector<float>{0.0f, 127.0f}));  // no max: the int8 one
  EXPECT_EQ(clip_bounds(m, "clip6"), (std::vector<float>{0.0f, 6.0f}));

  // Through quantize_static on the enable_dpu path, off by default (as in Quark's XINT8).
  QuantConfig c;
  apply_preset(c, "XINT8");
  c.calib.threads = 1;
  c.optimize_model = false;
  c.dpu_pass_switches["ConvertClipToRelu"] = false;
  EXPECT_EQ(clip_bounds(quantize_random(conv_bn_clip(), c, 2, 11).model, "clip_frac")[1], 6.6f);
  apply_extra_option(c, "ConvertClipToDPUVersion", json(true));
  EXPECT_EQ(clip_bounds(quantize_random(conv_bn_clip(), c, 2, 11).model, "clip_frac")[1], 7.0f);
}

// The M / 2^N nearest to s with M 16-bit and N in [0, 16], smaller N first on ties (vai_q_onnx's
// find_int16_scale, written out here by brute force).
double nearest_m_over_2n(double s) {
  double best = 0, error = INFINITY;
  for (int n = 0; n <= 16; ++n)
    for (double m = std::floor(std::ldexp(s, n)) - 1; m <= std::ceil(std::ldexp(s, n)) + 1; ++m) {
      if (m < -32768 || m > 32767) continue;
      double e = std::abs(std::ldexp(m, -n) - s);
      if (e < error) error = e, best = std::ldexp(m, -n);
    }
  return best;
}

TEST(ScaleKeys, Int16ScaleSnapsMinMaxScalesToM_Over_2N) {
  ir::Model m = conv_bn_clip();
  QuantConfig plain = u8s8_unoptimized();
  QuantConfig c = u8s8_unoptimized();
  c.calibrate_method = calib::Method::MinMSE;  // Int16Scale calibrates with MinMax, whatever the method
  apply_extra_option(c, "Int16Scale", json(true));
  std::map<std::string, double> float_scales = scales(quantize_random(m, plain, 2, 11).model);
  std::map<std::string, double> int16 = scales(quantize_random(m, c, 2, 11).model);
  ASSERT_EQ(float_scales.size(), int16.size());
  size_t snapped = 0;
  for (const auto& [tensor, s] : float_scales) {
    if (tensor == "bias2_quantized") continue;  // the int32 bias: input scale x weight scale
    EXPECT_EQ(int16.at(tensor), nearest_m_over_2n(s)) << tensor;
    snapped += int16.at(tensor) != s;
  }
  EXPECT_GT(snapped, 3u);
  QuantConfig dpu;
  apply_preset(dpu, "XINT8");
  apply_extra_option(dpu, "Int16Scale", json(true));
  EXPECT_EQ(error_of([&] { check_config(dpu); }),
            "Int16Scale and enable_dpu: the NPU takes power-of-two scales, not M / 2^N");
}

TEST(ScaleKeys, UsePowerOf2ScaleFalseKeepsTheFloatScaleOfTheRange) {
  ir::Model m = conv_bn_clip();
  // NonOverflow ranges are the symmetric MinMax ones; with UsePowerOf2Scale false their scales
  // are the float ones, weights too.
  QuantConfig minmax = u8s8_unoptimized();
  minmax.calib.symmetric = true;
  QuantConfig c = u8s8_unoptimized();
  c.calibrate_method = calib::Method::NonOverflow;
  apply_extra_option(c, "UsePowerOf2Scale", json(false));
  std::map<std::string, double> expected = scales(quantize_random(m, minmax, 2, 11).model);
  std::map<std::string, double> got = scales(quantize_random(m, c, 2, 11).model);
  ASSERT_EQ(expected.size(), got.size());
  size_t float_scales = 0;
  for (const auto& [tensor, s] : expected) {
    EXPECT_FLOAT_EQ(got.at(tensor), s) << tensor;
    float_scales += !is_power_of_two(got.at(tensor));
  }
  EXPECT_GT(float_scales, 3u);
  // MinMSE's range is the one its position represents, whose float scale is that power of two,
  // and its weights still search positions (vai_q_onnx's quantize_data_pof2s): the same scales.
  QuantConfig pof2 = u8s8_unoptimized();
  pof2.calibrate_method = c.calibrate_method = calib::Method::MinMSE;
  EXPECT_EQ(scales(quantize_random(m, c, 2, 11).model), scales(quantize_random(m, pof2, 2, 11).model));

  QuantConfig bad = u8s8_unoptimized();
  apply_extra_option(bad, "UsePowerOf2Scale", json(false));
  EXPECT_NE(error_of([&] { check_config(bad); }).find("UsePowerOf2Scale false: calibrate_method MinMax"),
            std::string::npos);
  apply_preset(bad, "XINT8");
  apply_extra_option(bad, "UsePowerOf2Scale", json(false));
  EXPECT_EQ(error_of([&] { check_config(bad); }),
            "UsePowerOf2Scale false and enable_dpu: the NPU takes power-of-two scales");
}

TEST(PreparationKeys, ConvertOpsetVersionUpOrDown) {
  QuantConfig c = u8s8_unoptimized();
  apply_extra_option(c, "ConvertOpsetVersion", json(17));
  EXPECT_EQ(quantize_random(conv_bn_clip(13), c, 2, 11).model.opset(""), 17);
  apply_extra_option(c, "ConvertOpsetVersion", json(13));
  // libonnx has no adapter down from BatchNormalization-15: without one, a one-line error.
  EXPECT_EQ(quantize_random(conv_bn_clip(17, false), c, 2, 11).model.opset(""), 13);
  EXPECT_NE(error_of([&] { quantize_random(conv_bn_clip(17), c, 2, 11); }).find("opset conversion 17 -> 13"),
            std::string::npos);
  c.optimize_model = true;
  apply_extra_option(c, "ConvertOpsetVersion", json(11));
  EXPECT_EQ(error_of([&] { check_config(c); }),
            "ConvertOpsetVersion 11 and optimize_model: the model preparation converts to opset 13 (set "
            "optimize_model false)");
  EXPECT_EQ(error_of([&] { apply_extra_option(c, "ConvertOpsetVersion", json("17")); }),
            "extra option ConvertOpsetVersion: expected an integer, got \"17\"");
}

}  // namespace
}  // namespace onnxptq::quant
