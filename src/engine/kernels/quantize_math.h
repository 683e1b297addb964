// The quantization arithmetic of the engine: the one place where floats become integers.
//
// Every kernel that quantizes (QuantizeLinear, the QLinear* ops, the requantization of integer
// convolutions and matrix products) and the quantizer's fake quantization go through these
// functions, so rounding and saturation are defined once:
//
//   q = saturate(round_half_even(x / scale) + zero_point)                 quantize_values
//   x = float(q - zero_point) * scale                                      dequantize_values
//   q = saturate(round_half_even(float(acc + bias) * multiplier) + zp)    requantize_values
//
// They are bit-exact with ONNX Runtime's CPU kernels (MLAS): the quotient is a float32 division
// (not a multiplication by 1/scale), it is clamped to [lo - zp, hi - zp] before rounding, and a
// NaN becomes the lowest value of the type (what MAXPS does with a NaN first operand). The bulk
// functions (quantize_math.cc) use SSE2 on x86-64 and give the same bits as the scalar ones.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace onnxptq::engine {

// The saturation range of a quantized type; 4-bit types are held one per byte in int8/uint8.
struct QuantRange {
  int32_t lo;
  int32_t hi;
};

template <class T>
constexpr QuantRange quant_range_of() {
  return {static_cast<int32_t>(std::numeric_limits<T>::lowest()), static_cast<int32_t>(std::numeric_limits<T>::max())};
}
inline constexpr QuantRange kInt4Range{-8, 7};
inline constexpr QuantRange kUInt4Range{0, 15};

// Round half to even of |v| <= 2^22 in the default rounding mode: adding 1.5 * 2^23 leaves no
// fraction bits, so the addition itself rounds.
inline float round_half_even_small(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

// Round half to even of any float (NaN and infinities pass through).
inline float round_half_even(float v) { return std::nearbyint(v); }

// saturate(round_half_even(v) + zp) for v already divided by the scale. Types up to 16 bits
// clamp in float, where the bounds are exact; 32-bit types clamp in double.
template <class T>
inline T quantize_scaled(float v, int32_t zp, QuantRange range = quant_range_of<T>()) {
  if constexpr (sizeof(T) <= 2) {
    const float lo = static_cast<float>(range.lo - zp);
    const float hi = static_cast<float>(range.hi - zp);
    v = v > lo ? v : lo;  // NaN -> lo
    v = v < hi ? v : hi;
    return static_cast<T>(static_cast<int32_t>(round_half_even_small(v)) + zp);
  } else {
    const double lo = static_cast<double>(range.lo) - zp;
    const double hi = static_cast<double>(range.hi) - zp;
    double d = v;
    d = d > lo ? d : lo;
    d = d < hi ? d : hi;
    return static_cast<T>(static_cast<int64_t>(std::nearbyint(d)) + zp);
  }
}

template <class T>
inline T quantize_value(float x, float scale, int32_t zp, QuantRange range = quant_range_of<T>()) {
  return quantize_scaled<T>(x / scale, zp, range);
}

template <class T>
inline float dequantize_value(T q, float scale, int32_t zp) {
  return static_cast<float>(static_cast<int64_t>(q) - zp) * scale;
}

template <class T>
inline T requantize_value(int32_t acc, float multiplier, int32_t zp) {
  return quantize_scaled<T>(static_cast<float>(acc) * multiplier, zp);
}

// Bulk versions, for T in int8, uint8, int16, uint16, int32, uint32 (quantize_math.cc).
// `range` narrows the saturation (symmetric int8 [-127, 127], 4-bit values held in int8 / uint8);
// by default it is T's. quantize_values with scale 1 and zero point 0 rounds and saturates values
// already computed in quantized units (x / 1 is exact).
template <class T>
void quantize_values(const float* x, int64_t n, float scale, int32_t zp, T* y, QuantRange range = quant_range_of<T>());
template <class T>
void dequantize_values(const T* q, int64_t n, float scale, int32_t zp, float* y);
template <class T>
void requantize_values(const int32_t* acc, int64_t n, int32_t bias, float multiplier, int32_t zp, T* y);
// y = dequantize(quantize(x)): fake quantization, through the same rounding as quantize_values.
template <class T>
void fake_quantize_values(const float* x, int64_t n, float scale, int32_t zp, float* y,
                          QuantRange range = quant_range_of<T>());

}  // namespace onnxptq::engine
