// Float maths written so that the compiler vectorises a loop calling it (no branches, no library
// calls): the exponential, tanh and logarithm the engine's kernels and the finetune trainer evaluate
// for every element.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace onnxptq::engine {

// c ? a : b through bit masks: a branch-free select the compiler keeps as one (a ?: on floats
// may be turned into a branch around the work of the other side, which stops vectorisation).
inline float select_bits(bool c, float a, float b) {
  uint32_t mask = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) | (std::bit_cast<uint32_t>(b) & ~mask));
}

// e^r - 1 for |r| <= ln(2)/2: r + r^2 p(r), p a least-squares fit (relative error of e^r - 1)
// of (e^r - 1 - r) / r^2 made for this; within 1e-7 relative in float.
// Multiply-adds are std::fma, one rounding each: the same values on every machine (the build
// contracts nothing itself), and one instruction where the machine has FMA.
[[gnu::always_inline]] inline float expm1_reduced(float r) {
  float p = 1.9851593856e-4f;
  p = std::fma(p, r, 1.3940982269e-3f);
  p = std::fma(p, r, 8.3333785668e-3f);
  p = std::fma(p, r, 4.1666354797e-2f);
  p = std::fma(p, r, 1.6666666419e-1f);
  p = std::fma(p, r, 5.0000000465e-1f);
  return std::fma(p * r, r, r);
}

// e^x in float, within about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^x = 2^n e^r.
// Overflow gives inf, results below the denormals 0, NaN stays NaN.
[[gnu::always_inline]] inline float fast_exp(float x) {
  // Adding 1.5 * 2^23 rounds x / ln2 to an integer, which lands in the low mantissa bits.
  float k = std::fma(x, 1.44269504088896341f, 12582912.0f);
  int32_t n = std::bit_cast<int32_t>(k) - 0x4B400000;
  float nf = k - 12582912.0f;
  // ln2 in two parts: the first has 16 significant bits, so n times it is exact.
  float r = std::fma(-nf, 0.693145751953125f, x);
  r = std::fma(-nf, 1.428606765330187e-6f, r);
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
[[gnu::always_inline]] inline float fast_sigmoid(float x) {
  float e = fast_exp(-std::fabs(x));
  float s = 1.0f / (1.0f + e);
  return select_bits(x < 0.0f, e * s, s);
}

#if defined(__AVX512F__)
// fast_sigmoid on 16 lanes: the same operations in the same order, so the same values bit for
// bit, with 2^n as one VSCALEFPS, which rounds y 2^n once as fast_exp's two factors do (the first
// product is exact). What the compiler makes of fast_sigmoid's integer exponent steps and selects
// takes about 1.5 times as long.
[[gnu::always_inline]] inline __m512 fast_sigmoid16(__m512 x) {
  const __m512 a = _mm512_or_ps(x, _mm512_set1_ps(-0.0f));  // -|x|: fast_exp's argument
  const __m512 shift = _mm512_set1_ps(12582912.0f);
  const __m512 nf = _mm512_sub_ps(_mm512_fmadd_ps(a, _mm512_set1_ps(1.44269504088896341f), shift), shift);
  __m512 r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(0.693145751953125f), a);
  r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(1.428606765330187e-6f), r);
  __m512 p = _mm512_set1_ps(1.9851593856e-4f);  // expm1_reduced
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3940982269e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3333785668e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1666354797e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666666419e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000000465e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r);
  const __m512 y = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  // fast_exp's 0 below -104 (NaN compares unordered and stays NaN); its overflow cannot occur
  const __mmask16 kept = _mm512_cmp_ps_mask(a, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);
  const __m512 e = _mm512_maskz_scalef_ps(kept, y, nf);
  const __m512 s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  return _mm512_mask_mul_ps(s, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), e, s);
}
#endif

// y[i] = fast_sigmoid(x[i]), or with kTimesX x[i] * fast_sigmoid(x[i]) (SiLU: what a Sigmoid and a
// Mul of its input give), for i < n; y may be x.
template <bool kTimesX = false>
inline void sigmoid_values(const float* x, float* y, int64_t n) {
#if defined(__AVX512F__)
  auto value = [](__m512 v) { return kTimesX ? _mm512_mul_ps(v, fast_sigmoid16(v)) : fast_sigmoid16(v); };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, value(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const auto rest = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, rest, value(_mm512_maskz_loadu_ps(rest, x + i)));
  }
#else
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = kTimesX ? x[i] * fast_sigmoid(x[i]) : fast_sigmoid(x[i]);
#endif
}

// tanh in float, vectorisable, within about 1e-6 relative: e^2|x| - 1 straight from the
// polynomial for small |x| (no cancellation), 1 - 2 / (e^2|x| + 1) above.
[[gnu::always_inline]] inline float fast_tanh(float x) {
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
[[gnu::always_inline]] inline float fast_log(float x) {
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
