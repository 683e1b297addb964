// float16 and bfloat16 conversions, checked against independent oracles: the compiler's own
// _Float16 conversions (libgcc) and a nearest-neighbour search done in double precision.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "ir/float16.h"

namespace onnxptq::ir {
namespace {

uint16_t compiler_half_bits(float f) {
  auto h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

// Round to nearest even by looking at the two candidates around f, in double precision.
uint16_t nearest_bfloat16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  auto down = static_cast<uint16_t>(bits >> 16);
  auto up = static_cast<uint16_t>(down + 1);
  double x = f;
  double lo = std::bit_cast<float>(static_cast<uint32_t>(down) << 16);
  double hi = std::bit_cast<float>(static_cast<uint32_t>(up) << 16);
  // The candidate past the largest finite bfloat16 is infinity; treat it as 2^128 for distance.
  if (std::isinf(hi)) hi = std::copysign(std::ldexp(1.0, 128), x);
  double dlo = std::fabs(x - lo), dhi = std::fabs(x - hi);
  if (dlo < dhi) return down;
  if (dhi < dlo) return up;
  return (down & 1) ? up : down;
}

TEST(Float16, EveryHalfSurvivesARoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    auto compiler = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(compiler));
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(compiler)) << "half bits " << h;
    ASSERT_EQ(float_to_half(f), h) << "half bits " << h;
  }
}

TEST(Float16, RoundsLikeTheCompilerOnRandomAndEdgeFloats) {
  std::mt19937 rng(1234);
  std::vector<uint32_t> cases = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x477fe000, 0x477fefff,
                                 0x477ff000, 0x477ff001, 0x33000000, 0x33000001, 0x32ffffff, 0x38800000,
                                 0x387fc000, 0x387fe000, 0x3f801000, 0x3f803000, 0x00000001, 0x7f7fffff};
  for (int i = 0; i < 2000000; ++i) cases.push_back(rng());
  // Floats near the half range, where the interesting rounding happens.
  std::uniform_real_distribution<float> near(-70000.0f, 70000.0f);
  for (int i = 0; i < 500000; ++i) cases.push_back(std::bit_cast<uint32_t>(near(rng) * std::ldexp(1.0f, -(i % 30))));
  for (uint32_t bits : cases) {
    float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(float_to_half(f), compiler_half_bits(f)) << "float bits 0x" << std::hex << bits;
  }
}

TEST(Float16, NanStaysQuietNanWithItsSign) {
  uint16_t h = float_to_half(std::bit_cast<float>(0xffc00001u));
  EXPECT_EQ(h & 0x8000u, 0x8000u);
  EXPECT_EQ(h & 0x7e00u, 0x7e00u);
  EXPECT_TRUE(std::isnan(half_to_float(h)));
  // A signalling NaN whose payload lives only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::bit_cast<float>(0x7f800001u)))));
}

TEST(BFloat16, EveryBFloat16SurvivesARoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bfloat16_to_float(static_cast<uint16_t>(b));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(float_to_bfloat16(f), b);
    }
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  std::mt19937 rng(99);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exact ties
    float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(f))));
      continue;
    }
    ASSERT_EQ(float_to_bfloat16(f), nearest_bfloat16(f)) << "float bits 0x" << std::hex << bits;
  }
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80u);  // max float rounds to inf
}

TEST(Float16, ArrayConversionsMatchScalar) {
  std::vector<float> in = {0.1f, -2.5f, 65504.0f, 1e-6f, -0.0f};
  std::vector<uint16_t> half(in.size()), bf(in.size());
  std::vector<float> back(in.size());
  float_to_half(in.data(), half.data(), in.size());
  float_to_bfloat16(in.data(), bf.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(half[i], float_to_half(in[i]));
    EXPECT_EQ(bf[i], float_to_bfloat16(in[i]));
  }
  half_to_float(half.data(), back.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(back[i], half_to_float(half[i]));
  bfloat16_to_float(bf.data(), back.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(back[i], bfloat16_to_float(bf[i]));
}

}  // namespace
}  // namespace onnxptq::ir
