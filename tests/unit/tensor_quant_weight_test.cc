// Weights and int32 biases against the seeds' own numbers (vai_q_onnx 1.16's rules, ORT's int32
// bias guard), values worked out by hand (reasoning in the comments), and brute force over every
// candidate of the MinMSE searches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "onnxptq/error.h"
#include "quant/tensor_quant.h"
#include "support/tensor_quant_support.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;
// Each name, not the namespace: a unity build may have put other testing:: names in scope.
using testing::expect_error;
using testing::f32;
using testing::floats;
using testing::sz;
using testing::values_of;

// ------------------------------------------------------------------------------------------------
// Weights

// A worked example of vai_q_onnx 1.16's weight rule: int8, WeightSymmetric, power of two:
// max|w| = 0.5 -> 0.5/127 -> -log2 = 7.989 -> pos 8, s = 1/256; q = clip(rne(256 w), -127, 127):
// 0.5 saturates to 127 and -0.5 to -127 (ORT's full saturation gives -128).
TEST(QuantizeWeight, VaiAppendixAExample1) {
  ir::Tensor w = floats({4}, {0.5f, -0.25f, 0.1f, -0.5f}, "w");
  WeightOptions o = weight_options_of(Tool::vai, ScaleKind::power_of_two);
  o.scale.symmetric = true;
  QuantizedTensor q = quantize_weight(w, DataType::Int8, o);
  ASSERT_EQ(q.params.size(), 1u);
  EXPECT_EQ(q.params[0].scale, 1.0 / 256);
  EXPECT_EQ(q.params[0].zero_point, 0);
  EXPECT_EQ(values_of<int8_t>(q.data), (std::vector<int8_t>{127, -64, 26, -127}));
  o.quantize.saturation = Saturation::full;
  EXPECT_EQ(values_of<int8_t>(quantize_weight(w, DataType::Int8, o).data)[3], -128);
  // True NonOverflow: 127/256 < 0.5, so pos 7.
  o.scale.pof2_position = Pof2Position::non_overflow;
  EXPECT_EQ(weight_params(w, DataType::Int8, o)[0].scale, 1.0 / 128);
}

// ORT MinMax asymmetric uint8: [-1, 2] -> scale 3/255, zp 85; q by the float32 formula.
TEST(QuantizeWeight, MinMaxPerTensor) {
  std::vector<float> v = {-1, 0, 2, 0.5f, 1.3f};
  ir::Tensor w = floats({5}, v);
  QuantizedTensor q = quantize_weight(w, DataType::UInt8, weight_options_of(Tool::ort));
  EXPECT_EQ(q.params[0].scale, f32(3.0 / 255));
  EXPECT_EQ(q.params[0].zero_point, 85);
  EXPECT_FALSE(q.axis);
  auto got = values_of<uint8_t>(q.data);
  for (size_t i = 0; i < v.size(); ++i) {
    float expected = std::nearbyint(v[i] / static_cast<float>(3.0 / 255)) + 85;
    EXPECT_EQ(got[i], std::clamp(expected, 0.f, 255.f)) << i;
  }
}

// Per channel, vai power of two, symmetric int8:
//  axis 0, row 0 {0.5, -0.25, 0.1}: pos 8 as above -> {127, -64, 26};
//  row 1 {2, -1, 0.3}: 2/127 -> -log2 = 5.988 -> pos 6, s = 1/64 -> {127 (128 clipped), -64, 19}.
TEST(QuantizeWeight, PerChannelAxis0And1) {
  ir::Tensor w = floats({2, 3}, {0.5f, -0.25f, 0.1f, 2, -1, 0.3f}, "w");
  WeightOptions o = weight_options_of(Tool::vai, ScaleKind::power_of_two);
  o.scale.symmetric = true;
  o.axis = 0;
  QuantizedTensor q = quantize_weight(w, DataType::Int8, o);
  ASSERT_EQ(q.params.size(), 2u);
  EXPECT_EQ(q.params[0].scale, 1.0 / 256);
  EXPECT_EQ(q.params[1].scale, 1.0 / 64);
  EXPECT_EQ(*q.axis, 0);
  EXPECT_EQ(values_of<int8_t>(q.data), (std::vector<int8_t>{127, -64, 26, 127, -64, 19}));
  // Axis 1 (-1), columns {0.5, 2}, {-0.25, -1}, {0.1, 0.3}: max 2 -> pos 6; 1 -> 1/127 -> pos 7
  // (-log2 = 6.988); 0.3 -> 0.3/127 -> -log2 = 8.725 -> pos 9.
  o.axis = -1;
  q = quantize_weight(w, DataType::Int8, o);
  ASSERT_EQ(q.params.size(), 3u);
  EXPECT_EQ(q.params[0].scale, 1.0 / 64);
  EXPECT_EQ(q.params[1].scale, 1.0 / 128);
  EXPECT_EQ(q.params[2].scale, 1.0 / 512);
  EXPECT_EQ(*q.axis, 1);
  // 0.5*64 = 32, -0.25*128 = -32, 0.1*512 = 51.2 -> 51; 2*64 = 128 -> 127, -128 -> -127, 0.3*512 = 153.6 -> 127.
  EXPECT_EQ(values_of<int8_t>(q.data), (std::vector<int8_t>{32, -32, 51, 127, -127, 127}));
}

// vai_q_onnx 1.16's quantize_data_pof2s: MinMSE tries p0 - 1 .. p0 + 3 (p0 the nearest position)
// with the zero point kept and keeps the least squared error, the coarsest on ties. Brute force
// here: every candidate scored.
TEST(QuantizeWeight, Pof2MinMseIsTheLeastSquaredErrorCandidate) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 0.05f);
  std::uniform_real_distribution<float> uniform(-1.35f, 1.35f);
  for (int data = 0; data < 3; ++data) {
    SCOPED_TRACE(data);
    std::vector<float> v(999);
    for (float& f : v) f = data == 2 ? uniform(rng) : normal(rng);
    if (data == 1) v[17] = 3.f;
    if (data == 2) v[0] = 1.35f;
    ir::Tensor w = floats({999}, v);
    WeightOptions o = weight_options_of(Tool::vai, ScaleKind::power_of_two);
    o.scale.symmetric = true;
    o.method = WeightMethod::pof2_min_mse;
    qmath::ScaleZeroPoint got = weight_params(w, DataType::Int8, o)[0];

    double m = 0;
    for (float f : v) m = std::max(m, std::fabs(static_cast<double>(f)));
    int p0 = static_cast<int>(std::nearbyint(-std::log2(2 * m / 254)));
    int best = 0;
    double best_error = INFINITY;
    for (int pos = p0 - 1; pos <= p0 + 3; ++pos) {
      double s = std::ldexp(1.0, -pos), e = 0;
      for (float f : v) {
        double q = std::clamp(std::nearbyint(f / s), -127.0, 127.0);
        e += (q * s - f) * (q * s - f);
      }
      if (e < best_error) best_error = e, best = pos;
    }
    EXPECT_EQ(got.scale, std::ldexp(1.0, -best));
    EXPECT_EQ(got.zero_point, 0);
    // Uniform values up to 1.35: 1.35/127 -> -log2 = 6.555 -> p0 = 7, whose range 127/128 clips a
    // quarter of the values: the coarser p0 - 1 wins.
    if (data == 2) {
      EXPECT_EQ(best, p0 - 1);
    }
  }
  // A tie: {0.375, -0.125}: 0.375/127 -> -log2 = 8.40 -> p0 = 8; both 2^-7 (48, -16) and 2^-8
  // (96, -32) represent the values exactly, 2^-9 clips 192: the coarser 2^-7 wins the tie.
  WeightOptions o = weight_options_of(Tool::vai, ScaleKind::power_of_two);
  o.scale.symmetric = true;
  o.method = WeightMethod::pof2_min_mse;
  EXPECT_EQ(weight_params(floats({2}, {0.375f, -0.125f}), DataType::Int8, o)[0].scale, 1.0 / 128);
}

// numpy's percentile ("linear"), written out again for the brute force below.
double percentile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  double h = (static_cast<double>(v.size()) - 1) * q / 100;
  size_t i = static_cast<size_t>(h);
  double g = h - static_cast<double>(i);
  double a = v[i], b = v[std::min(i + 1, v.size() - 1)];
  return a + (b - a) * g;
}

// Quark's float-scale weight MinMSE, Percentile: the four percentile ranges, the least mean squared
// error after quantize-dequantize (symmetric int8 weights saturate to +-127). Brute force over the
// four.
TEST(QuantizeWeight, FloatMinMsePercentileIsTheBestOfTheFourRanges) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(20000);
  for (float& f : v) f = normal(rng);
  v[3] = 40.f;  // one outlier: the four ranges differ
  ir::Tensor w = floats({20000}, v);
  WeightOptions o = weight_options_of(Tool::quark);
  o.scale.symmetric = true;
  o.method = WeightMethod::float_min_mse;
  qmath::ScaleZeroPoint got = weight_params(w, DataType::Int8, o)[0];

  ScaleOptions so = o.scale;
  so.uint8_symmetric_zp_128 = false;
  double best_mse = INFINITY;
  qmath::ScaleZeroPoint best;
  for (double pct : {99.9, 99.99, 99.999, 99.9999}) {
    qmath::ScaleZeroPoint p =
        compute_scale_zp(percentile(v, (100 - pct) / 2), percentile(v, 100 - (100 - pct) / 2), DataType::Int8, so);
    double mse = 0;
    for (float f : v) {
      float q = std::clamp(std::nearbyint(f / static_cast<float>(p.scale)), -127.f, 127.f);
      double e = static_cast<double>(q * static_cast<float>(p.scale)) - f;
      mse += e * e;
    }
    if (mse < best_mse) best_mse = mse, best = p;
  }
  EXPECT_EQ(got.scale, best.scale);
  EXPECT_EQ(got.zero_point, 0);
}

// Quark's float-scale weight MinMSE, HistCenter and All on {0, 1, 2, 3}: 4 bins, edges 0, 0.75,
// 1.5, 2.25, 3, centres 0.375, 1.125, 1.875, 2.625; windows from bin 2: [c1, c3] and [c0, c3].
// uint8 ranges include 0, so both are [0, 2.625]: one candidate, scale 2.625/255 (3 saturates at
// 255).
TEST(QuantizeWeight, FloatMinMseHistogramWindows) {
  ir::Tensor w = floats({4}, {0, 1, 2, 3});
  for (FloatMinMseMode mode : {FloatMinMseMode::hist_center, FloatMinMseMode::all}) {
    WeightOptions o = weight_options_of(Tool::quark);
    o.method = WeightMethod::float_min_mse;
    o.min_mse_mode = mode;
    QuantizedTensor q = quantize_weight(w, DataType::UInt8, o);
    EXPECT_EQ(q.params[0].scale, f32(2.625 / 255));
    EXPECT_EQ(q.params[0].zero_point, 0);
    EXPECT_EQ(values_of<uint8_t>(q.data), (std::vector<uint8_t>{0, 97, 194, 255}));
  }
}

TEST(QuantizeWeight, EmptyChannelsAndErrors) {
  ir::Tensor empty = floats({0, 3}, {});
  WeightOptions o = weight_options_of(Tool::ort);
  EXPECT_EQ(weight_params(empty, DataType::Int8, o)[0].scale, 1.0);
  ir::Tensor nan = floats({2}, {1.f, NAN}, "fc.weight");
  expect_error([&] { weight_params(nan, DataType::Int8, o); }, "weight 'fc.weight' has a NaN at index 1");
  ir::Tensor inf = floats({2}, {1.f, INFINITY}, "fc.weight");
  expect_error([&] { weight_params(inf, DataType::Int8, o); }, "weight 'fc.weight': the range [0, inf] is infinite");
  o.axis = 3;
  expect_error(
      [&] {
        weight_params(floats({2}, {1, 2}, "fc.weight"), DataType::Int8, o);
      },
      "axis 3 is out of range for weight 'fc.weight' of rank 1");
  o.axis.reset();
  o.method = WeightMethod::pof2_min_mse;
  expect_error([&] { weight_params(floats({1}, {1}), DataType::Float16, o); }, "needs an integer type");
}

// ------------------------------------------------------------------------------------------------
// Bias

// A worked example of vai_q_onnx 1.16's int32 bias: s_in = 2^-5, s_w = 2^-8 -> s_b = 2^-13;
// b = 0.1 -> rne(819.2) = 819.
TEST(QuantizeBias, VaiAppendixAExample5) {
  ir::Tensor b = floats({1}, {0.1f});
  qmath::ScaleZeroPoint w = sz(1.0 / 256, 0);
  for (Tool tool : {Tool::ort, Tool::vai, Tool::quark}) {
    QuantizedBias q = quantize_bias(b, 1.0 / 32, {&w, 1}, bias_options_of(tool));
    EXPECT_EQ(values_of<int32_t>(q.data)[0], 819);
    EXPECT_EQ(q.scales, std::vector<double>{1.0 / 8192});
    EXPECT_FALSE(q.clipped);
  }
}

TEST(QuantizeBias, PerChannelBetaAndRounding) {
  // Per channel: s_in 0.5, s_w {0.01, 0.02} -> s_b float32 0.005, 0.01: 0.1 -> 20, -0.2 -> -20.
  ir::Tensor b = floats({2}, {0.1f, -0.2f});
  std::vector<qmath::ScaleZeroPoint> w = {sz(f32(0.01), 0), sz(f32(0.02), 0)};
  QuantizedBias q = quantize_bias(b, 0.5, w);
  EXPECT_EQ(values_of<int32_t>(q.data), (std::vector<int32_t>{20, -20}));
  EXPECT_EQ(q.scales, (std::vector<double>{f32(f32(0.5) * f32(0.01)), f32(f32(0.5) * f32(0.02))}));
  // Gemm beta 2 doubles the scale: 0.1 / 0.01 = 10.
  BiasOptions beta;
  beta.beta = 2;
  EXPECT_EQ(values_of<int32_t>(quantize_bias(b, 0.5, w, beta).data), (std::vector<int32_t>{10, -10}));
  // Half to even, in both division modes.
  ir::Tensor halves = floats({4}, {2.5f, 3.5f, -2.5f, -0.5f});
  qmath::ScaleZeroPoint one = sz(1, 0);
  for (bool in_double : {true, false}) {
    BiasOptions o;
    o.divide_in_double = in_double;
    EXPECT_EQ(values_of<int32_t>(quantize_bias(halves, 1, {&one, 1}, o).data), (std::vector<int32_t>{2, 4, -2, 0}));
  }
}

// ORT's bias quantization: b = 1000 with s_in = 1e-4, s_w = 1e-6 gives 1000 / 1e-10 = 1e13, beyond
// int32. ORT clips (and says so); vai's unclipped cast is refused. The guard raises s_w beforehand
// to s_w * s_min / (s_in s_w), s_min = 1.0001 * 2 * 1000 / (2^32 - 2), so q ends just inside int32.
TEST(QuantizeBias, Int32OverflowGuard) {
  ir::Tensor b = floats({1}, {1000.f}, "conv.bias");
  qmath::ScaleZeroPoint w = sz(f32(1e-6), 0);
  const double s_in = f32(1e-4);
  QuantizedBias clipped = quantize_bias(b, s_in, {&w, 1}, bias_options_of(Tool::ort));
  EXPECT_TRUE(clipped.clipped);
  EXPECT_EQ(values_of<int32_t>(clipped.data)[0], 2147483647);
  expect_error(
      [&] {
        quantize_bias(b, s_in, {&w, 1}, bias_options_of(Tool::vai));
      },
      "bias 'conv.bias' value 1000 at index 0 is ");

  WeightScaleAdjustment a = adjust_weight_scale_for_int32_bias(b, s_in, {&w, 1}, DataType::Int8);
  ASSERT_TRUE(a.adjusted);
  const double s_min = 1.0001 * 2 * 1000 / 4294967294.0;
  EXPECT_EQ(a.weight_scales[0], f32(w.scale * (s_min / (s_in * w.scale))));
  qmath::ScaleZeroPoint raised = sz(a.weight_scales[0], 0);
  QuantizedBias ok = quantize_bias(b, s_in, {&raised, 1}, bias_options_of(Tool::ort));
  EXPECT_FALSE(ok.clipped);
  int32_t q = values_of<int32_t>(ok.data)[0];
  EXPECT_GT(q, 2147483647 / 1.0002);  // the whole int32 range is used, less the epsilon
  EXPECT_LE(q, 2147483647);

  // Per channel: only the channel that would overflow is raised.
  // (0.1 / 1e-10 = 1e9 fits int32: channel 1 is left alone.)
  ir::Tensor b2 = floats({2}, {1000.f, 0.1f});
  std::vector<qmath::ScaleZeroPoint> w2 = {sz(f32(1e-6), 0), sz(f32(1e-6), 0)};
  a = adjust_weight_scale_for_int32_bias(b2, s_in, w2, DataType::Int16);
  ASSERT_TRUE(a.adjusted);
  EXPECT_GT(a.weight_scales[0], w2[0].scale);
  EXPECT_EQ(a.weight_scales[1], w2[1].scale);
  // Not for uint8 weights, nor weights with a nonzero zero point, nor scales already large enough.
  EXPECT_FALSE(adjust_weight_scale_for_int32_bias(b, s_in, {&w, 1}, DataType::UInt8).adjusted);
  qmath::ScaleZeroPoint asym = sz(f32(1e-6), 3);
  EXPECT_FALSE(adjust_weight_scale_for_int32_bias(b, s_in, {&asym, 1}, DataType::Int8).adjusted);
  qmath::ScaleZeroPoint big = sz(0.01, 0);
  EXPECT_FALSE(adjust_weight_scale_for_int32_bias(b, s_in, {&big, 1}, DataType::Int8).adjusted);
}

TEST(QuantizeBias, ErrorsNameWhatIsWrong) {
  ir::Tensor b = floats({1}, {1.f}, "gemm.bias");
  std::vector<qmath::ScaleZeroPoint> three = {sz(1, 0), sz(1, 0), sz(1, 0)};
  // A [1]-shaped bias with per-channel weights (ORT issue #24815 crashed here).
  expect_error([&] { quantize_bias(b, 1, three); },
               "bias 'gemm.bias' has 1 values but the weight has 3 channel scales");
  expect_error([&] { adjust_weight_scale_for_int32_bias(b, 1, three, DataType::Int8); }, "3 channel scales");
  qmath::ScaleZeroPoint one = sz(1, 0);
  expect_error([&] { quantize_bias(b, 0, {&one, 1}); }, "input scale 0 of bias 'gemm.bias'");
  BiasOptions zero_beta;
  zero_beta.beta = 0;
  expect_error([&] { quantize_bias(b, 1, {&one, 1}, zero_beta); }, "beta 0");
  expect_error([&] { quantize_bias(floats({1}, {NAN}, "gemm.bias"), 1, {&one, 1}); }, "has nan at index 0");
}

}  // namespace
}  // namespace onnxptq::quant
