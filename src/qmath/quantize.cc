// Bulk quantization arithmetic (see quantize.h): SSE2 loops on x86-64 that do what MLAS
// does (DIVPS, MAXPS / MINPS against the zero-point-shifted bounds, CVTPS2DQ rounding half to
// even, saturating packs), and the scalar functions of the header elsewhere and for the tails.
#include "qmath/quantize.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace onnxptq::qmath {
namespace {

#if defined(__SSE2__)

// Four vectors of int32 (already inside T's range) stored as 16 values of T.
template <class T>
inline void store16(const __m128i q[4], T* y) {
  if constexpr (sizeof(T) == 1) {
    __m128i a = _mm_packs_epi32(q[0], q[1]), b = _mm_packs_epi32(q[2], q[3]);
    __m128i bytes = std::is_signed_v<T> ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bytes);
  } else if constexpr (std::is_signed_v<T>) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm_packs_epi32(q[0], q[1]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 8), _mm_packs_epi32(q[2], q[3]));
  } else {
    // uint16: shift to int16's range, pack with signed saturation (nothing saturates), shift back.
    const __m128i bias = _mm_set1_epi32(32768), flip = _mm_set1_epi16(static_cast<int16_t>(0x8000));
    __m128i a = _mm_packs_epi32(_mm_sub_epi32(q[0], bias), _mm_sub_epi32(q[1], bias));
    __m128i b = _mm_packs_epi32(_mm_sub_epi32(q[2], bias), _mm_sub_epi32(q[3], bias));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm_xor_si128(a, flip));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 8), _mm_xor_si128(b, flip));
  }
}

// 16 values of T as four vectors of int32.
template <class T>
inline void load16(const T* q, __m128i out[4]) {
  if constexpr (sizeof(T) == 1) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    __m128i lo, hi;
    if constexpr (std::is_signed_v<T>) {
      lo = _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8);
      hi = _mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8);
    } else {
      lo = _mm_unpacklo_epi8(v, _mm_setzero_si128());
      hi = _mm_unpackhi_epi8(v, _mm_setzero_si128());
    }
    __m128i halves[2] = {lo, hi};
    for (int k = 0; k < 2; ++k) {
      if constexpr (std::is_signed_v<T>) {
        out[2 * k] = _mm_srai_epi32(_mm_unpacklo_epi16(halves[k], halves[k]), 16);
        out[2 * k + 1] = _mm_srai_epi32(_mm_unpackhi_epi16(halves[k], halves[k]), 16);
      } else {
        out[2 * k] = _mm_unpacklo_epi16(halves[k], _mm_setzero_si128());
        out[2 * k + 1] = _mm_unpackhi_epi16(halves[k], _mm_setzero_si128());
      }
    }
  } else {
    for (int k = 0; k < 2; ++k) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 8 * k));
      if constexpr (std::is_signed_v<T>) {
        out[2 * k] = _mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16);
        out[2 * k + 1] = _mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16);
      } else {
        out[2 * k] = _mm_unpacklo_epi16(v, _mm_setzero_si128());
        out[2 * k + 1] = _mm_unpackhi_epi16(v, _mm_setzero_si128());
      }
    }
  }
}

// round(v) + zp for v already clamped to [lo - zp, hi - zp].
inline __m128i round_add(__m128 v, __m128 lo, __m128 hi, __m128i zp) {
  v = _mm_max_ps(v, lo);  // a NaN in v gives lo
  v = _mm_min_ps(v, hi);
  return _mm_add_epi32(_mm_cvtps_epi32(v), zp);
}

#endif

template <class T>
constexpr bool kSmall = sizeof(T) <= 2;

}  // namespace

template <class T>
void quantize_values(const float* x, int64_t n, float scale, int32_t zp, T* y, QRange r) {
  int64_t i = 0;
#if defined(__SSE2__)
  // Values clamped to r (inside T's range) pass the saturating packs unchanged.
  if constexpr (kSmall<T>) {
    const __m128 s = _mm_set1_ps(scale);
    const __m128 lo = _mm_set1_ps(static_cast<float>(r.min - zp)), hi = _mm_set1_ps(static_cast<float>(r.max - zp));
    const __m128i z = _mm_set1_epi32(zp);
    for (; i + 16 <= n; i += 16) {
      __m128i q[4];
      for (int k = 0; k < 4; ++k) q[k] = round_add(_mm_div_ps(_mm_loadu_ps(x + i + 4 * k), s), lo, hi, z);
      store16<T>(q, y + i);
    }
  }
#endif
  for (; i < n; ++i) y[i] = quantize_scaled<T>(x[i] / scale, zp, r);
}

template <class T>
void dequantize_values(const T* q, int64_t n, float scale, int32_t zp, float* y) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (kSmall<T>) {
    const __m128 s = _mm_set1_ps(scale);
    const __m128i z = _mm_set1_epi32(zp);
    for (; i + 16 <= n; i += 16) {
      __m128i v[4];
      load16<T>(q + i, v);
      for (int k = 0; k < 4; ++k)
        _mm_storeu_ps(y + i + 4 * k, _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(v[k], z)), s));
    }
  }
#endif
  for (; i < n; ++i) y[i] = dequantize_value<T>(q[i], scale, zp);
}

template <class T>
void requantize_values(const int32_t* acc, int64_t n, int32_t bias, float multiplier, int32_t zp, T* y) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (kSmall<T>) {
    constexpr QRange r = quant_range_of<T>();
    const __m128 m = _mm_set1_ps(multiplier);
    const __m128 lo = _mm_set1_ps(static_cast<float>(r.min - zp)), hi = _mm_set1_ps(static_cast<float>(r.max - zp));
    const __m128i z = _mm_set1_epi32(zp), b = _mm_set1_epi32(bias);
    for (; i + 16 <= n; i += 16) {
      __m128i q[4];
      for (int k = 0; k < 4; ++k) {
        __m128i a = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + i + 4 * k)), b);
        q[k] = round_add(_mm_mul_ps(_mm_cvtepi32_ps(a), m), lo, hi, z);
      }
      store16<T>(q, y + i);
    }
  }
#endif
  // acc + bias wraps around in 32 bits, as the vector addition above does (signed overflow would
  // be undefined).
  for (; i < n; ++i)
    y[i] = requantize_value<T>(static_cast<int32_t>(static_cast<uint32_t>(acc[i]) + static_cast<uint32_t>(bias)),
                               multiplier, zp);
}

template <class T>
void fake_quantize_values(const float* x, int64_t n, float scale, int32_t zp, float* y, QRange range) {
  constexpr int64_t kChunk = 512;
  T q[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    int64_t m = n - i < kChunk ? n - i : kChunk;
    quantize_values<T>(x + i, m, scale, zp, q, range);
    dequantize_values<T>(q, m, scale, zp, y + i);
  }
}

#define ONNXPTQ_QUANTIZE_MATH(T)                                                                \
  template void quantize_values<T>(const float*, int64_t, float, int32_t, T*, QRange);          \
  template void fake_quantize_values<T>(const float*, int64_t, float, int32_t, float*, QRange); \
  template void dequantize_values<T>(const T*, int64_t, float, int32_t, float*);                \
  template void requantize_values<T>(const int32_t*, int64_t, int32_t, float, int32_t, T*);
ONNXPTQ_QUANTIZE_MATH(int8_t)
ONNXPTQ_QUANTIZE_MATH(uint8_t)
ONNXPTQ_QUANTIZE_MATH(int16_t)
ONNXPTQ_QUANTIZE_MATH(uint16_t)
ONNXPTQ_QUANTIZE_MATH(int32_t)
ONNXPTQ_QUANTIZE_MATH(uint32_t)
#undef ONNXPTQ_QUANTIZE_MATH

void pack_4bit(const int8_t* values, int64_t n, std::byte* out) {
  for (int64_t i = 0; i < n; i += 2) {
    auto lo = static_cast<uint8_t>(values[i]) & 0x0F;
    auto hi = i + 1 < n ? static_cast<uint8_t>(values[i + 1]) & 0x0F : 0;
    out[i / 2] = static_cast<std::byte>(lo | (hi << 4));
  }
}

void unpack_4bit(const std::byte* packed, int64_t n, bool is_signed, int8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    int v = (static_cast<uint8_t>(packed[i / 2]) >> (i % 2 == 0 ? 0 : 4)) & 0x0F;
    out[i] = static_cast<int8_t>(is_signed && v >= 8 ? v - 16 : v);
  }
}

}  // namespace onnxptq::qmath
