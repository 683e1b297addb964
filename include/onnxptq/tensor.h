// A tensor value: element type, dimensions and data (shared, copy-on-write). Copies share the
// data; the first write through mutable_values() or mutable_bytes() copies it if it is shared.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "onnxptq/bytes.h"
#include "onnxptq/data_type.h"

namespace onnxptq {

// Shapes come from files and users. Past this many elements (beyond any memory, far below the
// overflow of int64) a shape is refused, so that no element count or byte size derived from one wraps.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Number of elements of a shape; 1 for a scalar (rank 0). Throws Error, naming the shape as
// `what`, for a negative size or more than kMaxElements elements.
int64_t checked_element_count(const std::vector<int64_t>& dims, std::string_view what);
int64_t element_count(const std::vector<int64_t>& dims);

// "[1,3,224,224]"
std::string dims_to_string(const std::vector<int64_t>& dims);

template <class T>
constexpr DataType data_type_of();
template <>
constexpr DataType data_type_of<float>() {
  return DataType::Float;
}
template <>
constexpr DataType data_type_of<double>() {
  return DataType::Double;
}
template <>
constexpr DataType data_type_of<int8_t>() {
  return DataType::Int8;
}
template <>
constexpr DataType data_type_of<uint8_t>() {
  return DataType::UInt8;
}
template <>
constexpr DataType data_type_of<int16_t>() {
  return DataType::Int16;
}
template <>
constexpr DataType data_type_of<uint16_t>() {
  return DataType::UInt16;
}
template <>
constexpr DataType data_type_of<int32_t>() {
  return DataType::Int32;
}
template <>
constexpr DataType data_type_of<uint32_t>() {
  return DataType::UInt32;
}
template <>
constexpr DataType data_type_of<int64_t>() {
  return DataType::Int64;
}
template <>
constexpr DataType data_type_of<uint64_t>() {
  return DataType::UInt64;
}
template <>
constexpr DataType data_type_of<bool>() {
  return DataType::Bool;
}

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled (or empty strings).
  Tensor(DataType dtype, std::vector<int64_t> dims);
  // Takes `data`, which must hold exactly the bytes the shape needs (throws Error if not).
  Tensor(DataType dtype, std::vector<int64_t> dims, Bytes data);

  // Contents undefined until written (not for String).
  static Tensor uninitialized(DataType dtype, std::vector<int64_t> dims);
  static Tensor from_strings(std::vector<int64_t> dims, std::vector<std::string> values);
  template <class T>
  static Tensor from_values(std::vector<int64_t> dims, std::span<const T> values) {
    return Tensor(data_type_of<T>(), std::move(dims), Bytes::copy_of(values.data(), values.size_bytes()));
  }
  template <class T>
  static Tensor from_values(std::vector<int64_t> dims, const std::vector<T>& values) {
    return from_values(std::move(dims), std::span<const T>(values));
  }

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  size_t rank() const { return dims_.size(); }
  int64_t size() const { return element_count(dims_); }
  size_t byte_size() const { return bytes_.size(); }

  const Bytes& bytes() const { return bytes_; }
  std::byte* mutable_bytes() { return bytes_.mutable_data(); }

  // Typed access; T must have the element's width (uint16_t serves float16 and bfloat16).
  template <class T>
  std::span<const T> values() const {
    check_element_width(sizeof(T));
    return {reinterpret_cast<const T*>(bytes_.data()), static_cast<size_t>(size())};
  }
  template <class T>
  std::span<T> mutable_values() {
    check_element_width(sizeof(T));
    return {reinterpret_cast<T*>(bytes_.mutable_data()), static_cast<size_t>(size())};
  }
  const std::vector<std::string>& string_values() const { return strings_; }
  std::vector<std::string>& mutable_string_values() { return strings_; }

  // Fields of TensorProto kept so that a model survives a load and save unchanged.
  std::string name;
  std::string doc_string;

 private:
  void check_element_width(size_t width) const;

  DataType dtype_ = DataType::Float;
  std::vector<int64_t> dims_;
  Bytes bytes_;
  std::vector<std::string> strings_;  // DataType::String only
};

}  // namespace onnxptq
