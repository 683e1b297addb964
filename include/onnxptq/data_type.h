// Element types of ONNX tensors, with the numbering of TensorProto.DataType (onnx.proto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace onnxptq {

enum class DataType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
};

inline constexpr int32_t kLastDataType = 22;

// True for the numbers 0..22 above; other numbers in a model are refused when read.
bool data_type_is_known(int32_t code);

// The ONNX spelling: "float", "uint8", "bfloat16", "float8e4m3fn", "int4", ...
std::string_view data_type_name(DataType type);

// Bits per element: 4 for int4/uint4, 0 for String (stored as strings) and Undefined.
int data_type_bits(DataType type);

// Bytes taken by `count` elements, rounded up for 4-bit types.
size_t data_type_bytes(DataType type, int64_t count);

}  // namespace onnxptq
