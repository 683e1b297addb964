// Integer ranges, scales and zero points, and quantize / dequantize / fake quantize against the
// seeds' own numbers (ONNX Runtime's test_quant_util.py vectors, vai_q_onnx 1.16's rules) and
// values worked out by hand (reasoning in the comments). Weights and biases:
// tensor_quant_weight_test.cc.
#include "quant/tensor_quant.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <string>

#include "ir/float16.h"
#include "onnxptq/error.h"
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
// Ranges

struct RangeCase {
  DataType type;
  qmath::QRange full, symmetric, reduced;
};

// vai_q_onnx's / Quark's get_qmin_qmax_for_qType (the symmetric column of unsigned types is the
// full range).
TEST(QuantRange, VaiTableForEveryTypeAndFlag) {
  const RangeCase cases[] = {
      {DataType::UInt8, {0, 255}, {0, 255}, {0, 127}},
      {DataType::Int8, {-128, 127}, {-127, 127}, {-64, 64}},
      {DataType::UInt16, {0, 65535}, {0, 65535}, {0, 32767}},
      {DataType::Int16, {-32768, 32767}, {-32767, 32767}, {-16384, 16384}},
      {DataType::UInt32, {0, 4294967295LL}, {0, 4294967295LL}, {0, 2147483647}},
      {DataType::Int32, {-2147483648LL, 2147483647}, {-2147483647, 2147483647}, {-1073741824, 1073741824}},
  };
  for (const RangeCase& c : cases) {
    SCOPED_TRACE(ir::data_type_name(c.type));
    for (qmath::RangeTable table : {qmath::RangeTable::vai}) {
      qmath::QRange f = qmath::quant_range(c.type, false, false, table),
                    s = qmath::quant_range(c.type, true, false, table);
      qmath::QRange r = qmath::quant_range(c.type, false, true, table),
                    rs = qmath::quant_range(c.type, true, true, table);
      EXPECT_EQ(f.min, c.full.min);
      EXPECT_EQ(f.max, c.full.max);
      EXPECT_EQ(s.min, c.symmetric.min);
      EXPECT_EQ(s.max, c.symmetric.max);
      // reduce_range takes precedence over symmetric.
      EXPECT_EQ(r.min, c.reduced.min);
      EXPECT_EQ(r.max, c.reduced.max);
      EXPECT_EQ(rs.min, c.reduced.min);
      EXPECT_EQ(rs.max, c.reduced.max);
    }
  }
}

// ORT's get_qmin_qmax_for_qType (quant_utils.py): symmetric uint8 is [0, 254] and uint16
// [0, 65534]; no 32-bit types.
TEST(QuantRange, OrtTableForEveryTypeAndFlag) {
  const RangeCase cases[] = {
      {DataType::UInt8, {0, 255}, {0, 254}, {0, 127}},
      {DataType::Int8, {-128, 127}, {-127, 127}, {-64, 64}},
      {DataType::UInt16, {0, 65535}, {0, 65534}, {0, 32767}},
      {DataType::Int16, {-32768, 32767}, {-32767, 32767}, {-16384, 16384}},
  };
  for (const RangeCase& c : cases) {
    SCOPED_TRACE(ir::data_type_name(c.type));
    qmath::QRange f = qmath::quant_range(c.type, false, false, qmath::RangeTable::ort),
                  s = qmath::quant_range(c.type, true, false, qmath::RangeTable::ort);
    qmath::QRange rs = qmath::quant_range(c.type, true, true, qmath::RangeTable::ort);
    EXPECT_EQ(f.min, c.full.min);
    EXPECT_EQ(f.max, c.full.max);
    EXPECT_EQ(s.min, c.symmetric.min);
    EXPECT_EQ(s.max, c.symmetric.max);
    EXPECT_EQ(rs.min, c.reduced.min);
    EXPECT_EQ(rs.max, c.reduced.max);
  }
  expect_error([] { qmath::quant_range(DataType::Int32, false, false, qmath::RangeTable::ort); }, "no int32");
  expect_error([] { qmath::quant_range(DataType::UInt32, true, false, qmath::RangeTable::ort); }, "no uint32");
  expect_error([] { qmath::quant_range(DataType::Float, false, false, qmath::RangeTable::vai); }, "float");
}

// ------------------------------------------------------------------------------------------------
// Scale and zero point

// ORT's compute_scale_zp, the test vectors of test_quant_util.py: (rmin, rmax, qmin, qmax,
// symmetric, mrr) -> [zp, scale].
TEST(ComputeScaleZp, OrtTestVectors) {
  ScaleOptions ort = scale_options_of(Tool::ort);
  auto run = [&](double rmin, double rmax, qmath::QRange q, bool symmetric, double mrr = 0) {
    ScaleOptions o = ort;
    o.symmetric = symmetric;
    o.min_real_range = mrr;
    DataType type = q.min < 0 ? (q.max > 255 ? DataType::Int16 : DataType::Int8)
                              : (q.max > 255 ? DataType::UInt16 : DataType::UInt8);
    return compute_scale_zp(rmin, rmax, q, type, o);
  };
  auto expect = [](qmath::ScaleZeroPoint p, int64_t zp, double scale) {
    EXPECT_EQ(p.zero_point, zp);
    EXPECT_FLOAT_EQ(p.scale, scale);
  };
  expect(run(0, 0, {-127, 127}, true), 0, 1.0);
  expect(run(1, -1, {-127, 127}, true), 0, 1.0);  // [0, 0] once 0 is included: tiny -> (1, 0)
  expect(run(-1, 2, {-127, 127}, true), 0, 2.0 / 127);
  expect(run(-1, 2, {-127, 127}, false), -42, 3.0 / 254);
  expect(run(-1, 2, {0, 255}, true), 128, 4.0 / 255);  // midpoint rne(127.5) = 128
  expect(run(-1, 2, {0, 255}, false), 85, 3.0 / 255);
  expect(run(-FLT_MIN * 0.1, FLT_MIN * 0.1, {0, 255}, true), 0, 1.0);
  expect(run(0, 0, {0, 255}, false, 1e-4), 0, 1e-4 / 255);
  expect(run(0, 0, {-128, 127}, true, 1e-4), 0, 2e-4 / 255);  // rne(-0.5) = 0
  expect(run(0, 0, {0, 65535}, false, 1e-4), 0, 1e-4 / 65535);
  expect(run(0, 0, {-32768, 32767}, true, 1e-4), 0, 2e-4 / 65535);
}

// Worked examples of vai_q_onnx 1.16's rules (activations, power-of-two, nearest position).
TEST(ComputeScaleZp, VaiAppendixAActivations) {
  // 2. uint8 + ActivationSymmetric, [-1.2, 3.0]: m = 3, scale 6/255 -> -log2 = 5.409 -> pos 5;
  //    zp 128; representable [(0 - 128) / 32, (255 - 128) / 32] = [-4, 3.96875].
  ScaleOptions o = scale_options_of(Tool::vai, ScaleKind::power_of_two);
  o.symmetric = true;
  qmath::ScaleZeroPoint p = compute_scale_zp(-1.2, 3.0, DataType::UInt8, o);
  EXPECT_EQ(p.scale, 1.0 / 32);
  EXPECT_EQ(p.zero_point, 128);
  EXPECT_EQ((0 - p.zero_point) * p.scale, -4.0);
  EXPECT_EQ((255 - p.zero_point) * p.scale, 3.96875);
  // 3. int8 asymmetric [0, 6]: scale 6/255 -> pos 5 (-log2 = 5.087), zp rne(-128 - 0) = -128.
  o.symmetric = false;
  p = compute_scale_zp(0, 6, DataType::Int8, o);
  EXPECT_EQ(p.scale, 1.0 / 32);
  EXPECT_EQ(p.zero_point, -128);
  EXPECT_EQ((127 - p.zero_point) * p.scale, 7.96875);
  // 4. int8 asymmetric [0, 5]: 5/255 -> -log2 = 5.672 -> pos 6, s = 1/64, zp -128: the range
  //    ends at 255/64 = 3.98 < 5 (nearest rounding clips).
  p = compute_scale_zp(0, 5, DataType::Int8, o);
  EXPECT_EQ(p.scale, 1.0 / 64);
  EXPECT_EQ(p.zero_point, -128);
  // NonOverflow proper: pos 6 does not hold 5, pos 5 (255/32 = 7.97) does.
  o.pof2_position = Pof2Position::non_overflow;
  p = compute_scale_zp(0, 5, DataType::Int8, o);
  EXPECT_EQ(p.scale, 1.0 / 32);
  EXPECT_EQ(p.zero_point, -128);
}

// ORT's compute_scale_zp: symmetric zero points by the midpoint rule; vai/Quark by the formula (and
// 127 -> 128).
TEST(ComputeScaleZp, SymmetricZeroPoints) {
  ScaleOptions ort = scale_options_of(Tool::ort);
  ort.symmetric = true;
  EXPECT_EQ(compute_scale_zp(-1, 3, DataType::Int8, ort).zero_point, 0);
  EXPECT_EQ(compute_scale_zp(-1, 3, DataType::UInt8, ort).zero_point, 127);  // [0, 254]
  EXPECT_EQ(compute_scale_zp(-1, 3, DataType::Int16, ort).zero_point, 0);
  EXPECT_EQ(compute_scale_zp(-1, 3, DataType::UInt16, ort).zero_point, 32767);  // [0, 65534]
  EXPECT_FLOAT_EQ(compute_scale_zp(-1, 3, DataType::UInt8, ort).scale, 6.0 / 254);
  // The midpoint does not depend on the range: every channel gets the same zero point.
  for (double m : {0.001, 0.3, 1.7, 1000.0})
    EXPECT_EQ(compute_scale_zp(-m, m / 3, DataType::UInt8, ort).zero_point, 127);

  // vai/Quark: uint8 has no symmetric table; rne(0 - (-m) / (2m / 255)) = rne(127.5 +- rounding).
  ScaleOptions quark = scale_options_of(Tool::quark);
  quark.symmetric = true;
  ScaleOptions vai = scale_options_of(Tool::vai);
  vai.symmetric = true;
  for (double m : {0.001, 0.3, 1.7, 3.0, 1000.0}) {
    SCOPED_TRACE(m);
    EXPECT_EQ(compute_scale_zp(-m, m, DataType::UInt8, quark).zero_point, 128);
    double lo = -f32(m), scale = (2 * f32(m)) / 255;
    EXPECT_EQ(compute_scale_zp(-m, m, DataType::UInt8, vai).zero_point, std::nearbyint(0 - lo / scale));
    EXPECT_EQ(compute_scale_zp(-m, m, DataType::Int8, vai).zero_point, 0);
  }
}

// ORT on float16 models: ranges and scales in float16, tiny threshold 6.1e-5 (ORT's compute_scale_zp).
TEST(ComputeScaleZp, Float16ScaleType) {
  ScaleOptions o = scale_options_of(Tool::ort);
  o.scale_type = DataType::Float16;
  qmath::ScaleZeroPoint p = compute_scale_zp(-1, 2, DataType::UInt8, o);
  EXPECT_EQ(p.scale, ir::half_to_float(ir::float_to_half(3.0f / 255)));
  EXPECT_EQ(p.zero_point, 85);
  // 1e-3 / 255 = 3.9e-6: below float16's tiny, above float32's.
  p = compute_scale_zp(0, 1e-3, DataType::UInt8, o);
  EXPECT_EQ(p.scale, 1.0);
  EXPECT_EQ(p.zero_point, 0);
  o.scale_type = DataType::Float;
  EXPECT_FLOAT_EQ(compute_scale_zp(0, 1e-3, DataType::UInt8, o).scale, 1e-3 / 255);
}

// vai_q_onnx 1.16's Int16Scale: the M / 2^N nearest to the scale, smaller N winning ties.
TEST(Int16Scale, FindsTheNearestFraction) {
  // 0.1: N = 14 gives 1638/16384 (diff 2.4e-5); N = 15 gives 3277/32768 (diff 6.1e-6);
  // N = 16's best 6554/65536 is the same value, not strictly nearer: (3277, 15).
  Int16Scale f = int16_scale_find(0.1);
  EXPECT_EQ(f.m, 3277);
  EXPECT_EQ(f.n, 15);
  // 0.75 = 3/4 exactly at N = 2 (N = 0 and 1 miss by 0.25).
  f = int16_scale_find(0.75);
  EXPECT_EQ(f.m, 3);
  EXPECT_EQ(f.n, 2);
  f = int16_scale_find(0);
  EXPECT_EQ(f.m, 0);
  EXPECT_EQ(f.n, 0);
  // 1e5 * 2^N exceeds 32767 for every N: nothing found, (0, 0), so the scale becomes 2^-14;
  // 1e-9 rounds to M = 0 at every N: the same.
  EXPECT_EQ(int16_scale_value(1e5), std::ldexp(1.0, -14));
  EXPECT_EQ(int16_scale_value(1e-9), std::ldexp(1.0, -14));
  EXPECT_EQ(int16_scale_value(0.1), 3277.0 / 32768);

  // Through compute_scale_zp: uint8 [0, 25.5] has the float scale 25.5/255 = 0.1, zp 0.
  ScaleOptions o = scale_options_of(Tool::vai, ScaleKind::int16_scale);
  qmath::ScaleZeroPoint p = compute_scale_zp(0, 25.5, DataType::UInt8, o);
  EXPECT_EQ(p.scale, 3277.0 / 32768);
  EXPECT_EQ(p.zero_point, 0);
  // int16 symmetric [-2, 2]: 4/65534 = 6.1037e-5; 1/16384 = 6.1035e-5 is first reached at N = 14.
  o.symmetric = true;
  p = compute_scale_zp(-1, 2, DataType::Int16, o);
  EXPECT_EQ(p.scale, std::ldexp(1.0, -14));
  EXPECT_EQ(p.zero_point, 0);
}

// vai_q_onnx's compute_scale_zp_fp / Quark's BF16 and FP16: float16 and bfloat16 "scale and zero
// point".
TEST(ComputeScaleZp, FloatTargets) {
  ScaleOptions vai = scale_options_of(Tool::vai);
  vai.symmetric = true;
  qmath::ScaleZeroPoint p = compute_scale_zp(-1, 3, DataType::Float16, vai);
  EXPECT_EQ(p.scale, 1.0);
  EXPECT_EQ(p.float_zero_point, 0.0);
  // Asymmetric vai: zp = -(rmin + rmax) / 2 = -1.
  vai.symmetric = false;
  p = compute_scale_zp(-1, 3, DataType::BFloat16, vai);
  EXPECT_EQ(p.scale, 1.0);
  EXPECT_EQ(p.float_zero_point, -1.0);
  // Quark asymmetric, unscaled: rne(-65504 - (-1)) = -65503, which float16 holds as -65504
  // (spacing 32 there).
  ScaleOptions quark = scale_options_of(Tool::quark);
  p = compute_scale_zp(-1, 3, DataType::Float16, quark);
  EXPECT_EQ(p.scale, 1.0);
  EXPECT_EQ(p.float_zero_point, -65504.0);
  // Quark bfloat16 scaled and symmetric: [-3, 3] onto [-2, 2], scale 6/4.
  quark.symmetric = true;
  quark.float_scaled = true;
  p = compute_scale_zp(-3, 1, DataType::BFloat16, quark);
  EXPECT_EQ(p.scale, 1.5);
  EXPECT_EQ(p.float_zero_point, 0.0);
  EXPECT_EQ(float_quant_range(DataType::BFloat16, false).max, f32(3.38953139e38));
}

TEST(ComputeScaleZp, ErrorsNameWhatIsWrong) {
  ScaleOptions o;
  expect_error([&] { compute_scale_zp(-1, 1, DataType::Float, o); }, "no quantization to float");
  expect_error([&] { compute_scale_zp(-1, 1, DataType::Int64, o); }, "no quantization to int64");
  expect_error([&] { compute_scale_zp(NAN, 1, DataType::Int8, o); }, "NaN");
  expect_error([&] { compute_scale_zp(-1, INFINITY, DataType::UInt8, o); }, "infinite");
  expect_error([&] { compute_scale_zp(-3e38, 3e38, DataType::Int8, o); }, "too wide");
  // Quark clamps to +-FLT_MAX / 2: a finite scale.
  qmath::ScaleZeroPoint p = compute_scale_zp(-INFINITY, INFINITY, DataType::Int8, scale_options_of(Tool::quark));
  EXPECT_EQ(p.scale, f32(static_cast<double>(FLT_MAX) / 255));
}

// ------------------------------------------------------------------------------------------------
// Quantize / dequantize

TEST(QuantizeTensor, RoundsHalfToEven) {
  ir::Tensor x = floats({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, -3.51f});
  qmath::ScaleZeroPoint one = sz(1, 0);
  EXPECT_EQ(values_of<int8_t>(quantize_tensor(x, DataType::Int8, {&one, 1}, {})),
            (std::vector<int8_t>{0, 2, 2, 0, -2, -2, 3, -4}));
  qmath::ScaleZeroPoint shifted = sz(1, 10);
  EXPECT_EQ(values_of<uint8_t>(quantize_tensor(x, DataType::UInt8, {&shifted, 1}, {})),
            (std::vector<uint8_t>{10, 12, 12, 10, 8, 8, 13, 6}));
  EXPECT_EQ(values_of<int32_t>(quantize_tensor(x, DataType::Int32, {&one, 1}, {})),
            (std::vector<int32_t>{0, 2, 2, 0, -2, -2, 3, -4}));
}

TEST(QuantizeTensor, SaturatesToTheFullOrSymmetricRange) {
  qmath::ScaleZeroPoint one = sz(1, 0);
  QuantizeOptions full, sym;
  sym.saturation = Saturation::symmetric;
  ir::Tensor x = floats({5}, {200, -200, 127.5f, -128.5f, NAN});
  // NaN gives the lowest value (as ORT's QuantizeLinear).
  EXPECT_EQ(values_of<int8_t>(quantize_tensor(x, DataType::Int8, {&one, 1}, {}, full)),
            (std::vector<int8_t>{127, -128, 127, -128, -128}));
  EXPECT_EQ(values_of<int8_t>(quantize_tensor(x, DataType::Int8, {&one, 1}, {}, sym)),
            (std::vector<int8_t>{127, -127, 127, -127, -127}));
  EXPECT_EQ(values_of<uint8_t>(quantize_tensor(x, DataType::UInt8, {&one, 1}, {}, sym)),
            (std::vector<uint8_t>{200, 0, 128, 0, 0}));
  ir::Tensor y = floats({2}, {40000, -40000});
  EXPECT_EQ(values_of<int16_t>(quantize_tensor(y, DataType::Int16, {&one, 1}, {}, full)),
            (std::vector<int16_t>{32767, -32768}));
  EXPECT_EQ(values_of<int16_t>(quantize_tensor(y, DataType::Int16, {&one, 1}, {}, sym)),
            (std::vector<int16_t>{32767, -32767}));
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(y, DataType::UInt16, {&one, 1}, {}, sym)),
            (std::vector<uint16_t>{40000, 0}));
  ir::Tensor z = floats({2}, {3e9f, -3e9f});
  EXPECT_EQ(values_of<int32_t>(quantize_tensor(z, DataType::Int32, {&one, 1}, {}, full)),
            (std::vector<int32_t>{2147483647, -2147483647 - 1}));
  EXPECT_EQ(values_of<int32_t>(quantize_tensor(z, DataType::Int32, {&one, 1}, {}, sym)),
            (std::vector<int32_t>{2147483647, -2147483647}));
}

// uint32 zero points beyond int32 (3e9): q = x + 3e9, saturated to [0, 2^32 - 1]; and back.
TEST(QuantizeTensor, UInt32WithALargeZeroPoint) {
  qmath::ScaleZeroPoint p = sz(1, 3000000000LL);
  ir::Tensor x = floats({4}, {0, 1e9f, -4e9f, 2e9f});
  ir::Tensor q = quantize_tensor(x, DataType::UInt32, {&p, 1}, {});
  EXPECT_EQ(values_of<uint32_t>(q), (std::vector<uint32_t>{3000000000u, 4000000000u, 0u, 4294967295u}));
  EXPECT_EQ(values_of<float>(dequantize_tensor(q, {&p, 1}, {})), (std::vector<float>{0, 1e9f, -3e9f, 1294967295.f}));
}

TEST(DequantizeTensor, SubtractsTheZeroPointExactly) {
  qmath::ScaleZeroPoint p = sz(0.5, -1);
  ir::Tensor q = ir::Tensor::from_values<int8_t>({3}, std::vector<int8_t>{-128, 0, 127});
  EXPECT_EQ(values_of<float>(dequantize_tensor(q, {&p, 1}, {})), (std::vector<float>{-63.5f, 0.5f, 64.f}));
  qmath::ScaleZeroPoint p16 = sz(0.25, 32768);
  ir::Tensor q16 = ir::Tensor::from_values<uint16_t>({2}, std::vector<uint16_t>{0, 65535});
  EXPECT_EQ(values_of<float>(dequantize_tensor(q16, {&p16, 1}, {})), (std::vector<float>{-8192.f, 8191.75f}));
}

// Per channel: x [2, 3] = {{1, 2, 3}, {-4, 5, -6}}.
TEST(QuantizeTensor, PerChannelAlongAxis0And1) {
  ir::Tensor x = floats({2, 3}, {1, 2, 3, -4, 5, -6});
  // Axis 0, rows: (1, 0) -> 1, 2, 3; (2, 1) -> rne(-2) + 1, rne(2.5) + 1, rne(-3) + 1 = -1, 3, -2.
  std::vector<qmath::ScaleZeroPoint> rows = {sz(1, 0), sz(2, 1)};
  ir::Tensor q0 = quantize_tensor(x, DataType::Int8, rows, 0);
  EXPECT_EQ(values_of<int8_t>(q0), (std::vector<int8_t>{1, 2, 3, -1, 3, -2}));
  EXPECT_EQ(values_of<float>(dequantize_tensor(q0, rows, 0)), (std::vector<float>{1, 2, 3, -4, 4, -6}));
  // Axis 1 (and -1), columns: scales 1, 2, 4 -> {1, -4}, {rne(1), rne(2.5)} = {1, 2}, {rne(0.75), rne(-1.5)} = {1, -2}.
  std::vector<qmath::ScaleZeroPoint> cols = {sz(1, 0), sz(2, 0), sz(4, 0)};
  for (int64_t axis : {1, -1}) {
    ir::Tensor q1 = quantize_tensor(x, DataType::Int8, cols, axis);
    EXPECT_EQ(values_of<int8_t>(q1), (std::vector<int8_t>{1, 1, 1, -4, 2, -2}));
    EXPECT_EQ(values_of<float>(dequantize_tensor(q1, cols, axis)), (std::vector<float>{1, 2, 4, -4, 4, -8}));
  }
  // A middle axis of a rank-3 tensor: [2, 2, 2], axis 1 scales 1 and 10.
  ir::Tensor y = floats({2, 2, 2}, {1, 2, 30, 40, 5, 6, 70, 80});
  std::vector<qmath::ScaleZeroPoint> mid = {sz(1, 0), sz(10, 0)};
  EXPECT_EQ(values_of<int16_t>(quantize_tensor(y, DataType::Int16, mid, 1)),
            (std::vector<int16_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// fake_quantize = dequantize(quantize) for every type, per tensor and per channel, on data with
// awkward sizes (SIMD tails) and values beyond the range.
TEST(FakeQuantizeTensor, IsDequantizeOfQuantize) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 40.f);
  std::vector<float> v(3 * 37);
  for (float& f : v) f = normal(rng);
  v[5] = 1e6f;
  v[6] = -1e6f;
  ir::Tensor x = floats({3, 37}, v);
  for (DataType type : {DataType::Int8, DataType::UInt8, DataType::Int16, DataType::UInt16, DataType::Int32,
                        DataType::UInt32, DataType::Float16, DataType::BFloat16}) {
    SCOPED_TRACE(ir::data_type_name(type));
    bool is_unsigned = type == DataType::UInt8 || type == DataType::UInt16 || type == DataType::UInt32;
    std::vector<qmath::ScaleZeroPoint> per_channel = {sz(0.37, is_unsigned ? 7 : -3), sz(1.5, is_unsigned ? 100 : 0),
                                                      sz(0.02, is_unsigned ? 3 : 2)};
    if (quant_type_is_float(type))
      for (auto& p : per_channel) p.zero_point = 0, p.float_zero_point = 0.5;
    for (Saturation s : {Saturation::full, Saturation::symmetric}) {
      QuantizeOptions o;
      o.saturation = s;
      ir::Tensor fq = fake_quantize_tensor(x, type, per_channel, 0, o);
      ir::Tensor dq = dequantize_tensor(quantize_tensor(x, type, per_channel, 0, o), per_channel, 0, o);
      EXPECT_EQ(values_of<float>(fq), values_of<float>(dq));
      ir::Tensor fq1 = fake_quantize_tensor(x, type, {&per_channel[1], 1}, {}, o);
      ir::Tensor dq1 =
          dequantize_tensor(quantize_tensor(x, type, {&per_channel[1], 1}, {}, o), {&per_channel[1], 1}, {}, o);
      EXPECT_EQ(values_of<float>(fq1), values_of<float>(dq1));
    }
  }
}

// float16 / bfloat16 values: round to nearest even, overflow, and the three cast rules.
TEST(QuantizeTensor, Float16AndBFloat16) {
  const float pi = 3.14159265f;  // bits 0x40490FDB
  ir::Tensor x = floats({5}, {1.0f, pi, -2.5f, 65519.f, 65520.f});
  qmath::ScaleZeroPoint one = sz(1, 0);
  // bfloat16: the top 16 bits rounded to nearest even (0x0FDB < 0x8000: pi -> 0x4049 = 3.140625).
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(x, DataType::BFloat16, {&one, 1}, {})),
            (std::vector<uint16_t>{0x3F80, 0x4049, 0xC020, 0x4780, 0x4780}));
  // float16: pi -> 0x4248 (3.140625); 65519 rounds down to 65504, 65520 up to inf.
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(x, DataType::Float16, {&one, 1}, {})),
            (std::vector<uint16_t>{0x3C00, 0x4248, 0xC100, 0x7BFF, 0x7C00}));
  QuantizeOptions vitis;
  vitis.float_cast = FloatCast::vitis_op;  // clips to +-65504 first
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(x, DataType::Float16, {&one, 1}, {}, vitis))[4], 0x7BFF);

  // Scale 2 and zero point 0.5: quantizer float16 (3/2 + 0.5 = 2, back (2 - 0.5) * 2 = 3); Quark's
  // op ignores the zero point (3/2 = 1.5, back 1.5 * 2); the Vitis op ignores both.
  qmath::ScaleZeroPoint p{2.0, 0, 0.5};
  ir::Tensor three = floats({1}, {3.0f});
  QuantizeOptions quark;
  quark.float_cast = FloatCast::quark_op;
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(three, DataType::Float16, {&p, 1}, {}))[0], 0x4000);
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(three, DataType::Float16, {&p, 1}, {}, quark))[0], 0x3E00);
  EXPECT_EQ(values_of<uint16_t>(quantize_tensor(three, DataType::Float16, {&p, 1}, {}, vitis))[0], 0x4200);
  for (const QuantizeOptions& o : {QuantizeOptions{}, quark, vitis})
    EXPECT_EQ(values_of<float>(fake_quantize_tensor(three, DataType::Float16, {&p, 1}, {}, o))[0], 3.0f);
  // bfloat16 keeps the zero point in every rule: bf16(3/2 + 0.5) = 2 -> (2 - 0.5) * 2 = 3.
  for (const QuantizeOptions& o : {QuantizeOptions{}, quark, vitis}) {
    ir::Tensor q = quantize_tensor(three, DataType::BFloat16, {&p, 1}, {}, o);
    EXPECT_EQ(values_of<uint16_t>(q)[0], 0x4000);
    EXPECT_EQ(values_of<float>(dequantize_tensor(q, {&p, 1}, {}, o))[0], 3.0f);
  }
  // float16 input tensors are read as float32.
  std::vector<uint16_t> halves = {ir::float_to_half(1.5f), ir::float_to_half(-2.25f)};
  ir::Tensor h = ir::Tensor::from_values<uint16_t>({2}, halves);
  ir::Tensor hf(DataType::Float16, {2}, h.bytes());
  EXPECT_EQ(values_of<int8_t>(quantize_tensor(hf, DataType::Int8, {&one, 1}, {})), (std::vector<int8_t>{2, -2}));
}

TEST(QuantizeTensor, ErrorsNameWhatIsWrong) {
  ir::Tensor x = floats({2, 3}, {1, 2, 3, 4, 5, 6}, "conv.weight");
  qmath::ScaleZeroPoint one = sz(1, 0);
  std::vector<qmath::ScaleZeroPoint> two = {one, one};
  expect_error([&] { quantize_tensor(x, DataType::Int64, {&one, 1}, {}); }, "no quantization to int64");
  expect_error([&] { quantize_tensor(x, DataType::Int8, two, 2); },
               "axis 2 is out of range for tensor 'conv.weight' of rank 2");
  expect_error([&] { quantize_tensor(x, DataType::Int8, two, -3); }, "axis -3 is out of range");
  expect_error([&] { quantize_tensor(x, DataType::Int8, two, 1); },
               "2 scales for tensor 'conv.weight' of shape [2,3]: expected 3");
  expect_error([&] { quantize_tensor(x, DataType::Int8, two, {}); }, "expected 1 (per tensor)");
  qmath::ScaleZeroPoint zero_scale = sz(0, 0), bad_zp = sz(1, 300);
  expect_error([&] { quantize_tensor(x, DataType::Int8, {&zero_scale, 1}, {}); }, "must be positive and finite");
  expect_error(
      [&] {
        quantize_tensor(x, DataType::UInt8, {&bad_zp, 1}, {});
      },
      "zero point 300 of tensor 'conv.weight' is outside uint8 [0, 255]");
  ir::Tensor ints = ir::Tensor::from_values<int32_t>({1}, std::vector<int32_t>{1});
  expect_error([&] { quantize_tensor(ints, DataType::Int8, {&one, 1}, {}); }, "is int32: expected float");
  expect_error([&] { dequantize_tensor(x, {&one, 1}, {}); }, "no quantization to float");
}

}  // namespace
}  // namespace onnxptq::quant
