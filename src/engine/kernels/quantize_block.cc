// The block formats of AMD Quark for ONNX (com.amd.quark v1), fake quantization in one op, float in
// and float out: every block of `block_size` values along `axis` shares one exponent.
//
//   BFPQuantizeDequantize  bfp_method "to_bfp": BFP16 (bit_width 16, block_size 8): one 8-bit
//                          exponent, the block's largest; each value a sign and m = bit_width - 9
//                          magnitude bits, step 2^(e - m + 1), clamped to +-(2^(e+1) - step).
//                          bfp_method "to_bfp_prime" ("to_bfp_prime_shared"): MX4/MX6/MX9, the
//                          shared microexponents of Rouhani et al. (arXiv:2302.08007): sub-blocks of
//                          `sub_block_size` values may sit up to 2^sub_block_shift_bits - 1 binades
//                          below the block's exponent; mantissas are cut from the float32 bits.
//   MXQuantizeDequantize   the OCP Microscaling formats (OCP MX v1.0): scale 2^(E - 127 - emax) from
//                          the block's largest exponent E, elements fp8_e5m2, fp8_e4m3, fp6_e3m2,
//                          fp6_e2m3, fp4_e2m1 (round half to even, saturated to the largest normal)
//                          or int8 (implicit element scale 2^-6, range [-128, 127]). Two attributes
//                          of onnxptq's (absent in Quark's models): min_error_scale 1 takes the
//                          scale twice as large when it gives the block a smaller squared error,
//                          symmetric_int8 1 the OCP reference emulator's int8 range [-127, 127].
//
// rounding_mode: 0 half away from zero, 1 half up (towards +inf), 2 half to even. As in Quark's
// kernels, the sign of a zero result follows their rounding functions: mode 2 gives +0 for values
// in [-0.5, 0) steps, the MX float elements give +0 for every value that rounds to zero.
//
// Tensor handling (Quark's custom-op docs): a tensor of one element is returned as is; a rank-1
// tensor is cut into blocks along its only axis (the `axis` attribute is not read); otherwise the
// blocks run along `axis`. A last block shorter than block_size is padded with zeros, which never
// raise a block's exponent. float16 inputs are computed in float32 and stored back.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "engine/block_quantizer.h"
#include "engine/kernels/quantize.h"
#include "engine/kernels/quark_bfloat16.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

constexpr int64_t kMinBlocksPerThread = 512;
constexpr int64_t kMaxBlockSize = 65536;  // Quark's formats use 8 to 32
constexpr int64_t kTileLines = 32;        // lines quantized together when the blocks are strided
#if defined(__AVX512F__) && defined(__AVX512DQ__)
constexpr int64_t kLanes = 16;  // blocks side by side in a lanes function (the floats of a register)
#else
constexpr int64_t kLanes = 8;
#endif
constexpr int64_t kMaxLaneRows = 64;      // the longest block a lanes function takes

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t u) { return std::bit_cast<float>(u); }

uint32_t biased_exponent(float v) { return (bits_of(v) >> 23) & 0xFFu; }

// 2^k for k in [-1022, 1023], built from its bits (std::ldexp is a library call per block).
double pow2(int k) { return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52); }

enum class Rounding { HalfAway = 0, HalfUp = 1, HalfEven = 2 };

// The MX scale choice and int8 range (read_mx_scaling).
struct MxScaling {
  bool min_error_scale = false;
  float int8_min = -128.0f;
};

// y rounded to an integer (|y| < 2^24, or not finite), in the rounding functions of Quark's
// kernels: std::round, "dpu_round" (std::round but negative halves go up) and "py3_round"
// (floor-based half to even, which gives +0 for y in [-0.5, 0)).
template <Rounding R>
[[gnu::always_inline]] inline float round_to_integer(float y) {
  if constexpr (R == Rounding::HalfAway) {
    const float t = std::trunc(y);
    const float r = std::fabs(t) + (std::fabs(y - t) >= 0.5f ? 1.0f : 0.0f);
    return std::copysign(r, y);
  } else if constexpr (R == Rounding::HalfUp) {
    const float f = std::floor(y);
    const float r = y - f >= 0.5f ? f + 1.0f : f;
    return std::copysign(r, y);  // a zero keeps y's sign, as std::round and std::ceil do
  } else {
    const float r = std::rint(y);                   // to nearest even
    return r == 0.0f ? (y == 0.0f ? y : 0.0f) : r;  // -0 stays -0, other zeros are +0
  }
}

// max(lo, min(x, hi)) on values (std::min and std::max return references, which can keep a loop
// from vectorising).
inline float clamp_value(float x, float lo, float hi) {
  const float below = hi < x ? hi : x;
  return lo < below ? below : lo;
}

// The integer mantissa `mant` (< 2^24) shifted right by `tail` bits (>= 1) and rounded; a result
// already at `upper` is not rounded up. Ties follow the rounding mode, on the sign of the value.
// Branch-free and always inlined, so that the loops calling it vectorise.
template <Rounding R>
[[gnu::always_inline]] inline uint32_t shift_and_round(uint32_t mant, int tail, bool negative, uint32_t upper) {
  const int t = tail < 25 ? tail : 25;  // 25 bits or more off a 24-bit mantissa leave 0
  const uint32_t half = 1u << (t - 1);
  const uint32_t rest = mant & ((1u << t) - 1);
  const uint32_t kept = mant >> t;
  // 0/1 as uint32_t, not bool: the vectoriser cannot convert to and from 1-bit values
  uint32_t tie_up;
  if constexpr (R == Rounding::HalfAway)
    tie_up = 1u;
  else if constexpr (R == Rounding::HalfUp)
    tie_up = negative ? 0u : 1u;
  else
    tie_up = kept & 1u;
  const uint32_t up = ((rest > half ? 1u : 0u) | ((rest == half ? 1u : 0u) & tie_up)) & (kept != upper ? 1u : 0u);
  return kept + up;
}

// ---------------------------------------------------------------------------------------------
// One block: `n` values of x in, `n` of y out.

// The functions of one block are always inlined: called with the block size as a constant
// (with_block_size), each loop is then a few whole vector instructions.

// fn(n) with n as a constant for Quark's block sizes (8, 16, 32), so that the always-inlined block
// functions it calls compile to fixed-length vector code; else fn(n).
template <class F>
[[gnu::always_inline]] inline void with_block_size(int64_t n, F&& fn) {
  switch (n) {
    case 8:
      return fn(int64_t{8});
    case 16:
      return fn(int64_t{16});
    case 32:
      return fn(int64_t{32});
    default:
      return fn(n);
  }
}

// The largest biased exponent of x[0..n), Inf and NaN counting as 0.
[[gnu::always_inline]] inline uint32_t finite_max_exponent(const float* x, int64_t n) {
  uint32_t e_max = 0;
#pragma omp simd reduction(max : e_max)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t e = biased_exponent(x[i]);
    e = e == 0xFFu ? 0 : e;
    e_max = std::max(e_max, e);
  }
  return e_max;
}

uint32_t max_exponent(const float* x, int64_t n) {
  uint32_t e_max = 0;
#pragma omp simd reduction(max : e_max)
  for (int64_t i = 0; i < n; ++i) e_max = std::max(e_max, biased_exponent(x[i]));
  return e_max;
}

// x / d for a power of two d: as x times 1/d where 1/d is a float (the same value, x * 2^-k
// rounded once, and cheaper), else as a division.
struct PowerOfTwoDivisor {
  explicit PowerOfTwoDivisor(float d) : d(d), inverse(1.0f / d), exact(d >= 0x1p-126f) {}
  PowerOfTwoDivisor(float d, float inverse) : d(d), inverse(inverse), exact(true) {}  // both normal
  float d, inverse;
  bool exact;
};

// to_bfp: y = clamp(round(x / step) * step, lo, hi); Inf and NaN pass.
template <Rounding R, bool kByInverse>
[[gnu::always_inline]] inline void bfp_values(const float* x, float* y, int64_t n, PowerOfTwoDivisor step, float lo,
                                              float hi) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float steps = kByInverse ? v * step.inverse : v / step.d;
    const float q = clamp_value(round_to_integer<R>(steps) * step.d, lo, hi);
    y[i] = biased_exponent(v) == 0xFFu ? v : q;
  }
}

template <Rounding R>
[[gnu::always_inline]] inline void bfp_values(const float* x, float* y, int64_t n, float step, float lo, float hi) {
  const PowerOfTwoDivisor d(step);
  if (d.exact)
    bfp_values<R, true>(x, y, n, d, lo, hi);
  else
    bfp_values<R, false>(x, y, n, d, lo, hi);
}

template <Rounding R>
[[gnu::always_inline]] inline void bfp_block(const float* x, float* y, int64_t n, int m) {
  const auto e_biased = static_cast<int>(finite_max_exponent(x, n));
  const int step_biased = e_biased - (m - 1);
  if (step_biased >= 1 && step_biased <= 253) {  // step and 1/step normal floats, from their bits
    const float step = float_of(static_cast<uint32_t>(step_biased) << 23);
    const float vmax = step * static_cast<float>((1u << m) - 1);  // 2^(e+1) - step, exactly
    PowerOfTwoDivisor d(step, float_of(static_cast<uint32_t>(254 - step_biased) << 23));
    bfp_values<R, true>(x, y, n, d, -vmax, vmax);
    return;
  }
  const int e = e_biased - 127;
  const auto step = static_cast<float>(pow2(e - (m - 1)));
  const auto vmax = static_cast<float>(pow2(e + 1) - step);
  bfp_values<R>(x, y, n, step, -vmax, vmax);
}

// The blocks of a lanes function (block l: x[l], x[l + stride], ... `rows` values) that its vector
// path leaves, one bit a lane in `lanes`: gathered, block(in, out, rows) on each, and put back.
template <class OneBlock>
void each_lane_block(const float* x, float* y, int64_t stride, int64_t rows, uint32_t lanes, OneBlock&& block) {
  float in[kMaxLaneRows], out[kMaxLaneRows];
  for (int l = 0; l < 32; ++l) {
    if (!(lanes >> l & 1u)) continue;
    for (int64_t j = 0; j < rows; ++j) in[j] = x[l + j * stride];
    block(in, out, rows);
    for (int64_t j = 0; j < rows; ++j) y[l + j * stride] = out[j];
  }
}

// The blocks whose step is not a normal float, on the scalar path.
template <Rounding R>
void bfp_lanes_scalar(const float* x, float* y, int64_t stride, int64_t rows, int m, uint32_t lanes) {
  each_lane_block(x, y, stride, rows, lanes, [m](const float* in, float* out, int64_t n) { bfp_block<R>(in, out, n, m); });
}

#if defined(__AVX2__)
// round_to_integer on 8 lanes, the same values bit for bit.
template <Rounding R>
[[gnu::always_inline]] inline __m256 round_to_integer8(__m256 y) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  if constexpr (R == Rounding::HalfAway) {
    const __m256 t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(y, t)), half, _CMP_GE_OQ);
    const __m256 r = _mm256_add_ps(_mm256_andnot_ps(sign, t), _mm256_and_ps(up, one));
    return _mm256_or_ps(r, _mm256_and_ps(sign, y));
  } else if constexpr (R == Rounding::HalfUp) {
    const __m256 f = _mm256_round_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_cmp_ps(_mm256_sub_ps(y, f), half, _CMP_GE_OQ);
    const __m256 r = _mm256_add_ps(f, _mm256_and_ps(up, one));
    return _mm256_or_ps(_mm256_andnot_ps(sign, r), _mm256_and_ps(sign, y));
  } else {
    const __m256 r = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 y_if_zero = _mm256_and_ps(y, _mm256_cmp_ps(y, zero, _CMP_EQ_OQ));  // +-0 kept, else +0
    return _mm256_blendv_ps(r, y_if_zero, _mm256_cmp_ps(r, zero, _CMP_EQ_OQ));
  }
}

// to_bfp of `count` consecutive blocks of 8 * K values, a block in K registers: the shared exponent
// is a vector maximum, step and 1/step come from its bits, and a block whose step or 1/step would
// not be a normal float (all zeros or subnormals, or the largest binades) takes the scalar path.
// Bit for bit bfp_block's values.
template <Rounding R, int K>
void bfp_blocks_avx2(const float* x, float* y, int64_t count, int m) {
  const __m256i exponent_bits = _mm256_set1_epi32(0xFF);
  const __m256i step_offset = _mm256_set1_epi32(m - 1);
  const __m256i lowest = _mm256_set1_epi32(1), highest = _mm256_set1_epi32(253), inverse_base = _mm256_set1_epi32(254);
  const __m256 levels = _mm256_set1_ps(static_cast<float>((1u << m) - 1)), sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < count; ++b, x += 8 * K, y += 8 * K) {
    __m256 v[K];
    __m256i special[K];  // Inf and NaN lanes: passed through, and not counted in the maximum
    __m256i e_max = _mm256_setzero_si256();
    for (int k = 0; k < K; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      const __m256i e = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v[k]), 23), exponent_bits);
      special[k] = _mm256_cmpeq_epi32(e, exponent_bits);
      e_max = _mm256_max_epi32(e_max, _mm256_andnot_si256(special[k], e));
    }
    e_max = _mm256_max_epi32(e_max, _mm256_permute2x128_si256(e_max, e_max, 1));
    e_max = _mm256_max_epi32(e_max, _mm256_shuffle_epi32(e_max, _MM_SHUFFLE(1, 0, 3, 2)));
    e_max = _mm256_max_epi32(e_max, _mm256_shuffle_epi32(e_max, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m256i step_biased = _mm256_sub_epi32(e_max, step_offset);
    const __m256i outside =
        _mm256_or_si256(_mm256_cmpgt_epi32(lowest, step_biased), _mm256_cmpgt_epi32(step_biased, highest));
    if (!_mm256_testz_si256(outside, outside)) {
      // A block of +0 only (a ReLU's output often has 8 channels of zeros at a pixel) is +0 on
      // the scalar path too: stored as it is, not taken one value at a time.
      bool zeros = true;
      for (int k = 0; k < K; ++k) zeros = zeros && _mm256_testz_si256(_mm256_castps_si256(v[k]), _mm256_castps_si256(v[k]));
      if (zeros) {
        for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + 8 * k, v[k]);
      } else {
        bfp_block<R>(x, y, 8 * K, m);
      }
      continue;
    }
    const __m256 step = _mm256_castsi256_ps(_mm256_slli_epi32(step_biased, 23));
    const __m256 inverse = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(inverse_base, step_biased), 23));
    const __m256 hi = _mm256_mul_ps(step, levels), lo = _mm256_xor_ps(hi, sign);
    for (int k = 0; k < K; ++k) {
      const __m256 q = _mm256_mul_ps(round_to_integer8<R>(_mm256_mul_ps(v[k], inverse)), step);
      const __m256 clamped = _mm256_max_ps(_mm256_min_ps(hi, q), lo);  // clamp_value's operand order
      _mm256_storeu_ps(y + 8 * k, _mm256_blendv_ps(clamped, v[k], _mm256_castsi256_ps(special[k])));
    }
  }
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_epi32() as the unused merge source and then
// warn that it is, or may be, uninitialized (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// round_to_integer8 on 16 lanes, the same values bit for bit.
template <Rounding R>
[[gnu::always_inline]] inline __m512 round_to_integer16(__m512 y) {
  const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  if constexpr (R == Rounding::HalfAway) {
    const __m512 t = _mm512_roundscale_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_sub_ps(y, t)), half, _CMP_GE_OQ);
    const __m512 magnitude = _mm512_andnot_ps(sign, t);
    return _mm512_or_ps(_mm512_mask_add_ps(magnitude, up, magnitude, one), _mm512_and_ps(sign, y));
  } else if constexpr (R == Rounding::HalfUp) {
    const __m512 f = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(y, f), half, _CMP_GE_OQ);
    const __m512 r = _mm512_mask_add_ps(f, up, f, one);
    return _mm512_or_ps(_mm512_andnot_ps(sign, r), _mm512_and_ps(sign, y));
  } else {
    const __m512 r = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 zero = _mm512_setzero_ps();
    const __m512 y_if_zero = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, zero, _CMP_EQ_OQ), y);  // +-0 kept, else +0
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(r, zero, _CMP_EQ_OQ), r, y_if_zero);
  }
}

// The biased exponent of each of 16 floats.
[[gnu::always_inline]] inline __m512i biased_exponents16(__m512 v) {
  return _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 23), _mm512_set1_epi32(0xFF));
}

// The exponent field of each of 16 floats, in place (e << 23; an Inf or NaN's is 255 << 23).
[[gnu::always_inline]] inline __m512i exponent_fields16(__m512 v) {
  return _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7F800000));
}

// Each lane the largest of the 8 lanes of its 256-bit half (values below 2^31).
[[gnu::always_inline]] inline __m512i max_within_halves16(__m512i a) {
  a = _mm512_max_epu32(a, _mm512_shuffle_i32x4(a, a, _MM_SHUFFLE(2, 3, 0, 1)));
  a = _mm512_max_epu32(a, _mm512_shuffle_epi32(a, static_cast<_MM_PERM_ENUM>(_MM_SHUFFLE(1, 0, 3, 2))));
  return _mm512_max_epu32(a, _mm512_shuffle_epi32(a, static_cast<_MM_PERM_ENUM>(_MM_SHUFFLE(2, 3, 0, 1))));
}

// Each lane's step, 1/step and clamp bounds, from the biased exponent of its block's step (a normal
// float's: the callers send the other blocks to the scalar path), and values quantized with them.
struct BfpSteps16 {
  BfpSteps16(__m512i step_biased, int m)
      : step(_mm512_castsi512_ps(_mm512_slli_epi32(step_biased, 23))),
        inverse(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), step_biased), 23))),
        hi(_mm512_mul_ps(step, _mm512_set1_ps(static_cast<float>((1u << m) - 1)))),
        lo(_mm512_xor_ps(hi, _mm512_set1_ps(-0.0f))) {}

  // v on its lanes' grids, the `special` lanes (Inf and NaN) passed through.
  template <Rounding R>
  [[gnu::always_inline]] __m512 quantize(__m512 v, __mmask16 special) const {
    const __m512 q = _mm512_mul_ps(round_to_integer16<R>(_mm512_mul_ps(v, inverse)), step);
    const __m512 clamped = _mm512_max_ps(_mm512_min_ps(hi, q), lo);  // clamp_value's operand order
    return _mm512_mask_blend_ps(special, clamped, v);
  }

  __m512 step, inverse, hi, lo;
};

// Rounding half to even with the float adder, for blocks whose largest biased exponent e is in
// [m, 230 + m] and m <= 22: with magic = 1.5 * 2^23 * step, (v + magic) - magic is v rounded to a
// multiple of step, ties to an even multiple (|v| < 2^m * step <= 2^22 * step keeps v + magic in
// magic's binade, where one unit in the last place is one step); the clamp to +-(2^(e+1) - step)
// is one VRANGEPS (the smaller magnitude, v's sign). round_to_integer16<HalfEven>'s zeros: a value
// whose scaled v / step is +-0 (v itself, or a product that underflows) keeps that zero, every
// other value rounding to zero gives +0, as the adder's x + -x does. Both bounds and 1/step are
// additions to the exponent bits a_max = e << 23 (the exponents of an Inf or NaN, 255, fall
// outside the range: such blocks take another path).
struct BfpEvenGrid16 {
  BfpEvenGrid16(__m512i a_max, int m)
      : magic(_mm512_castsi512_ps(_mm512_add_epi32(a_max, _mm512_set1_epi32(((24 - m) << 23) | 0x400000)))),
        inverse(_mm512_castsi512_ps(_mm512_sub_epi32(_mm512_set1_epi32((253 + m) << 23), a_max))),
        hi(_mm512_castsi512_ps(_mm512_add_epi32(
            a_max, _mm512_set1_epi32(static_cast<int>(bits_of(static_cast<float>((1u << m) - 1))) - ((m + 126) << 23))))) {}

  static bool applies(int m) { return m <= 22; }
  // The lanes whose a_max the grid takes.
  static __mmask16 in_range(__m512i a_max, int m) {
    return _mm512_cmple_epu32_mask(_mm512_sub_epi32(a_max, _mm512_set1_epi32(m << 23)), _mm512_set1_epi32(230 << 23));
  }

  [[gnu::always_inline]] __m512 quantize(__m512 v) const {
    const __m512 scaled = _mm512_mul_ps(v, inverse);
    const __mmask16 nonzero = _mm512_cmp_ps_mask(scaled, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    const __m512 rounded = _mm512_mask_sub_ps(scaled, nonzero, _mm512_add_ps(v, magic), magic);
    return _mm512_range_ps(rounded, hi, 0x02);  // min |.|, sign of the first operand
  }

  __m512 magic, inverse, hi;
};

// bfp_blocks8_avx512 with rounding half to even, on BfpEvenGrid16.
void bfp_blocks8_even_avx512(const float* x, float* y, int64_t count, int m) {
  int64_t b = 0;
  for (; b + 2 <= count; b += 2, x += 16, y += 16) {
    const __m512 v = _mm512_loadu_ps(x);
    const __m512i a_max = max_within_halves16(exponent_fields16(v));
    if (BfpEvenGrid16::in_range(a_max, m) != 0xFFFF) {
      bfp_blocks_avx2<Rounding::HalfEven, 1>(x, y, 2, m);
      continue;
    }
    _mm512_storeu_ps(y, BfpEvenGrid16(a_max, m).quantize(v));
  }
  if (b < count) bfp_blocks_avx2<Rounding::HalfEven, 1>(x, y, count - b, m);
}

// bfp_blocks_avx2 for blocks of 8, two at a time in one 512-bit register (the shared exponent is a
// maximum within each 256-bit half): about half the instructions per value. A pair with a block
// whose step is not a normal float, and an odd last block, go to bfp_blocks_avx2.
template <Rounding R>
void bfp_blocks8_avx512(const float* x, float* y, int64_t count, int m) {
  if constexpr (R == Rounding::HalfEven)
    if (BfpEvenGrid16::applies(m)) return bfp_blocks8_even_avx512(x, y, count, m);
  const __m512i exponent_bits = _mm512_set1_epi32(0xFF), step_offset = _mm512_set1_epi32(m - 1);
  const __m512i lowest = _mm512_set1_epi32(1), highest = _mm512_set1_epi32(253);
  int64_t b = 0;
  for (; b + 2 <= count; b += 2, x += 16, y += 16) {
    const __m512 v = _mm512_loadu_ps(x);
    const __m512i e = biased_exponents16(v);
    const __mmask16 special = _mm512_cmpeq_epi32_mask(e, exponent_bits);  // Inf and NaN: passed through
    const __m512i e_max = max_within_halves16(_mm512_maskz_mov_epi32(static_cast<__mmask16>(~special), e));
    const __m512i step_biased = _mm512_sub_epi32(e_max, step_offset);
    if (_mm512_cmpgt_epi32_mask(lowest, step_biased) | _mm512_cmpgt_epi32_mask(step_biased, highest)) {
      bfp_blocks_avx2<R, 1>(x, y, 2, m);
      continue;
    }
    _mm512_storeu_ps(y, BfpSteps16(step_biased, m).quantize<R>(v, special));
  }
  if (b < count) bfp_blocks_avx2<R, 1>(x, y, count - b, m);
}

// bfp_lanes_avx2 (below) on 16 blocks side by side.
template <Rounding R>
void bfp_lanes_avx512(const float* x, float* y, int64_t stride, int64_t rows, int m) {
  if constexpr (R == Rounding::HalfEven) {
    if (BfpEvenGrid16::applies(m)) {
      __m512i a_max = _mm512_setzero_si512();
      for (int64_t j = 0; j < rows; ++j)
        a_max = _mm512_max_epu32(a_max, exponent_fields16(_mm512_loadu_ps(x + j * stride)));
      const BfpEvenGrid16 grid(a_max, m);
      for (int64_t j = 0; j < rows; ++j) _mm512_storeu_ps(y + j * stride, grid.quantize(_mm512_loadu_ps(x + j * stride)));
      const auto others = static_cast<__mmask16>(~BfpEvenGrid16::in_range(a_max, m));
      if (others != 0) bfp_lanes_scalar<R>(x, y, stride, rows, m, others);
      return;
    }
  }
  const __m512i exponent_bits = _mm512_set1_epi32(0xFF);
  __m512i e_max = _mm512_setzero_si512();
  for (int64_t j = 0; j < rows; ++j) {
    const __m512i e = biased_exponents16(_mm512_loadu_ps(x + j * stride));
    e_max = _mm512_max_epi32(e_max, _mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(e, exponent_bits), e));
  }
  const __m512i step_biased = _mm512_sub_epi32(e_max, _mm512_set1_epi32(m - 1));
  const __mmask16 abnormal = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(1), step_biased) |
                             _mm512_cmpgt_epi32_mask(step_biased, _mm512_set1_epi32(253));
  const BfpSteps16 steps(step_biased, m);
  for (int64_t j = 0; j < rows; ++j) {
    const __m512 v = _mm512_loadu_ps(x + j * stride);
    _mm512_storeu_ps(y + j * stride,
                     steps.quantize<R>(v, _mm512_cmpeq_epi32_mask(biased_exponents16(v), exponent_bits)));
  }
  if (abnormal != 0) bfp_lanes_scalar<R>(x, y, stride, rows, m, abnormal);
}
#pragma GCC diagnostic pop
#endif

// to_bfp of 8 blocks side by side, one a lane: block l is x[l], x[l + stride], ... (`rows` values),
// as a block along the channels of an NCHW tensor is; no transpose, the rows are read in place
// twice (the maximum, then the values). Bit for bit bfp_block's values; a block whose step is not
// a normal float is gathered and takes the scalar path.
template <Rounding R>
void bfp_lanes_avx2(const float* x, float* y, int64_t stride, int64_t rows, int m) {
  const __m256i exponent_bits = _mm256_set1_epi32(0xFF);
  __m256i e_max = _mm256_setzero_si256();
  for (int64_t j = 0; j < rows; ++j) {
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(_mm256_loadu_ps(x + j * stride)), 23),
                                       exponent_bits);
    e_max = _mm256_max_epi32(e_max, _mm256_andnot_si256(_mm256_cmpeq_epi32(e, exponent_bits), e));
  }
  const __m256i step_biased = _mm256_sub_epi32(e_max, _mm256_set1_epi32(m - 1));
  const __m256i outside = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(1), step_biased),
                                          _mm256_cmpgt_epi32(step_biased, _mm256_set1_epi32(253)));
  const __m256 step = _mm256_castsi256_ps(_mm256_slli_epi32(step_biased, 23));
  const __m256 inverse =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), step_biased), 23));
  const __m256 hi = _mm256_mul_ps(step, _mm256_set1_ps(static_cast<float>((1u << m) - 1)));
  const __m256 lo = _mm256_xor_ps(hi, _mm256_set1_ps(-0.0f));
  for (int64_t j = 0; j < rows; ++j) {
    const __m256 v = _mm256_loadu_ps(x + j * stride);
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 23), exponent_bits);
    const __m256 q = _mm256_mul_ps(round_to_integer8<R>(_mm256_mul_ps(v, inverse)), step);
    const __m256 clamped = _mm256_max_ps(_mm256_min_ps(hi, q), lo);  // clamp_value's operand order
    _mm256_storeu_ps(y + j * stride, _mm256_blendv_ps(clamped, v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, exponent_bits))));
  }
  const auto abnormal = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(outside)));
  if (abnormal != 0) bfp_lanes_scalar<R>(x, y, stride, rows, m, abnormal);
}
#endif

// to_bfp of `count` consecutive blocks of n values: 8 (two a 512-bit register with AVX-512), 16 and
// 32 in AVX2 registers where the machine has them.
template <Rounding R>
void bfp_blocks_of_size(const float* x, float* y, int64_t n, int64_t count, int m) {
#if defined(__AVX2__)
  switch (n) {
    case 8:
#if defined(__AVX512F__) && defined(__AVX512DQ__)
      return bfp_blocks8_avx512<R>(x, y, count, m);
#else
      return bfp_blocks_avx2<R, 1>(x, y, count, m);
#endif
    case 16:
      return bfp_blocks_avx2<R, 2>(x, y, count, m);
    case 32:
      return bfp_blocks_avx2<R, 4>(x, y, count, m);
    default:
      break;
  }
#endif
  with_block_size(n, [&](int64_t size) {
    for (int64_t b = 0; b < count; ++b) bfp_block<R>(x + b * size, y + b * size, size, m);
  });
}

// to_bfp with use_compiler_version_cpu_kernel: when a value of the block's largest exponent rounds
// to 128 steps or more (or below -128), the exponent goes up by one; the clamp is asymmetric.
template <Rounding R>
void bfp_compiler_block(const float* x, float* y, int64_t n, int m) {
  const uint32_t e_biased = finite_max_exponent(x, n);
  int e = static_cast<int>(e_biased) - 127;
  auto step = static_cast<float>(pow2(e - (m - 1)));
  for (int64_t i = 0; i < n; ++i) {
    if (biased_exponent(x[i]) != e_biased) continue;
    const float r = round_to_integer<R>(x[i] / step);
    if (r >= 128.0f || r < -128.0f) {
      e += 1;
      step *= 2.0f;
      break;
    }
  }
  const auto hi = static_cast<float>(pow2(e) * (pow2(m) - 1.0));
  const auto lo = static_cast<float>(-pow2(e) * pow2(m));
  bfp_values<R>(x, y, n, step, lo, hi);
}

// to_bfp_prime: a sub-block's values keep m + 1 bits below the block exponent lowered by the
// sub-block's shift; subnormals count as zero, and a block holding Inf or NaN becomes all NaN.
template <Rounding R>
void bfp_prime_block(const float* x, float* y, int64_t n, int m, int64_t sub_size, uint32_t max_shift) {
  const uint32_t e_block = max_exponent(x, n);
  if (e_block == 0xFFu) {
    std::fill(y, y + n, float_of(0x7FFFFFFFu));
    return;
  }
  const uint32_t upper = (1u << (m + 1)) - 1;
  for (int64_t s = 0; s < n; s += sub_size) {
    const uint32_t shift = std::min(e_block - max_exponent(x + s, sub_size), max_shift);
    const double unit = pow2(static_cast<int>(e_block) - 127 - static_cast<int>(shift) + 1 - m);
    const int tail_base = static_cast<int>(e_block - shift) + 23 - m + 1;
#pragma omp simd
    for (int64_t i = s; i < s + sub_size; ++i) {
      const uint32_t u = bits_of(x[i]);
      const uint32_t e = (u >> 23) & 0xFFu;
      const uint32_t mant = e == 0 ? 0 : ((u & 0x7FFFFFu) | 0x800000u);
      const bool negative = (u >> 31) != 0;
      const uint32_t q = shift_and_round<R>(mant, tail_base - static_cast<int>(e), negative, upper);
      y[i] = static_cast<float>((negative ? -unit : unit) * static_cast<double>(q));
    }
  }
}

// v rounded half to even to a (1, ebits, mbits) float with subnormals, saturated to max_norm; a
// value that rounds to zero gives +0.
[[gnu::always_inline]] inline float fp_element(float v, const MxElementFormat& f) {
  const uint32_t u = bits_of(v);
  uint32_t e = (u >> 23) & 0xFFu;
  const uint32_t top = e != 0 ? (1u << 24) : (1u << 23);
  const uint32_t mant = (u & 0x7FFFFFu) | (e != 0 ? 0x800000u : 0u);
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int new_exp = static_cast<int>(e) - 127 + bias;
  int tail = 23 - f.mbits + (new_exp > 0 ? 0 : 1 - new_exp);  // extra bits off a subnormal
  tail = tail < 25 ? tail : 25;                               // (all of them past 25)
  const uint32_t kept = shift_and_round<Rounding::HalfEven>(mant, tail, false, 0xFFFFFFFFu);
  uint32_t r = kept << tail;
  const bool carry = r >= top;  // rounded up into the next binade
  r = carry & (e != 0) ? r >> 1 : r;
  e += carry ? 1 : 0;
  // Saturation compares bit patterns: for non-negative floats they order as the values do.
  const uint32_t bits = (e << 23) + (r & 0x7FFFFFu), max_bits = bits_of(f.max_norm);
  const uint32_t magnitude = bits < max_bits ? bits : max_bits;
  return float_of(kept == 0 ? 0u : magnitude | (u & 0x80000000u));
}

template <Rounding R, bool kByInverse, bool kFloatElements>
void mx_values(const float* x, float* y, int64_t n, const MxElementFormat f, PowerOfTwoDivisor scale, float int8_min) {
  constexpr float kInt8Step = 0.015625f;  // 2^-6
  const float d = scale.d, inverse = scale.inverse;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float w = kByInverse ? v * inverse : v / d;
    float q;
    if constexpr (kFloatElements) {
      q = fp_element(w, f);  // Quark rounds float elements half to even whatever rounding_mode says
    } else {
      q = clamp_value(round_to_integer<R>(w * 64.0f), int8_min, 127.0f) * kInt8Step;
    }
    y[i] = biased_exponent(v) == 0xFFu ? v : d * q;
  }
}

// The block's values with the shared scale 2^e.
template <Rounding R>
void mx_scaled(const float* x, float* y, int64_t n, const MxElementFormat& f, int e, float int8_min) {
  const PowerOfTwoDivisor scale(static_cast<float>(pow2(e)));
  if (f.ebits > 0) {
    if (scale.exact)
      mx_values<R, true, true>(x, y, n, f, scale, int8_min);
    else
      mx_values<R, false, true>(x, y, n, f, scale, int8_min);
  } else {
    if (scale.exact)
      mx_values<R, true, false>(x, y, n, f, scale, int8_min);
    else
      mx_values<R, false, false>(x, y, n, f, scale, int8_min);
  }
}

// The sum of (x - y)^2 over the block's finite x, in double (each square exact), summed as a tree
// over the block padded with zeros to a power of two: halves added element by element, an order
// that standard ONNX ops can repeat (quant/block_standard_ops.cc).
// `s` holds `width` doubles, width = n rounded up to a power of two.
[[gnu::always_inline]] inline double squared_error_tree(const float* x, const float* y, int64_t n, int64_t width,
                                                        double* s) {
  for (int64_t i = 0; i < width; ++i) {
    const bool counted = i < n && biased_exponent(x[i]) != 0xFFu;
    const double d = counted ? static_cast<double>(x[i]) - static_cast<double>(y[i]) : 0.0;
    s[i] = d * d;
  }
  for (int64_t half = width / 2; half >= 1; half /= 2)
    for (int64_t i = 0; i < half; ++i) s[i] += s[i + half];
  return s[0];
}

double squared_error(const float* x, const float* y, int64_t n) {
  const auto width = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n)));
  if (width <= 32) {  // Quark's block sizes, 8 to 32: on the stack, the loops of a constant length
    double s[32];
    switch (width) {
      case 8:
        return squared_error_tree(x, y, n, 8, s);
      case 16:
        return squared_error_tree(x, y, n, 16, s);
      case 32:
        return squared_error_tree(x, y, n, 32, s);
      default:
        return squared_error_tree(x, y, n, width, s);
    }
  }
  thread_local std::vector<double> s;
  s.resize(static_cast<size_t>(width));
  return squared_error_tree(x, y, n, width, s.data());
}

// The OCP scale 2^(E - emax) from the block's largest exponent E; with min_error_scale, 2^(E - emax
// + 1) instead when it gives the block a smaller squared error (the rule's scale clips block
// maxima whose significand exceeds the element's largest, 1.5 for FP4 and FP6 E2M3, 1.75 for E4M3).
template <Rounding R>
void mx_block(const float* x, float* y, int64_t n, const MxElementFormat& f, const MxScaling& scaling) {
  const int e = static_cast<int>(finite_max_exponent(x, n)) - 127 - f.emax;
  mx_scaled<R>(x, y, n, f, e, scaling.int8_min);
  if (!scaling.min_error_scale) return;
  // The values of scale 2^(e+1) are among those of 2^e (an element doubled is an element, up to
  // the largest), so where no value of the block goes past the largest element at 2^e, each value
  // is at least as close at 2^e and the rule's scale stands, decided without the second pass.
  // (Away from float32's limits, where every product is exact.)
  if (e >= -100 && e <= 100) {
    const float largest = static_cast<float>(pow2(e)) * (f.ebits > 0 ? f.max_norm : 127.0f / 64.0f);
    float top = 0;
#pragma omp simd reduction(max : top)
    for (int64_t i = 0; i < n; ++i) top = std::max(top, biased_exponent(x[i]) == 0xFFu ? 0.0f : std::fabs(x[i]));
    if (top <= largest) return;
  }
  thread_local std::vector<float> coarser;
  coarser.resize(static_cast<size_t>(n));
  mx_scaled<R>(x, coarser.data(), n, f, e + 1, scaling.int8_min);
  if (squared_error(x, coarser.data(), n) < squared_error(x, y, n)) std::copy(coarser.begin(), coarser.end(), y);
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// mx_block for blocks of 32 in two 512-bit registers, where every element rounds half to even
// (the float elements always, int8 with rounding_mode 2): the same values bit for bit. Rounding
// is the float adder's, as in BfpEvenGrid16: w = v / 2^e rounded to a multiple of its element's
// step u by (w + 1.5 * 2^23 u) - 1.5 * 2^23 u, u = 2^(max(exponent of w, 1 - bias) - mbits) per
// lane for the float elements (their subnormals included), 2^-6 for int8; then saturated (float:
// VRANGEPS to max_norm, which drops no sign; int8: clamped to [int8_min, 127] / 64) and scaled
// back. Zeros: the float elements give +0 for every value that rounds to zero, as the adder does;
// int8 keeps the sign of a w that is +-0 (round_to_integer's rule) and gives +0 otherwise.
class MxEven32 {
 public:
  explicit MxEven32(const MxElementFormat& f, const MxScaling& s)
      : floats_(f.ebits > 0),
        emax_(f.emax),
        min_error_(s.min_error_scale),
        scale_lo_(_mm512_set1_epi32((1 + f.emax) << 23)),
        scale_span_(_mm512_set1_epi32((std::min(253 + f.emax - (s.min_error_scale ? 1 : 0), 254) - 1 - f.emax) << 23)),
        emax_bits_(_mm512_set1_epi32(f.emax << 23)),
        inverse_base_(_mm512_set1_epi32((254 + f.emax) << 23)),
        step_floor_(_mm512_set1_epi32(f.ebits > 0 ? (128 - ((1 << (f.ebits - 1)) - 1)) << 23 : 0)),  // 1 - bias
        magic_offset_(_mm512_set1_epi32(((23 - f.mbits) << 23) | 0x400000)),
        max_norm_(_mm512_set1_ps(f.max_norm)),
        int8_lo_(_mm512_set1_ps(s.int8_min / 64.0f)),
        largest_(_mm512_set1_ps(floats_ ? f.max_norm : 127.0f / 64.0f)) {}

  static bool applies(const MxElementFormat& f, Rounding r) { return f.ebits > 0 || r == Rounding::HalfEven; }

  // `count` consecutive blocks of 32; a block holding an Inf or NaN, or whose scale is not a
  // normal float both ways, goes to other(x, y) (mx_block).
  template <class Other>
  void blocks(const float* x, float* y, int64_t count, Other&& other) const {
    for (int64_t b = 0; b < count; ++b, x += 32, y += 32)
      if (!block(x, y)) other(x, y);
  }

  // A block of n < 32 values, read and written in place, as padded with zeros (which raise no
  // exponent and add no error); a block block() refuses goes to other(x, y, n).
  template <class Other>
  void short_block(const float* x, float* y, int64_t n, Other&& other) const {
    const auto m0 = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1);
    const auto m1 = static_cast<__mmask16>(n > 16 ? (1u << (n - 16)) - 1 : 0u);
    __m512 y0, y1;
    if (!quantize_block(_mm512_maskz_loadu_ps(m0, x), _mm512_maskz_loadu_ps(m1, x + 16), y0, y1)) return other(x, y, n);
    _mm512_mask_storeu_ps(y, m0, y0);
    _mm512_mask_storeu_ps(y + 16, m1, y1);
  }

  // 16 blocks side by side, one a lane (block l: x[l], x[l + stride], ... `rows` values), as
  // bfp_lanes_avx512; without min_error_scale. A lane the block path would refuse goes to
  // other(mask of those lanes).
  template <class Other>
  void lanes(const float* x, float* y, int64_t stride, int64_t rows, Other&& other) const {
    __m512i a = _mm512_setzero_si512();
    for (int64_t j = 0; j < rows; ++j)
      a = _mm512_max_epu32(a, exponent_fields16(_mm512_loadu_ps(x + j * stride)));
    const __m512 d = _mm512_castsi512_ps(_mm512_sub_epi32(a, emax_bits_));
    const __m512 inverse = _mm512_castsi512_ps(_mm512_sub_epi32(inverse_base_, a));
    for (int64_t j = 0; j < rows; ++j)
      _mm512_storeu_ps(y + j * stride, quantize(_mm512_loadu_ps(x + j * stride), d, inverse));
    const __mmask16 refused = _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(a, scale_lo_), scale_span_);
    if (refused != 0) other(static_cast<uint32_t>(refused));
  }

 private:
  [[gnu::always_inline]] bool block(const float* x, float* y) const {
    __m512 y0, y1;
    if (!quantize_block(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16), y0, y1)) return false;
    _mm512_storeu_ps(y, y0);
    _mm512_storeu_ps(y + 16, y1);
    return true;
  }

  // v0, v1 (32 values) on their block's grid into y0, y1; false where block() refuses.
  [[gnu::always_inline]] bool quantize_block(__m512 v0, __m512 v1, __m512& y0, __m512& y1) const {
    // The block's largest exponent field in every lane: the two halves' maxima of both registers.
    __m512i a = _mm512_max_epu32(exponent_fields16(v0), exponent_fields16(v1));
    a = max_within_halves16(_mm512_max_epu32(a, _mm512_shuffle_i32x4(a, a, _MM_SHUFFLE(1, 0, 3, 2))));
    // 2^e and 2^-e normal floats (and 2^(e+1) with min_error_scale); an Inf or NaN falls outside.
    if (_mm512_cmpgt_epu32_mask(_mm512_sub_epi32(a, scale_lo_), scale_span_) != 0) return false;
    const __m512 d = _mm512_castsi512_ps(_mm512_sub_epi32(a, emax_bits_));
    const __m512 inverse = _mm512_castsi512_ps(_mm512_sub_epi32(inverse_base_, a));
    y0 = quantize(v0, d, inverse);
    y1 = quantize(v1, d, inverse);
    if (min_error_) {
      // As mx_block: the coarser scale only where a value goes past the largest element (or
      // near float32's limits).
      const __m512 largest = _mm512_mul_ps(d, largest_);
      const int e = (_mm_cvtsi128_si32(_mm512_castsi512_si128(a)) >> 23) - 127 - emax_;
      if (e < -100 || e > 100 || _mm512_cmp_ps_mask(_mm512_abs_ps(v0), largest, _CMP_GT_OQ) != 0 ||
          _mm512_cmp_ps_mask(_mm512_abs_ps(v1), largest, _CMP_GT_OQ) != 0) {
        const __m512 d2 = _mm512_add_ps(d, d), inverse2 = _mm512_mul_ps(inverse, _mm512_set1_ps(0.5f));
        const __m512 c0 = quantize(v0, d2, inverse2), c1 = quantize(v1, d2, inverse2);
        if (squared_error(v0, v1, c0, c1) < squared_error(v0, v1, y0, y1)) {
          y0 = c0;
          y1 = c1;
        }
      }
    }
    return true;
  }

  [[gnu::always_inline]] __m512 quantize(__m512 v, __m512 d, __m512 inverse) const {
    const __m512 w = _mm512_mul_ps(v, inverse);
    if (floats_) {
      const __m512i ew = _mm512_max_epi32(exponent_fields16(w), step_floor_);
      const __m512 magic = _mm512_castsi512_ps(_mm512_add_epi32(ew, magic_offset_));
      const __m512 r = _mm512_sub_ps(_mm512_add_ps(w, magic), magic);
      return _mm512_mul_ps(_mm512_range_ps(r, max_norm_, 0x02), d);  // min |.|, sign of r
    }
    const __m512 magic = _mm512_set1_ps(196608.0f);  // 1.5 * 2^23 * 2^-6
    const __mmask16 nonzero = _mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    const __m512 r = _mm512_mask_sub_ps(w, nonzero, _mm512_add_ps(w, magic), magic);
    const __m512 clamped = _mm512_max_ps(_mm512_min_ps(r, _mm512_set1_ps(127.0f / 64.0f)), int8_lo_);
    return _mm512_mul_ps(clamped, d);
  }

  // squared_error's sum over the 32 values: the same tree (halves of 16, 8, 4, 2, 1 added element
  // by element) in double.
  static double squared_error(__m512 x0, __m512 x1, __m512 y0, __m512 y1) {
    auto squares = [](__m256 x, __m256 y) {
      const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(x), _mm512_cvtps_pd(y));
      return _mm512_mul_pd(d, d);
    };
    const __m512d s0 = squares(_mm512_castps512_ps256(x0), _mm512_castps512_ps256(y0));
    const __m512d s1 = squares(_mm512_extractf32x8_ps(x0, 1), _mm512_extractf32x8_ps(y0, 1));
    const __m512d s2 = squares(_mm512_castps512_ps256(x1), _mm512_castps512_ps256(y1));
    const __m512d s3 = squares(_mm512_extractf32x8_ps(x1, 1), _mm512_extractf32x8_ps(y1, 1));
    const __m512d h8 = _mm512_add_pd(_mm512_add_pd(s0, s2), _mm512_add_pd(s1, s3));  // halves of 16, then 8
    const __m256d h4 = _mm256_add_pd(_mm512_castpd512_pd256(h8), _mm512_extractf64x4_pd(h8, 1));
    const __m128d h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h2, _mm_unpackhi_pd(h2, h2)));
  }

  bool floats_;
  int emax_;
  bool min_error_;
  __m512i scale_lo_, scale_span_, emax_bits_, inverse_base_, step_floor_, magic_offset_;
  __m512 max_norm_, int8_lo_, largest_;
};
#pragma GCC diagnostic pop
#endif

// ---------------------------------------------------------------------------------------------
// Tensor handling shared by both ops.

// Calls blocks(in, out, block_size, count) on every block of x along `axis`, `count` consecutive
// blocks at a time (both buffers count * block_size long, the input zero-padded past the end of a
// line), writing the results to y. Where the blocks are strided, `lanes` (when not nullptr) takes
// kLanes of them side by side in place: lanes(x, y, stride, rows) (rows <= kMaxLaneRows). Where
// a contiguous line ends in a short block of n values, `short_block` (when not nullptr) takes it
// in place, as if padded with zeros: short_block(x, y, n).
template <class BlockFn, class LanesFn = std::nullptr_t, class ShortFn = std::nullptr_t>
void for_each_block(int threads, const float* x, float* y, const std::vector<int64_t>& dims, int64_t axis,
                    int64_t block_size, BlockFn&& blocks, LanesFn&& lanes = nullptr, ShortFn&& short_block = nullptr) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t len = dims[axis];
  const int64_t per_line = (len + block_size - 1) / block_size;
  const int64_t count = outer * inner * per_line;
  if (inner == 1 && len % block_size == 0) {  // contiguous whole blocks: straight from x to y
    parallel_for(threads, count, kMinBlocksPerThread,
                 [&](int64_t b, int64_t e) { blocks(x + b * block_size, y + b * block_size, block_size, e - b); });
    return;
  }
  if (inner == 1) {  // contiguous lines (channels last) ending in a short block: that one padded
    const int64_t whole = len / block_size, rest = len - whole * block_size;
    parallel_for(threads, outer, std::max<int64_t>(1, kMinBlocksPerThread / per_line), [&](int64_t b, int64_t e) {
      std::vector<float> in(static_cast<size_t>(block_size), 0.0f), out(in.size());
      for (int64_t line = b; line < e; ++line) {
        const float* a = x + line * len;
        float* c = y + line * len;
        if (whole > 0) blocks(a, c, block_size, whole);
        if constexpr (!std::is_same_v<std::decay_t<ShortFn>, std::nullptr_t>) {
          short_block(a + whole * block_size, c + whole * block_size, rest);
        } else {
          std::copy(a + whole * block_size, a + len, in.begin());
          blocks(in.data(), out.data(), block_size, 1);
          std::copy(out.begin(), out.begin() + rest, c + whole * block_size);
        }
      }
    });
    return;
  }
  // Otherwise tiles of up to kTileLines lines side by side: runs of kLanes lines go to `lanes`,
  // the others are transposed into whole blocks (strided reads one block at a time would fetch
  // every cache line block_size times, and power-of-two strides evict each other).
  constexpr bool kHasLanes = !std::is_same_v<std::decay_t<LanesFn>, std::nullptr_t>;
  const bool use_lanes = kHasLanes && block_size <= kMaxLaneRows;
  const int64_t tiles_per_block_row = (inner + kTileLines - 1) / kTileLines;
  const int64_t tasks = outer * per_line * tiles_per_block_row;
  const int64_t tile = std::min(inner, kTileLines);
  parallel_for(threads, tasks, std::max<int64_t>(1, kMinBlocksPerThread / tile), [&](int64_t b, int64_t e) {
    std::vector<float> in(static_cast<size_t>(block_size * tile)), out(in.size());
    for (int64_t k = b; k < e; ++k) {
      int64_t i0 = (k % tiles_per_block_row) * kTileLines;
      const int64_t first = (k / tiles_per_block_row % per_line) * block_size;
      const int64_t o = k / (tiles_per_block_row * per_line);
      const int64_t end = std::min(i0 + kTileLines, inner);
      const int64_t filled = std::min(block_size, len - first);
      if constexpr (kHasLanes) {
        if (use_lanes)
          for (; i0 + kLanes <= end; i0 += kLanes) {
            const int64_t at = (o * len + first) * inner + i0;
            lanes(x + at, y + at, inner, filled);
          }
      }
      const int64_t lines = end - i0;
      if (lines == 0) continue;
      const int64_t base = (o * len + first) * inner + i0;
      for (int64_t j = 0; j < filled; ++j) {
        const float* row = x + base + j * inner;
        for (int64_t t = 0; t < lines; ++t) in[t * block_size + j] = row[t];
      }
      for (int64_t t = 0; t < lines; ++t)
        std::fill(in.begin() + t * block_size + filled, in.begin() + (t + 1) * block_size, 0.0f);
      blocks(in.data(), out.data(), block_size, lines);
      for (int64_t j = 0; j < filled; ++j) {
        float* row = y + base + j * inner;
        for (int64_t t = 0; t < lines; ++t) row[t] = out[t * block_size + j];
      }
    }
  });
}

// for_each_block's function of `count` blocks from `block(in, out, n)` of one.
template <class OneBlock>
auto each_block(OneBlock block) {
  return [block](const float* x, float* y, int64_t n, int64_t count) {
    for (int64_t b = 0; b < count; ++b) block(x + b * n, y + b * n, n);
  };
}

// Calls fn(std::integral_constant<Rounding, ...>) for the rounding mode.
template <class F>
void visit_rounding(Rounding r, F&& fn) {
  switch (r) {
    case Rounding::HalfAway:
      fn(std::integral_constant<Rounding, Rounding::HalfAway>{});
      break;
    case Rounding::HalfUp:
      fn(std::integral_constant<Rounding, Rounding::HalfUp>{});
      break;
    case Rounding::HalfEven:
      fn(std::integral_constant<Rounding, Rounding::HalfEven>{});
      break;
  }
}

Rounding read_rounding(const ir::Node& node) {
  const int64_t mode = node.attr_int("rounding_mode", 0);
  if (mode < 0 || mode > 2)
    throw Error("rounding_mode " + std::to_string(mode) +
                " is not 0 (half away from zero), 1 (half up) or 2 (half to even)");
  return static_cast<Rounding>(mode);
}

int64_t read_block_size(const ir::Node& node, int64_t fallback) {
  const int64_t size = node.attr_int("block_size", fallback);
  if (size < 1 || size > kMaxBlockSize)
    throw Error("block_size " + std::to_string(size) + " is outside [1, " + std::to_string(kMaxBlockSize) + "]");
  return size;
}

// The float32 input (float16 converted), its original type, and the output: the input itself when
// it has one element, else blocks quantized by `block` into a new tensor.
template <class BlockFn, class LanesFn = std::nullptr_t, class ShortFn = std::nullptr_t>
Tensor fake_quantize_blocks(const RunContext& ctx, const Tensor& x_in, int64_t axis_attr, int64_t block_size,
                            bool to_bfloat16_first, BlockFn&& block, LanesFn&& lanes = nullptr,
                            ShortFn&& short_block = nullptr) {
  if (x_in.dtype() != DataType::Float && x_in.dtype() != DataType::Float16)
    throw Error("the input x has type " + std::string(ir::data_type_name(x_in.dtype())) +
                ", expected float or float16");
  Tensor x = as_float32(x_in);
  if (to_bfloat16_first) {
    Tensor rounded = Tensor::uninitialized(DataType::Float, x.dims());
    auto src = x.values<float>();
    auto dst = rounded.mutable_values<float>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = quark_round_to_bfloat16(src[i]);
    x = std::move(rounded);
  }
  if (x.size() <= 1) return float32_as(x, x_in.dtype());
  const auto rank = static_cast<int64_t>(x.rank());
  const int64_t axis = rank == 1 ? 0 : normalize_axis(axis_attr, rank);
  Tensor y = Tensor::uninitialized(DataType::Float, x.dims());
  for_each_block(ctx.threads, x.values<float>().data(), y.mutable_values<float>().data(), x.dims(), axis, block_size,
                 block, lanes, short_block);
  return float32_as(y, x_in.dtype());
}

// BFPQuantizeDequantize (com.amd.quark v1): x -> y of x's type and shape.
class BfpQuantizeDequantizeKernel : public Kernel {
 public:
  explicit BfpQuantizeDequantizeKernel(const KernelInfo& info) {
    const ir::Node& node = info.node;
    const std::string method = node.attr_string("bfp_method", "to_bfp");
    if (method == "to_bfp")
      prime_ = false;
    else if (method == "to_bfp_prime" || method == "to_bfp_prime_shared")
      prime_ = true;
    else
      throw Error("bfp_method '" + method + "' is not to_bfp or to_bfp_prime");
    axis_ = node.attr_int("axis", 1);
    const int64_t bit_width = node.attr_int("bit_width", 16);
    if (bit_width < 10 || bit_width > 32)
      throw Error("bit_width " + std::to_string(bit_width) + " is outside [10, 32] (8 exponent bits, a sign, 1 to 23 " +
                  "mantissa bits)");
    m_ = static_cast<int>(bit_width - 9);
    block_size_ = read_block_size(node, 8);
    rounding_ = read_rounding(node);
    sub_block_size_ = node.attr_int("sub_block_size", 2);
    const int64_t shift_bits = node.attr_int("sub_block_shift_bits", 1);
    if (prime_) {
      if (sub_block_size_ < 1 || block_size_ % sub_block_size_ != 0)
        throw Error("sub_block_size " + std::to_string(sub_block_size_) + " does not divide block_size " +
                    std::to_string(block_size_));
      if (shift_bits < 0 || shift_bits > 8)
        throw Error("sub_block_shift_bits " + std::to_string(shift_bits) + " is outside [0, 8]");
    }
    max_shift_ = prime_ ? (1u << shift_bits) - 1 : 0;
    to_bfloat16_first_ = node.attr_int("convert_to_bfloat_before_bfp", 0) != 0;
    compiler_version_ = node.attr_int("use_compiler_version_cpu_kernel", 0) != 0;
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    visit_rounding(rounding_, [&](auto r) {
      constexpr Rounding R = decltype(r)::value;
      const int m = m_;
      if (prime_) {
        const int64_t sub = sub_block_size_;
        const uint32_t max_shift = max_shift_;
        out[0] = fake_quantize_blocks(ctx, x, axis_, block_size_, to_bfloat16_first_,
                                      each_block([=](const float* a, float* b, int64_t n) {
                                        bfp_prime_block<R>(a, b, n, m, sub, max_shift);
                                      }));
      } else if (compiler_version_) {
        out[0] = fake_quantize_blocks(
            ctx, x, axis_, block_size_, to_bfloat16_first_,
            each_block([=](const float* a, float* b, int64_t n) { bfp_compiler_block<R>(a, b, n, m); }));
      } else {
        auto blocks = [=](const float* a, float* b, int64_t n, int64_t count) {
          bfp_blocks_of_size<R>(a, b, n, count, m);
        };
#if defined(__AVX2__)
        out[0] = fake_quantize_blocks(ctx, x, axis_, block_size_, to_bfloat16_first_, blocks,
                                      [=](const float* a, float* b, int64_t stride, int64_t rows) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
                                        bfp_lanes_avx512<R>(a, b, stride, rows, m);
#else
                                        bfp_lanes_avx2<R>(a, b, stride, rows, m);
#endif
                                      });
#else
        out[0] = fake_quantize_blocks(ctx, x, axis_, block_size_, to_bfloat16_first_, blocks);
#endif
      }
    });
  }

 private:
  bool prime_ = false;
  int64_t axis_ = 1;
  int m_ = 7;
  int64_t block_size_ = 8;
  Rounding rounding_ = Rounding::HalfAway;
  int64_t sub_block_size_ = 2;
  uint32_t max_shift_ = 1;
  bool to_bfloat16_first_ = false;
  bool compiler_version_ = false;
};

// onnxptq's two attributes beyond Quark's (absent, both 0: Quark's op): min_error_scale and
// symmetric_int8 (int8 elements in [-127, 127], the OCP reference emulator's range).
MxScaling read_mx_scaling(const ir::Node& node) {
  auto flag = [&](const char* name) {
    const int64_t v = node.attr_int(name, 0);
    if (v != 0 && v != 1) throw Error(std::string(name) + " " + std::to_string(v) + " is not 0 or 1");
    return v == 1;
  };
  return {.min_error_scale = flag("min_error_scale"), .int8_min = flag("symmetric_int8") ? -127.0f : -128.0f};
}

// MXQuantizeDequantize (com.amd.quark v1): x -> y of x's type and shape.
class MxQuantizeDequantizeKernel : public Kernel {
 public:
  explicit MxQuantizeDequantizeKernel(const KernelInfo& info)
      : format_(mx_element_format(info.node.attr_string("element_dtype", "int8"))),
        axis_(info.node.attr_int("axis", 1)),
        block_size_(read_block_size(info.node, 32)),
        rounding_(read_rounding(info.node)),
        scaling_(read_mx_scaling(info.node)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    visit_rounding(rounding_, [&](auto r) {
      constexpr Rounding R = decltype(r)::value;
      const MxElementFormat f = format_;
      const MxScaling scaling = scaling_;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
      if (block_size_ == 32 && MxEven32::applies(f, R)) {
        const MxEven32 even(f, scaling);
        auto blocks = [=](const float* a, float* b, int64_t, int64_t count) {
          even.blocks(a, b, count, [&](const float* p, float* q) { mx_block<R>(p, q, 32, f, scaling); });
        };
        auto one = [=](const float* p, float* q, int64_t n) { mx_block<R>(p, q, n, f, scaling); };
        auto short_block = [=](const float* a, float* b, int64_t n) {
          even.short_block(a, b, n, [&](const float* p, float* q, int64_t m) {
            float in[32] = {}, out[32];
            std::copy(p, p + m, in);
            one(in, out, 32);
            std::copy(out, out + m, q);
          });
        };
        if (scaling.min_error_scale) {
          out[0] = fake_quantize_blocks(ctx, x, axis_, 32, false, blocks, nullptr, short_block);
        } else {
          out[0] = fake_quantize_blocks(ctx, x, axis_, 32, false, blocks,
                                        [=](const float* a, float* b, int64_t stride, int64_t rows) {
                                          even.lanes(a, b, stride, rows, [&](uint32_t lanes) {
                                            each_lane_block(a, b, stride, rows, lanes, one);
                                          });
                                        },
                                        short_block);
        }
        return;
      }
#endif
      out[0] = fake_quantize_blocks(
          ctx, x, axis_, block_size_, false,
          each_block([=](const float* a, float* b, int64_t n) { mx_block<R>(a, b, n, f, scaling); }));
    });
  }

 private:
  MxElementFormat format_;
  int64_t axis_;
  int64_t block_size_;
  Rounding rounding_;
  MxScaling scaling_;
};

}  // namespace

MxElementFormat mx_element_format(const std::string& name) {
  if (name == "int8") return {0, 8, 0, 127.0f};
  if (name == "fp8_e5m2") return {5, 2, 15, 57344.0f};
  if (name == "fp8_e4m3") return {4, 3, 8, 448.0f};
  if (name == "fp6_e3m2") return {3, 2, 4, 28.0f};
  if (name == "fp6_e2m3") return {2, 3, 2, 7.5f};
  if (name == "fp4_e2m1") return {2, 1, 2, 6.0f};
  throw Error("element_dtype '" + name + "' is not int8, fp8_e5m2, fp8_e4m3, fp6_e3m2, fp6_e2m3 or fp4_e2m1");
}

bool is_block_quantize_node(const ir::Node& node) {
  return node.domain == "com.amd.quark" &&
         (node.op_type == "BFPQuantizeDequantize" || node.op_type == "MXQuantizeDequantize");
}

void register_quantize_block_kernels(KernelRegistry& r) {
  r.add("com.amd.quark", "BFPQuantizeDequantize", 1, 1, kernel_factory<BfpQuantizeDequantizeKernel>());
  r.add("com.amd.quark", "MXQuantizeDequantize", 1, 1, kernel_factory<MxQuantizeDequantizeKernel>());
}

namespace {

std::unique_ptr<Kernel> block_kernel(const ir::Node& node) {
  KernelInfo info{.node = node,
                  .opset = 1,
                  .constant_inputs = {nullptr},
                  .input_types = {},
                  .implicit_inputs = {},
                  .compile_subgraph = {},
                  .threads = 0};
  if (node.op_type == "BFPQuantizeDequantize") return std::make_unique<BfpQuantizeDequantizeKernel>(info);
  if (node.op_type == "MXQuantizeDequantize") return std::make_unique<MxQuantizeDequantizeKernel>(info);
  throw Error("'" + node.op_type + "' is not a block quantize op (BFPQuantizeDequantize, MXQuantizeDequantize)");
}

}  // namespace

BlockQuantizer::BlockQuantizer(const ir::Node& node) : kernel_(block_kernel(node)) {}
BlockQuantizer::~BlockQuantizer() = default;

Tensor BlockQuantizer::operator()(const Tensor& x, int threads) const {
  const Tensor* in[] = {&x};
  Tensor out[1];
  RunContext ctx;
  ctx.threads = threads;
  kernel_->run(ctx, in, out);
  return std::move(out[0]);
}

}  // namespace onnxptq::engine
