// Element types (the public onnxptq/data_type.h) and, for the library, visits over the C++ type of
// an element type.
#pragma once

#include <cstdint>
#include <string>

#include "onnxptq/data_type.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {

using onnxptq::DataType;
using onnxptq::data_type_bits;
using onnxptq::data_type_bytes;
using onnxptq::data_type_is_known;
using onnxptq::data_type_name;
using onnxptq::kLastDataType;

// Sets of the numeric types with a C++ element type, for visit_type.
enum class TypeSet { Float = 1, Signed = 2, FloatSigned = 3, Unsigned = 4, Integer = 6, Numeric = 7 };
constexpr bool has(TypeSet set, TypeSet part) { return (static_cast<int>(set) & static_cast<int>(part)) != 0; }

// Calls f(T{}) with the C++ type of `t` (float, double, int8_t ... uint64_t) when `t` is in kSet,
// else Error naming `what` and `t`.
template <TypeSet kSet, class F>
decltype(auto) visit_type(DataType t, const std::string& what, F&& f) {
  if constexpr (has(kSet, TypeSet::Float)) {
    if (t == DataType::Float) return f(float{});
    if (t == DataType::Double) return f(double{});
  }
  if constexpr (has(kSet, TypeSet::Signed)) {
    if (t == DataType::Int8) return f(int8_t{});
    if (t == DataType::Int16) return f(int16_t{});
    if (t == DataType::Int32) return f(int32_t{});
    if (t == DataType::Int64) return f(int64_t{});
  }
  if constexpr (has(kSet, TypeSet::Unsigned)) {
    if (t == DataType::UInt8) return f(uint8_t{});
    if (t == DataType::UInt16) return f(uint16_t{});
    if (t == DataType::UInt32) return f(uint32_t{});
    if (t == DataType::UInt64) return f(uint64_t{});
  }
  throw Error(what + " does not support element type " + std::string(data_type_name(t)));
}

}  // namespace onnxptq::ir
