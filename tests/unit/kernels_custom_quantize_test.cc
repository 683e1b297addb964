// The custom Q/DQ ops of vai_q_onnx and Quark (src/engine/kernels/quantize_custom.cc):
// com.vai.quantize VitisQuantizeLinear / VitisDequantizeLinear, com.amd.quark
// ExtendedQuantizeLinear / ExtendedDequantizeLinear, ai.onnx.contrib FixNeuron, QuantizeLinear and
// DequantizeLinear. Every expected value is worked out by hand from the formulas of the ops
// (vai_q_onnx 1.16's custom ops and qdq_ops.py, Quark's com.amd.quark ops), with the reasoning
// beside it, or (for the larger tensors) computed here in double precision from the same formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "engine/session.h"
#include "ir/float16.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "support/kernel_run.h"
#include "support/one_node.h"

namespace onnxptq {
namespace {

using ir::Attribute;
using ir::DataType;
using ir::Tensor;
using kernel_test::kInf;
using kernel_test::kNaN;
using kernel_test::kQuark;
using kernel_test::make;
using kernel_test::scalar;
using kernel_test::scalar_of;
using kernel_test::values_of;

const std::string kVitis = "com.vai.quantize";
const std::string kContrib = "ai.onnx.contrib";

// A float16 or bfloat16 tensor from its bit patterns.
Tensor bits16(DataType type, std::vector<int64_t> dims, std::vector<uint16_t> bits) {
  Tensor t = Tensor::uninitialized(type, std::move(dims));
  auto v = t.mutable_values<uint16_t>();
  std::copy(bits.begin(), bits.end(), v.begin());
  return t;
}

using testing::error_of;
using In = testing::NodeInput;

// A model of one node of `domain` (imported at version 1, the default domain at 21) and its outputs.
std::vector<Tensor> run_custom_op(const std::string& op, const std::string& domain, const std::vector<In>& inputs,
                                  std::vector<Attribute> attributes = {}, int threads = 2) {
  return testing::run_node(op, domain, 21, inputs, std::move(attributes), 1, threads);
}

Tensor run_single(const std::string& op, const std::string& domain, const std::vector<In>& inputs,
                  std::vector<Attribute> attributes = {}) {
  auto out = run_custom_op(op, domain, inputs, std::move(attributes));
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

std::vector<Attribute> axis(int64_t a) {
  std::vector<Attribute> v;
  v.push_back(Attribute::of_int("axis", a));
  return v;
}
std::vector<Attribute> bit_width(const std::string& b) {
  std::vector<Attribute> v;
  v.push_back(Attribute::of_string("bit_width", b));
  v.push_back(Attribute::of_string("pos", "1"));  // written by the quantizer, not read
  return v;
}

// x rounded to bfloat16 (8 significant bits), ties to even, for finite x: add 0x7FFF plus the
// lowest kept bit to the float's bits and drop the low 16 bits.
float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Integer targets

TEST(VitisQuantizeLinear, Int8RoundsHalfToEvenAndSaturates) {
  // scale 0.5: x / 0.5 = [-3, -1, 1, 5, 2000, -2000, 2.5, 1.5, -2.5, -0.5]. Round half to even:
  // 2.5 -> 2, 1.5 -> 2, -2.5 -> -2, -0.5 -> -0; 2000 and -2000 saturate to 127 and -128.
  Tensor x = make<float>({10}, {-1.5f, -0.5f, 0.5f, 2.5f, 1000.0f, -1000.0f, 1.25f, 0.75f, -1.25f, -0.25f});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(0)}});
  ASSERT_EQ(y.dtype(), DataType::Int8);
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{-3, -1, 1, 5, 127, -128, 2, 2, -2, 0}));
  // The same plus zero point 3 (added after rounding, then clamped): -3+3, -1+3, 1+3, 5+3,
  // 2000+3 -> 127, -2000+3 -> -128, 2+3, 2+3, -2+3, 0+3.
  y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(3)}});
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{0, 2, 4, 8, 127, -128, 5, 5, 1, 3}));
}

TEST(VitisQuantizeLinear, SaturatesToTheFullRangeOfEveryIntegerType) {
  // scale 1, so q = clamp(round(x) + zp, lowest, max) of the type: the full range, not the
  // symmetric one (int8 reaches -128).
  auto q = [](const Tensor& x, const Tensor& zp) {
    return run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(1.0f)}, {"z", zp}});
  };
  EXPECT_EQ(values_of<uint8_t>(q(make<float>({3}, {-1, 256, 254.6f}), scalar_of<uint8_t>(0))),
            (std::vector<uint8_t>{0, 255, 255}));
  // zero point 250: 10 + 250 = 260 -> 255; -300 + 250 -> 0.
  EXPECT_EQ(values_of<uint8_t>(q(make<float>({2}, {10, -300}), scalar_of<uint8_t>(250))),
            (std::vector<uint8_t>{255, 0}));
  EXPECT_EQ(values_of<int8_t>(q(make<float>({2}, {-129, 128}), scalar_of<int8_t>(0))),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(values_of<uint16_t>(q(make<float>({3}, {-1, 65536, 65535}), scalar_of<uint16_t>(0))),
            (std::vector<uint16_t>{0, 65535, 65535}));
  // zero point -32760: -10 - 32760 = -32770 -> -32768.
  EXPECT_EQ(values_of<int16_t>(q(make<float>({3}, {-10, 70000, 5}), scalar_of<int16_t>(-32760))),
            (std::vector<int16_t>{-32768, 32767, -32755}));
  // 3e9 is a float (0xB2D05E00 has no bits below 2^8) beyond int32 but inside uint32; 5e9 and
  // float(4294967295) = 4294967296 saturate to 2^32 - 1.
  EXPECT_EQ(values_of<uint32_t>(q(make<float>({4}, {-1, 3e9f, 5e9f, 4294967295.0f}), scalar_of<uint32_t>(0))),
            (std::vector<uint32_t>{0, 3000000000u, 4294967295u, 4294967295u}));
  // A uint32 zero point above 2^31: 1.5 -> 2 (even), + 4000000000.
  EXPECT_EQ(values_of<uint32_t>(q(make<float>({2}, {1.5f, 1e10f}), scalar_of<uint32_t>(4000000000u))),
            (std::vector<uint32_t>{4000000002u, 4294967295u}));
  // 2147483520 = 2^31 - 128 is a float and fits int32; +-3e9 saturate.
  EXPECT_EQ(
      values_of<int32_t>(q(make<float>({3}, {-3e9f, 3e9f, 2147483520.0f}), scalar_of<int32_t>(0))),
      (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 2147483520}));
}

TEST(VitisQuantizeLinear, NaNGivesTheLowestValueAndInfinitiesSaturate) {
  Tensor x = make<float>({3}, {kNaN, kInf, -kInf});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(1.0f)}, {"z", scalar_of<uint8_t>(7)}});
  EXPECT_EQ(values_of<uint8_t>(y), (std::vector<uint8_t>{0, 255, 0}));
}

TEST(VitisQuantizeLinear, Float16InputIsComputedInFloat32) {
  // float16 1.5 (0x3E00), -2.5 (0xC100), 100 (0x5640) with scale 1: 2, -2 (ties to even), 100.
  Tensor x = bits16(DataType::Float16, {3}, {0x3E00, 0xC100, 0x5640});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(1.0f)}, {"z", scalar_of<int8_t>(0)}});
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{2, -2, 100}));
}

TEST(VitisDequantizeLinear, IntegerTypes) {
  // (q - zp) * scale with zp -128, scale 0.25: 0 * 0.25, 255 * 0.25, 128 * 0.25.
  Tensor y =
      run_single("VitisDequantizeLinear", kVitis,
                 {{"q", make<int8_t>({3}, {-128, 127, 0})}, {"s", scalar(0.25f)}, {"z", scalar_of<int8_t>(-128)}});
  ASSERT_EQ(y.dtype(), DataType::Float);
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{0.0f, 63.75f, 32.0f}));
  // uint32 with a zero point above 2^31: (4000000002 - 4000000000) * 0.5 = 1, (0 - 4e9) * 0.5.
  y = run_single(
      "VitisDequantizeLinear", kVitis,
      {{"q", make<uint32_t>({2}, {4000000002u, 0})}, {"s", scalar(0.5f)}, {"z", scalar_of<uint32_t>(4000000000u)}});
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{1.0f, -2e9f}));
  // int32: (INT32_MIN - 1) leaves int32 but not int64: -2147483649 rounds to float -2^31.
  y = run_single("VitisDequantizeLinear", kVitis,
                 {{"q", make<int32_t>({2}, {std::numeric_limits<int32_t>::min(), 7})},
                  {"s", scalar(1.0f)},
                  {"z", scalar_of<int32_t>(1)}});
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{-2147483648.0f, 6.0f}));
  // uint16: (65535 - 1) * 2, (0 - 1) * 2.
  y = run_single("VitisDequantizeLinear", kVitis,
                 {{"q", make<uint16_t>({2}, {65535, 0})}, {"s", scalar(2.0f)}, {"z", scalar_of<uint16_t>(1)}});
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{131068.0f, -2.0f}));
}

TEST(ExtendedQuantizeLinear, IntegerMathIsTheSameAsVitis) {
  // x / 0.1f in float32 (a division, not x * 10): 24.55f / 0.1f = 245.499985 -> 245;
  // 0.25f / 0.1f = 2.4999999627 rounds to the float 2.5 -> 2 (even); -1 / 0.1f = -9.9999998510
  // rounds to the float -10. Each + zp 5.
  Tensor x = make<float>({3}, {24.55f, 0.25f, -1.0f});
  Tensor y =
      run_single("ExtendedQuantizeLinear", kQuark, {{"x", x}, {"s", scalar(0.1f)}, {"z", scalar_of<int16_t>(5)}});
  ASSERT_EQ(y.dtype(), DataType::Int16);
  EXPECT_EQ(values_of<int16_t>(y), (std::vector<int16_t>{250, 7, -5}));
  Tensor d =
      run_single("ExtendedDequantizeLinear", kQuark, {{"q", y}, {"s", scalar(0.5f)}, {"z", scalar_of<int16_t>(5)}});
  EXPECT_EQ(values_of<float>(d), (std::vector<float>{122.5f, 1.0f, -5.0f}));
}

// ---------------------------------------------------------------------------------------------
// bfloat16 and float16 targets

TEST(VitisQuantizeLinear, BFloat16RoundsHalfwayToEven) {
  // bf16 keeps 7 fraction bits: the neighbours of 1 are 1 (0x3F80), 1 + 2^-7 (0x3F81),
  // 1 + 2^-6 (0x3F82). q = bf16(x / 2 + 1) with zp bf16 1.0 (0x3F80):
  //   x = 2^-7      -> 1 + 2^-8,           halfway 0x3F80 / 0x3F81 -> even 0x3F80
  //   x = 3 * 2^-7  -> 1 + 3 * 2^-8,       halfway 0x3F81 / 0x3F82 -> even 0x3F82
  //   x = 2^-7 + 2^-19 -> 1 + 2^-8 + 2^-20, above halfway            -> 0x3F81
  //   x = -4        -> -1                                            -> 0xBF80
  //   x = 2^-6      -> 1 + 2^-7, exact                               -> 0x3F81
  Tensor x = make<float>({5}, {0x1p-7f, 3 * 0x1p-7f, 0x1p-7f + 0x1p-19f, -4.0f, 0x1p-6f});
  Tensor zp = bits16(DataType::BFloat16, {}, {0x3F80});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(2.0f)}, {"z", zp}});
  ASSERT_EQ(y.dtype(), DataType::BFloat16);
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x3F80, 0x3F82, 0x3F81, 0xBF80, 0x3F81}));
  // Dequantize: (float(q) - 1) * 2 = 0, 2^-6 * 2 = 0.03125, 2^-7 * 2, -2 * 2, 2^-7 * 2.
  Tensor d = run_single("VitisDequantizeLinear", kVitis, {{"q", y}, {"s", scalar(2.0f)}, {"z", zp}});
  EXPECT_EQ(values_of<float>(d), (std::vector<float>{0.0f, 0.03125f, 0.015625f, -4.0f, 0.015625f}));
}

TEST(ExtendedQuantizeLinear, BFloat16IsTheSameAsVitis) {
  // Zero point bf16 0 (0x0000), scale 1: 1 + 2^-8 -> 0x3F80, 1 + 3 * 2^-8 -> 0x3F82.
  Tensor x = make<float>({2}, {1 + 0x1p-8f, 1 + 3 * 0x1p-8f});
  Tensor zp = bits16(DataType::BFloat16, {}, {0x0000});
  Tensor y = run_single("ExtendedQuantizeLinear", kQuark, {{"x", x}, {"s", scalar(1.0f)}, {"z", zp}});
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x3F80, 0x3F82}));
  // NaN stays a (quiet) NaN: exponent all ones, fraction not zero.
  y = run_single("ExtendedQuantizeLinear", kQuark, {{"x", make<float>({1}, {kNaN})}, {"s", scalar(1.0f)}, {"z", zp}});
  uint16_t b = values_of<uint16_t>(y)[0];
  EXPECT_EQ(b & 0x7F80, 0x7F80);
  EXPECT_NE(b & 0x007F, 0);
}

TEST(VitisQuantizeLinear, Float16ClipsTo65504AndIgnoresScaleAndZeroPoint) {
  // half(clip(x, -65504, 65504)); scale 4 and zero point 2.0 (0x4000) must change nothing.
  //   70000, 65505, +inf -> 65504 = 0x7BFF; -70000, -inf -> 0xFBFF (a plain Cast would give inf)
  //   1 -> 0x3C00; 0.1 = 1.6 * 2^-4: fraction 0.6 * 1024 = 614.4 -> 614 = 0x266, exponent 11 -> 0x2E66
  //   2049 (spacing 2 above 2048): halfway 2048 (0x6800) / 2050 (0x6801) -> even 0x6800
  //   2051: halfway 2050 (0x6801) / 2052 (0x6802) -> even 0x6802
  Tensor x = make<float>({9}, {70000, 65505, kInf, -70000, -kInf, 1, 0.1f, 2049, 2051});
  Tensor zp = bits16(DataType::Float16, {}, {0x4000});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(4.0f)}, {"z", zp}});
  ASSERT_EQ(y.dtype(), DataType::Float16);
  EXPECT_EQ(values_of<uint16_t>(y),
            (std::vector<uint16_t>{0x7BFF, 0x7BFF, 0x7BFF, 0xFBFF, 0xFBFF, 0x3C00, 0x2E66, 0x6800, 0x6802}));
  // Dequantize: float(q), the scale 4 ignored.
  Tensor d =
      run_single("VitisDequantizeLinear", kVitis,
                 {{"q", bits16(DataType::Float16, {3}, {0x7BFF, 0x4000, 0xBC00})}, {"s", scalar(4.0f)}, {"z", zp}});
  EXPECT_EQ(values_of<float>(d), (std::vector<float>{65504.0f, 2.0f, -1.0f}));
}

TEST(ExtendedQuantizeLinear, Float16DividesByTheScaleWithoutClipping) {
  // half(x / 4), zero point 5.0 (0x4500) ignored: 8 / 4 = 2 -> 0x4000; 280000 / 4 = 70000 ->
  // overflows to inf (0x7C00, no clip, unlike Vitis); 0.4f / 4 is float(0.1) -> 0x2E66.
  Tensor zp = bits16(DataType::Float16, {}, {0x4500});
  Tensor y = run_single("ExtendedQuantizeLinear", kQuark,
                        {{"x", make<float>({3}, {8.0f, 280000.0f, 0.4f})}, {"s", scalar(4.0f)}, {"z", zp}});
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x4000, 0x7C00, 0x2E66}));
  // Dequantize float(q) * 4: 8, inf, 0.0999755859375 * 4 = 0.39990234375.
  Tensor d = run_single("ExtendedDequantizeLinear", kQuark, {{"q", y}, {"s", scalar(4.0f)}, {"z", zp}});
  EXPECT_EQ(values_of<float>(d), (std::vector<float>{8.0f, kInf, 0.39990234375f}));
}

TEST(ExtendedDequantizeLinear, Float16ScaleGivesAFloat16Output) {
  // Scale float16 0.5 (0x3800): (4 - 1) * 0.5 = 1.5 (0x3E00), (0 - 1) * 0.5 = -0.5 (0xB800).
  Tensor y = run_single("ExtendedDequantizeLinear", kQuark,
                        {{"q", make<uint8_t>({2}, {4, 0})},
                         {"s", bits16(DataType::Float16, {}, {0x3800})},
                         {"z", scalar_of<uint8_t>(1)}});
  ASSERT_EQ(y.dtype(), DataType::Float16);
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x3E00, 0xB800}));
}

// ---------------------------------------------------------------------------------------------
// Per tensor and per axis

TEST(VitisQuantizeLinear, PerAxisAlongAxis0) {
  // x [[1, 2, 3], [4, 5, 6]], scale [0.5, 2], zp [0, 10] along axis 0:
  //   row 0: 2, 4, 6;  row 1: 2, 2.5 -> 2, 3, each + 10 -> 12, 12, 13.
  Tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = make<float>({2}, {0.5f, 2.0f});
  Tensor z = make<int8_t>({2}, {0, 10});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", s}, {"z", z}}, axis(0));
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{2, 4, 6, 12, 12, 13}));
  // Back: row 0 (q - 0) * 0.5 = 1, 2, 3; row 1 (q - 10) * 2 = 4, 4, 6.
  Tensor d = run_single("VitisDequantizeLinear", kVitis, {{"q", y}, {"s", s}, {"z", z}}, axis(0));
  EXPECT_EQ(values_of<float>(d), (std::vector<float>{1, 2, 3, 4, 4, 6}));
}

TEST(VitisQuantizeLinear, PerAxisAlongAxis1ByDefault) {
  // x [[1, 2, 3], [4, 5, 6]], scale [1, 0.5, 4], zp [0, 1, 2] along axis 1 (the default):
  //   column 0: 1, 4;  column 1: 2 / 0.5 + 1 = 5, 5 / 0.5 + 1 = 11;
  //   column 2: 3 / 4 = 0.75 -> 1, + 2 = 3;  6 / 4 = 1.5 -> 2, + 2 = 4.
  Tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = make<float>({3}, {1.0f, 0.5f, 4.0f});
  Tensor z = make<uint8_t>({3}, {0, 1, 2});
  Tensor y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", s}, {"z", z}});
  EXPECT_EQ(values_of<uint8_t>(y), (std::vector<uint8_t>{1, 5, 3, 4, 11, 4}));
  // Rank 3, axis 1 (inner size 2), Quark, int16: x = 0..7 as [2, 2, 2], scale [1, 2]:
  //   index (o, a, i): a = 0 holds 0, 1, 4, 5 (divided by 1); a = 1 holds 2, 3, 6, 7 (by 2):
  //   2 / 2 = 1, 3 / 2 = 1.5 -> 2, 6 / 2 = 3, 7 / 2 = 3.5 -> 4.
  y = run_single("ExtendedQuantizeLinear", kQuark,
                 {{"x", make<float>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})},
                  {"s", make<float>({2}, {1.0f, 2.0f})},
                  {"z", make<int16_t>({2}, {0, 0})}},
                 axis(1));
  EXPECT_EQ(values_of<int16_t>(y), (std::vector<int16_t>{0, 1, 1, 2, 4, 5, 3, 4}));
  // Negative axis: -1 of [2, 3] is axis 1, the same as above.
  y = run_single("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", s}, {"z", z}}, axis(-1));
  EXPECT_EQ(values_of<uint8_t>(y), (std::vector<uint8_t>{1, 5, 3, 4, 11, 4}));
}

TEST(VitisQuantizeLinear, OneElementScaleIsPerTensorWhateverTheAxis) {
  // scale [0.5] and zp [1] (1-D, one element) with axis 0 on a [2, 3] input: per tensor.
  Tensor x = make<float>({2, 3}, {1, 2, 3, -1, -2, -3});
  Tensor y = run_single("VitisQuantizeLinear", kVitis,
                        {{"x", x}, {"s", make<float>({1}, {0.5f})}, {"z", make<int8_t>({1}, {1})}}, axis(0));
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{3, 5, 7, -1, -3, -5}));
}

TEST(ExtendedQuantizeLinear, PerAxisFloat16AndBFloat16) {
  // float16 along axis 0: row 0 / 2, row 1 / 0.5: 1 (0x3C00), -3 (0xC200); 8 (0x4800), 0.5 (0x3800).
  Tensor x = make<float>({2, 2}, {2, -6, 4, 0.25f});
  Tensor s = make<float>({2}, {2.0f, 0.5f});
  Tensor y = run_single("ExtendedQuantizeLinear", kQuark,
                        {{"x", x}, {"s", s}, {"z", bits16(DataType::Float16, {2}, {0, 0})}}, axis(0));
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x3C00, 0xC200, 0x4800, 0x3800}));
  // bfloat16 along axis 0, zp [1, -1] (0x3F80, 0xBF80): 2 / 2 + 1 = 2 (0x4000), -6 / 2 + 1 = -2
  // (0xC000); 4 / 0.5 - 1 = 7 (0x40E0), 0.25 / 0.5 - 1 = -0.5 (0xBF00).
  Tensor zp = bits16(DataType::BFloat16, {2}, {0x3F80, 0xBF80});
  y = run_single("ExtendedQuantizeLinear", kQuark, {{"x", x}, {"s", s}, {"z", zp}}, axis(0));
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x4000, 0xC000, 0x40E0, 0xBF00}));
  Tensor d = run_single("ExtendedDequantizeLinear", kQuark, {{"q", y}, {"s", s}, {"z", zp}}, axis(0));
  EXPECT_EQ(values_of<float>(d), (std::vector<float>{2, -6, 4, 0.25f}));
}

TEST(VitisQuantizeLinear, PerAxisOverThreadsMatchesTheFormula) {
  // [3, 40001] along axis 0 is 120003 elements: the two threads' chunks split a row, so runs of
  // one scale cross chunk boundaries. Expected: the formula in double, per element.
  const int64_t rows = 3, cols = 40001;
  std::vector<float> xs(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) xs[i] = static_cast<float>((i * 7919) % 20001 - 10000) * 0.013f;
  std::vector<float> scales{0.05f, 0.5f, 1.25f};
  std::vector<int16_t> zps{-3, 0, 100};
  Tensor y = run_single(
      "VitisQuantizeLinear", kVitis,
      {{"x", make<float>({rows, cols}, xs)}, {"s", make<float>({3}, scales)}, {"z", make<int16_t>({3}, zps)}}, axis(0));
  auto got = values_of<int16_t>(y);
  for (int64_t i = 0; i < rows * cols; ++i) {
    int64_t r = i / cols;
    double q = std::nearbyint(static_cast<double>(xs[i] / scales[r])) + zps[r];
    ASSERT_EQ(got[i], static_cast<int16_t>(std::min(32767.0, std::max(-32768.0, q)))) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// ai.onnx.contrib

TEST(FixNeuron, BitWidth8) {
  // scale 0.5, zp 0: x / 0.5 = -3, 0.6 -> 1, 200 -> 127, -200 -> -128, 1.5 -> 2 (even), 2.5 -> 2;
  // y = q * 0.5. NaN stays NaN (NumPy's round and clip keep it).
  Tensor x = make<float>({7}, {-1.5f, 0.3f, 100.0f, -100.0f, 0.75f, 1.25f, kNaN});
  Tensor y =
      run_single("FixNeuron", kContrib, {{"x", x}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(0)}}, bit_width("8"));
  ASSERT_EQ(y.dtype(), DataType::Float);
  auto v = values_of<float>(y);
  EXPECT_EQ(std::vector<float>(v.begin(), v.end() - 1), (std::vector<float>{-1.5f, 0.5f, 63.5f, -64.0f, 1.0f, 1.0f}));
  EXPECT_TRUE(std::isnan(v.back()));
}

TEST(FixNeuron, BitWidth4WithZeroPoint) {
  // Range [-8, 7], zp 1: q = clip(round(x / 0.5) + 1): -3 + 1 = -2, 1 + 1 = 2, 200 + 1 -> 7,
  // -200 + 1 -> -8, 2 + 1 = 3. y = (q - 1) * 0.5 = -1.5, 0.5, 3, -4.5, 1.
  Tensor x = make<float>({5}, {-1.5f, 0.3f, 100.0f, -100.0f, 0.75f});
  Tensor y =
      run_single("FixNeuron", kContrib, {{"x", x}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(1)}}, bit_width("4"));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{-1.5f, 0.5f, 3.0f, -4.5f, 1.0f}));
}

TEST(FixNeuron, BitWidth16AndFloat16InOut) {
  // 16 bits: range [-32768, 32767]; x / 0.25 = 40000 -> 32767 -> 8191.75; -2.5 -> -2 -> -0.5.
  Tensor y =
      run_single("FixNeuron", kContrib,
                 {{"x", make<float>({2}, {10000.0f, -0.625f})}, {"s", scalar(0.25f)}, {"z", scalar_of<int8_t>(0)}},
                 bit_width("16"));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{8191.75f, -0.5f}));
  // float16 in, float16 out: 1.5 (0x3E00) / 1 -> 2 (0x4000); 300 (0x5CB0) -> 127 (0x57F0).
  y = run_single(
      "FixNeuron", kContrib,
      {{"x", bits16(DataType::Float16, {2}, {0x3E00, 0x5CB0})}, {"s", scalar(1.0f)}, {"z", scalar_of<int8_t>(0)}},
      bit_width("8"));
  ASSERT_EQ(y.dtype(), DataType::Float16);
  EXPECT_EQ(values_of<uint16_t>(y), (std::vector<uint16_t>{0x4000, 0x57F0}));
}

TEST(ContribQuantizeLinear, BitWidthRange) {
  // scale 0.5: -20 -> -8, 20 -> 7 at 4 bits; 2.5 -> 2. At 8 bits (also the default): -20, 20, 2.
  Tensor x = make<float>({3}, {-10.0f, 10.0f, 1.25f});
  Tensor y = run_single("QuantizeLinear", kContrib, {{"x", x}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(0)}},
                        bit_width("4"));
  ASSERT_EQ(y.dtype(), DataType::Int8);
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{-8, 7, 2}));
  y = run_single("QuantizeLinear", kContrib, {{"x", x}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(0)}});
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{-20, 20, 2}));
  // -128 is in the 8-bit range (vai_q_onnx's Python quantize_nparray would stop at -127).
  y = run_single("QuantizeLinear", kContrib,
                 {{"x", make<float>({1}, {-1000.0f})}, {"s", scalar(1.0f)}, {"z", scalar_of<int8_t>(0)}},
                 bit_width("8"));
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{-128}));
}

TEST(ContribDequantizeLinear, ClipsToTheBitWidthFirst) {
  // 4 bits, zp 1, scale 0.5: clip(-128) = -8 -> (-8 - 1) * 0.5 = -4.5; clip(127) = 7 -> 3; 3 -> 1.
  Tensor y = run_single("DequantizeLinear", kContrib,
                        {{"q", make<int8_t>({3}, {-128, 127, 3})}, {"s", scalar(0.5f)}, {"z", scalar_of<int8_t>(1)}},
                        bit_width("4"));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{-4.5f, 3.0f, 1.0f}));
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(CustomQuantizeErrors, OneLineNamingWhatIsWrong) {
  Tensor x = make<float>({2}, {1.0f, 2.0f});
  auto expect_error = [](const std::function<void()>& fn, const std::string& part) {
    std::string e = error_of(fn);
    EXPECT_NE(e.find(part), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  // A zero point of a type none of the ops quantizes to.
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(1)}, {"z", scalar_of<int64_t>(0)}});
      },
      "y_zero_point has type int64, expected uint8, int8, uint16, int16, uint32, int32, float16 or bfloat16");
  expect_error(
      [&] {
        run_custom_op("ExtendedQuantizeLinear", kQuark, {{"x", x}, {"s", scalar(1)}, {"z", scalar(0)}});
      },
      "y_zero_point has type float, expected");
  // A scale that is not float.
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis,
                      {{"x", x}, {"s", scalar_of<int8_t>(1)}, {"z", scalar_of<int8_t>(0)}});
      },
      "y_scale has type int8, expected float or float16");
  expect_error(
      [&] {
        run_custom_op("VitisDequantizeLinear", kVitis,
                      {{"q", make<int8_t>({1}, {1})}, {"s", scalar_of<int32_t>(1)}, {"z", scalar_of<int8_t>(0)}});
      },
      "x_scale has type int32, expected float or float16");
  // The zero point is not optional, and names the node in front.
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(1)}});
      },
      "input 2 (y_zero_point) is missing");
  expect_error([&] { run_custom_op("VitisQuantizeLinear", kVitis, {{"x", x}, {"s", scalar(1)}}); }, "node 'n0'");
  expect_error(
      [&] {
        run_custom_op("FixNeuron", kContrib, {{"x", x}, {"s", scalar(1)}});
      },
      "input 2 (zero_point) is missing");
  // Dequantize: the zero point's type must be the input's.
  expect_error(
      [&] {
        run_custom_op("VitisDequantizeLinear", kVitis,
                      {{"q", make<int8_t>({1}, {1})}, {"s", scalar(1)}, {"z", scalar_of<uint8_t>(0)}});
      },
      "x_zero_point has type uint8, the input x int8");
  // x not float.
  expect_error(
      [&] {
        run_custom_op("ExtendedQuantizeLinear", kQuark,
                      {{"x", make<int32_t>({1}, {1})}, {"s", scalar(1)}, {"z", scalar_of<int8_t>(0)}});
      },
      "the input x has type int32, expected float or float16");
  // Per-axis shapes.
  Tensor x23 = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis,
                      {{"x", x23}, {"s", make<float>({2}, {1, 1})}, {"z", make<int8_t>({2}, {0, 0})}});  // axis 1 has 3
      },
      "y_scale has 2 values, the input [2,3] has 3 along axis 1");
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis,
                      {{"x", x23},
                       {"s", make<float>({2, 3}, {1, 1, 1, 1, 1, 1})},
                       {"z", make<int8_t>({2, 3}, {0, 0, 0, 0, 0, 0})}});
      },
      "y_scale of shape [2,3] is neither one value nor 1-D");
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis,
                      {{"x", x23}, {"s", make<float>({3}, {1, 1, 1})}, {"z", scalar_of<int8_t>(0)}});
      },
      "y_zero_point has shape [], y_scale [3]: they must match");
  expect_error(
      [&] {
        run_custom_op("VitisQuantizeLinear", kVitis,
                      {{"x", x23}, {"s", make<float>({3}, {1, 1, 1})}, {"z", make<int8_t>({3}, {0, 0, 0})}}, axis(2));
      },
      "axis 2 is out of range for rank 2");
  // contrib: int8 zero point, one scale, a bit_width that is an integer in range.
  expect_error(
      [&] {
        run_custom_op("FixNeuron", kContrib, {{"x", x}, {"s", scalar(1)}, {"z", scalar_of<uint8_t>(0)}});
      },
      "the zero point has type uint8, expected int8");
  expect_error(
      [&] {
        run_custom_op("FixNeuron", kContrib, {{"x", x}, {"s", scalar_of<int8_t>(1)}, {"z", scalar_of<int8_t>(0)}});
      },
      "the scale has type int8, expected float or float16");
  expect_error(
      [&] {
        run_custom_op("QuantizeLinear", kContrib,
                      {{"x", x}, {"s", make<float>({2}, {1, 2})}, {"z", scalar_of<int8_t>(0)}});
      },
      "the scale must be a scalar or a 1-element tensor, got shape [2]");
  expect_error(
      [&] {
        run_custom_op("FixNeuron", kContrib, {{"x", x}, {"s", scalar(1)}, {"z", scalar_of<int8_t>(0)}},
                      bit_width("eight"));
      },
      "bit_width 'eight' is not an integer");
  expect_error(
      [&] {
        run_custom_op("QuantizeLinear", kContrib, {{"x", x}, {"s", scalar(1)}, {"z", scalar_of<int8_t>(0)}},
                      bit_width("9"));
      },
      "bit_width 9 is outside [1, 8]");
  expect_error(
      [&] {
        run_custom_op("DequantizeLinear", kContrib,
                      {{"q", make<int16_t>({1}, {1})}, {"s", scalar(1)}, {"z", scalar_of<int8_t>(0)}});
      },
      "the input x has type int16, expected int8");
}

// ---------------------------------------------------------------------------------------------
// A round trip through a model

TEST(CustomQuantizeModel, QuantizeThenDequantizeRoundTrips) {
  // x -> VitisQuantizeLinear -> VitisDequantizeLinear -> a, x -> ExtendedQuantizeLinear (bf16)
  // -> ExtendedDequantizeLinear -> b, x -> FixNeuron -> c, with scales and zero points as
  // initializers. Expected, from the formulas: uint8 scale 0.05 zp 128:
  // (clamp(round(x / 0.05) + 128, 0, 255) - 128) * 0.05; bf16 with scale 1 and zp 0 is x rounded
  // to 8 significant bits, ties to even (bf16_round below, on the bits); FixNeuron 8 bits,
  // scale 0.0625, zp 0: clamp(round(x / 0.0625), -128, 127) * 0.0625.
  ir::Model model;
  model.ir_version = 10;
  model.set_opset("", 21);
  model.set_opset(kVitis, 1);
  model.set_opset(kQuark, 1);
  model.set_opset(kContrib, 1);
  ir::Graph& g = *model.graph;
  const int64_t n = 4099;  // odd, past 16 * 256 (the SSE loops' tails)
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i - 2049) / 256.0f;  // -8.0039 .. 8.0039
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {n});
  g.add_input(x);
  auto init = [&](const std::string& name, Tensor t) {
    ir::Value* v = g.add_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  };
  ir::Value* s1 = init("s1", scalar(0.05f));
  ir::Value* z1 = init("z1", scalar_of<uint8_t>(128));
  ir::Value* s2 = init("s2", scalar(1.0f));
  ir::Value* z2 = init("z2", bits16(DataType::BFloat16, {}, {0}));
  ir::Value* s3 = init("s3", scalar(0.0625f));
  ir::Value* z3 = init("z3", scalar_of<int8_t>(0));
  ir::Value *q1 = g.add_value("q1"), *a = g.add_value("a"), *q2 = g.add_value("q2"), *b = g.add_value("b"),
            *c = g.add_value("c");
  g.add_node("VitisQuantizeLinear", {x, s1, z1}, {q1}, "q1", kVitis);
  g.add_node("VitisDequantizeLinear", {q1, s1, z1}, {a}, "dq1", kVitis);
  g.add_node("ExtendedQuantizeLinear", {x, s2, z2}, {q2}, "q2", kQuark);
  g.add_node("ExtendedDequantizeLinear", {q2, s2, z2}, {b}, "dq2", kQuark);
  ir::Node* fix = g.add_node("FixNeuron", {x, s3, z3}, {c}, "fix", kContrib);
  fix->set_attribute(Attribute::of_string("bit_width", "8"));
  fix->set_attribute(Attribute::of_string("pos", "3"));
  g.add_output(a);
  g.add_output(b);
  g.add_output(c);

  engine::SessionOptions options;
  options.threads = 2;
  engine::Session session(model, options);
  auto out = session.run({{"x", make<float>({n}, xs)}});
  ASSERT_EQ(out.size(), 3u);
  auto av = values_of<float>(out[0]), bv = values_of<float>(out[1]), cv = values_of<float>(out[2]);
  for (int64_t i = 0; i < n; ++i) {
    double q = std::min(255.0, std::max(0.0, std::nearbyint(static_cast<double>(xs[i] / 0.05f)) + 128));
    ASSERT_EQ(av[i], static_cast<float>((q - 128) * 0.05f)) << i;
    ASSERT_EQ(bv[i], bf16_round(xs[i])) << i;
    double f = std::min(127.0, std::max(-128.0, std::nearbyint(static_cast<double>(xs[i]) / 0.0625)));
    ASSERT_EQ(cv[i], static_cast<float>(f * 0.0625)) << i;
  }
  // The saturated ends: -8.0039 / 0.05 = -160.08 -> -160 + 128 -> 0 -> -6.4; 160.08 -> 255 -> 6.35;
  // FixNeuron: -8.0039 / 0.0625 = -128.06 -> -128 -> -8; 128.06 -> 128 -> 127 -> 7.9375.
  EXPECT_EQ(av[0], -128 * 0.05f);
  EXPECT_EQ(av[n - 1], 127 * 0.05f);
  EXPECT_EQ(cv[0], -8.0f);
  EXPECT_EQ(cv[n - 1], 7.9375f);
  // bf16 of 2049 / 256 = 0x801 / 256 (12 significant bits): the low 4 bits 0001 are below half of
  // the last kept bit, so it rounds down to 2048 / 256 = 8; 2047 / 256 = 0x7FF / 256 rounds up to 8.
  EXPECT_EQ(bv[n - 1], 8.0f);
  EXPECT_EQ(bv[n - 3], 8.0f);
}

}  // namespace
}  // namespace onnxptq
