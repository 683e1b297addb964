// Float maths written so that the compiler vectorises a loop calling it (no branches, no library
// calls): the exponential, tanh and logarithm the engine's kernels and the finetune trainer evaluate
// for every element.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace onnxptq::engine {

// c ? a : b through bit masks: a branch-free select the compiler keeps as one (a ?: on floats
// may be turned into a branch around the work of the other side, which stops vectorisation).
inline float select_bits(bool c, float a, float b) {
  uint32_t mask = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) | (std::bit_cast<uint32_t>(b) & ~mask));
}

// e^r - 1 for |r| <= ln(2)/2: r + r^2 p(r), p a least-squares fit (relative error of e^r - 1)
// of (e^r - 1 - r) / r^2 made for this; within 1e-7 relative in float.
inline float expm1_reduced(float r) {
  float p = 1.9851593856e-4f;
  p = p * r + 1.3940982269e-3f;
  p = p * r + 8.3333785668e-3f;
  p = p * r + 4.1666354797e-2f;
  p = p * r + 1.6666666419e-1f;
  p = p * r + 5.0000000465e-1f;
  return p * r * r + r;
}

// e^x in float, within about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^x = 2^n e^r.
// Overflow gives inf, results below the denormals 0, NaN stays NaN.
inline float fast_exp(float x) {
  // Adding 1.5 * 2^23 rounds x / ln2 to an integer, which lands in the low mantissa bits.
  float k = x * 1.44269504088896341f + 12582912.0f;
  int32_t n = std::bit_cast<int32_t>(k) - 0x4B400000;
  float nf = k - 12582912.0f;
  // ln2 in two parts: the first has 16 significant bits, so n times it is exact.
  float r = x - nf * 0.693145751953125f;
  r = r - nf * 1.428606765330187e-6f;
  float y = expm1_reduced(r) + 1.0f;
  n = std::min(std::max(n, -252), 254);
  // 2^n as two normal factors, so that results down in the denormals come out right.
  int32_t n1 = n >> 1, n2 = n - n1;
  y = y * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
  y = select_bits(x < -104.0f, 0.0f, y);
  return select_bits(x > 88.72283935546875f, std::numeric_limits<float>::infinity(), y);
}

// 1 / (1 + e^-x) in float. With e = e^-|x| (never overflows): 1 / (1 + e) for x >= 0, e / (1 + e)
// below, which keeps the tiny results of very negative x.
inline float fast_sigmoid(float x) {
  float e = fast_exp(-std::fabs(x));
  float s = 1.0f / (1.0f + e);
  return select_bits(x < 0.0f, e * s, s);
}

// tanh in float, vectorisable, within about 1e-6 relative: e^2|x| - 1 straight from the
// polynomial for small |x| (no cancellation), 1 - 2 / (e^2|x| + 1) above.
inline float fast_tanh(float x) {
  float a = std::fabs(x);
  float em = expm1_reduced(2.0f * a);
  float small = em / (em + 2.0f);
  float large = 1.0f - 2.0f / (fast_exp(2.0f * a) + 1.0f);
  float t = select_bits(a < 0.1732867951f, small, large);
  return std::copysign(t, x);
}

// ln x in float for normal x > 0, within about 2 ulp: x = 2^e m with m in [sqrt(1/2), sqrt(2)),
// ln m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^9/9) with s = (m - 1) / (m + 1), |s| <= 0.1716, where
// the first term left out is below 1e-9 relative. Zero, denormals, inf and NaN are the caller's
// to exclude.
inline float fast_log(float x) {
  constexpr int32_t kSqrtHalf = 0x3F3504F3;  // the bits of sqrt(1/2)
  const int32_t bits = std::bit_cast<int32_t>(x);
  const int32_t e = (bits - kSqrtHalf) >> 23;
  const float m = std::bit_cast<float>(bits - e * (1 << 23));
  const float s = (m - 1.0f) / (m + 1.0f), z = s * s;
  float p = 1.0f / 9;
  p = p * z + 1.0f / 7;
  p = p * z + 1.0f / 5;
  p = p * z + 1.0f / 3;
  p = p * z + 1.0f;
  return 2.0f * s * p + static_cast<float>(e) * 0.693147180559945309f;
}

}  // namespace onnxptq::engine
