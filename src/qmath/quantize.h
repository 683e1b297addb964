// The quantization arithmetic: the one place where floats become integers.
//
// Every engine kernel that quantizes (QuantizeLinear, the QLinear* ops, the requantization of integer
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
// functions (quantize.cc) use SSE2 on x86-64 and give the same bits as the scalar ones.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "ir/data_type.h"
#include "onnxptq/error.h"

namespace onnxptq::qmath {

// An integer range [min, max]: the values a quantized type saturates to (4-bit types are held
// one per byte in int8/uint8), or the narrower ones a quantizer allows (params.h).
struct QRange {
  int64_t min = 0;
  int64_t max = 0;
};

template <class T>
constexpr QRange quant_range_of() {
  return {static_cast<int64_t>(std::numeric_limits<T>::lowest()), static_cast<int64_t>(std::numeric_limits<T>::max())};
}
inline constexpr QRange kInt4Range{-8, 7};
inline constexpr QRange kUInt4Range{0, 15};

// The 4-bit types packed as the ONNX specification stores int4 / uint4 tensors: two elements a
// byte, element 2i in the low nibble and 2i + 1 in the high one, the last high nibble 0 when the
// count is odd. Values are held one per byte (int8 / uint8) while they are computed.
inline bool is_4bit_type(ir::DataType t) { return t == ir::DataType::Int4 || t == ir::DataType::UInt4; }
// The int8 / uint8 type holding one 4-bit value while it is computed.
inline ir::DataType holder_of_4bit(ir::DataType t) {
  return t == ir::DataType::Int4 ? ir::DataType::Int8 : ir::DataType::UInt8;
}
void pack_4bit(const int8_t* values, int64_t n, std::byte* out);      // values in [-8, 15]: the low nibble kept
void unpack_4bit(const std::byte* packed, int64_t n, bool is_signed, int8_t* out);  // sign-extended when signed

// Calls fn(T{}) with T the C++ type holding one element of a quantized type (int8_t, uint8_t,
// int16_t, uint16_t, int32_t); Error naming `what` for any other type.
template <class F>
decltype(auto) visit_quant_type(ir::DataType type, const std::string& what, F&& fn) {
  using ir::DataType;
  switch (type) {
    case DataType::Int8: return fn(int8_t{});
    case DataType::UInt8: return fn(uint8_t{});
    case DataType::Int16: return fn(int16_t{});
    case DataType::UInt16: return fn(uint16_t{});
    case DataType::Int32: return fn(int32_t{});
    default:
      throw Error(what + " has type " + std::string(ir::data_type_name(type)) +
                  ", expected int8, uint8, int16, uint16 or int32");
  }
}

// The same with uint32_t too, for the custom Q/DQ ops of vai_q_onnx and Quark and the quantizer's
// tensors (the standard ops stop at int32).
template <class F>
decltype(auto) visit_integer_quant_type(ir::DataType type, const std::string& what, F&& fn) {
  using ir::DataType;
  switch (type) {
    case DataType::Int8: return fn(int8_t{});
    case DataType::UInt8: return fn(uint8_t{});
    case DataType::Int16: return fn(int16_t{});
    case DataType::UInt16: return fn(uint16_t{});
    case DataType::Int32: return fn(int32_t{});
    case DataType::UInt32: return fn(uint32_t{});
    default:
      throw Error(what + " has type " + std::string(ir::data_type_name(type)) +
                  ", expected int8, uint8, int16, uint16, int32 or uint32");
  }
}

// Calls fn(T{}) for int8 or uint8 only (the QLinear ops and the integer convolutions).
template <class F>
decltype(auto) visit_8bit_type(ir::DataType type, const std::string& what, F&& fn) {
  using ir::DataType;
  switch (type) {
    case DataType::Int8: return fn(int8_t{});
    case DataType::UInt8: return fn(uint8_t{});
    default:
      throw Error(what + " has type " + std::string(ir::data_type_name(type)) + ", expected int8 or uint8");
  }
}

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
inline T quantize_scaled(float v, int32_t zp, QRange range = quant_range_of<T>()) {
  if constexpr (sizeof(T) <= 2) {
    const float lo = static_cast<float>(range.min - zp);
    const float hi = static_cast<float>(range.max - zp);
    v = v > lo ? v : lo;  // NaN -> lo
    v = v < hi ? v : hi;
    return static_cast<T>(static_cast<int32_t>(round_half_even_small(v)) + zp);
  } else {
    const double lo = static_cast<double>(range.min) - zp;
    const double hi = static_cast<double>(range.max) - zp;
    double d = v;
    d = d > lo ? d : lo;
    d = d < hi ? d : hi;
    return static_cast<T>(static_cast<int64_t>(std::nearbyint(d)) + zp);
  }
}

template <class T>
inline T quantize_value(float x, float scale, int32_t zp, QRange range = quant_range_of<T>()) {
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

// Bulk versions, for T in int8, uint8, int16, uint16, int32, uint32 (quantize.cc).
// `range` narrows the saturation (symmetric int8 [-127, 127], 4-bit values held in int8 / uint8);
// by default it is T's. quantize_values with scale 1 and zero point 0 rounds and saturates values
// already computed in quantized units (x / 1 is exact).
template <class T>
void quantize_values(const float* x, int64_t n, float scale, int32_t zp, T* y, QRange range = quant_range_of<T>());
template <class T>
void dequantize_values(const T* q, int64_t n, float scale, int32_t zp, float* y);
template <class T>
void requantize_values(const int32_t* acc, int64_t n, int32_t bias, float multiplier, int32_t zp, T* y);
// y = dequantize(quantize(x)): fake quantization, through the same rounding as quantize_values.
template <class T>
void fake_quantize_values(const float* x, int64_t n, float scale, int32_t zp, float* y,
                          QRange range = quant_range_of<T>());

}  // namespace onnxptq::qmath
