// Private helpers of the reduce family (reduce.cc, reduce_softmax.cc, reduce_arg.cc).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/kernel.h"

namespace onnxptq::engine {

void reduce_register_softmax(KernelRegistry& r);  // Softmax, LogSoftmax, Hardmax
void reduce_register_arg(KernelRegistry& r);      // ArgMax, ArgMin, TopK, CumSum

// A tensor seen as [outer, n, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit reduce_split_at_axis(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis) s.outer *= dims[i];
    else if (i == axis) s.n = dims[i];
    else s.inner *= dims[i];
  }
  return s;
}

// Calls f(std::type_identity<T>{}) for the C++ type T of `type` among Ts; false if none matches.
template <class... Ts, class F>
bool reduce_visit_type(DataType type, F&& f) {
  return ((type == ir::data_type_of<Ts>() ? (f(std::type_identity<Ts>{}), true) : false) || ...);
}

inline bool reduce_is_half(DataType t) { return t == DataType::Float16 || t == DataType::BFloat16; }

inline std::string reduce_type_name(DataType t) { return std::string(ir::data_type_name(t)); }

// NaN-propagating max and min (std::max drops a NaN in its second argument); written as
// selects so that loops of them vectorise.
template <class T> inline T reduce_max_nan(T a, T b) { return (b > a || b != b) ? b : a; }
template <class T> inline T reduce_min_nan(T a, T b) { return (b < a || b != b) ? b : a; }

// exp(x) in float for x <= 0 (Softmax shifts by the row maximum), as plain arithmetic that
// vectorises: x = n*ln2 + f, |f| <= ln2/2, exp(f) by a degree-6 polynomial (relative error
// below 1e-7), 2^n put into the exponent bits. Below -87.3 the result is 0; NaN stays NaN. The
// clamps work on the bits as integers: float selects feeding arithmetic do not vectorise
// under the default -ftrapping-math.
inline float reduce_exp_nonpositive(float x) {
  constexpr int32_t kLimit = std::bit_cast<int32_t>(-87.3f);
  // Negative floats as int32 grow towards zero as the float goes further below zero.
  const int32_t bits = std::bit_cast<int32_t>(x) | INT32_MIN;  // -|x|
  const float xc = std::bit_cast<float>(bits < kLimit ? bits : kLimit);
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to integer
  const float f = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * f + 1.3981999507e-3f;
  p = p * f + 8.3334519073e-3f;
  p = p * f + 4.1665795894e-2f;
  p = p * f + 1.6666665459e-1f;
  p = p * f + 5.0000001201e-1f;
  p = p * f * f + f + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  int32_t y = std::bit_cast<int32_t>(p * scale);
  y &= -static_cast<int32_t>(bits <= kLimit);                          // underflow: 0
  y |= -static_cast<int32_t>((bits & 0x7fffffff) > 0x7f800000);        // NaN
  return std::bit_cast<float>(y);
}

}  // namespace onnxptq::engine
