#include "ir/tensor.h"

#include "onnxptq/error.h"

namespace onnxptq {

int64_t checked_element_count(const std::vector<int64_t>& dims, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(std::string(what) + " " + dims_to_string(dims) + " has a negative size");
    if (d > 0 && n > kMaxElements / d)
      throw Error(std::string(what) + " " + dims_to_string(dims) + " is too large (over 2^48 elements)");
    n *= d;
  }
  return n;
}

int64_t element_count(const std::vector<int64_t>& dims) { return checked_element_count(dims, "shape"); }

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  if (dtype_ == DataType::String)
    strings_.resize(static_cast<size_t>(size()));
  else
    bytes_ = Bytes::zeros(data_type_bytes(dtype_, size()));
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> dims, Bytes data)
    : dtype_(dtype), dims_(std::move(dims)), bytes_(std::move(data)) {
  size_t expected = data_type_bytes(dtype_, size());
  if (dtype_ == DataType::String || bytes_.size() != expected)
    throw Error("tensor data of " + std::to_string(bytes_.size()) + " bytes does not fit shape " +
                dims_to_string(dims_) + " of " + std::string(data_type_name(dtype_)) + " (" +
                std::to_string(expected) + " bytes expected)");
}

Tensor Tensor::uninitialized(DataType dtype, std::vector<int64_t> dims) {
  if (dtype == DataType::String) return Tensor(dtype, std::move(dims));
  size_t bytes = data_type_bytes(dtype, element_count(dims));
  return Tensor(dtype, std::move(dims), Bytes::uninitialized(bytes));
}

Tensor Tensor::from_strings(std::vector<int64_t> dims, std::vector<std::string> values) {
  Tensor t(DataType::String, std::move(dims));
  if (values.size() != t.strings_.size())
    throw Error(std::to_string(values.size()) + " strings do not fit shape " + dims_to_string(t.dims_));
  t.strings_ = std::move(values);
  return t;
}

void Tensor::check_element_width(size_t width) const {
  if (dtype_ == DataType::String || static_cast<size_t>(data_type_bits(dtype_)) != width * 8)
    throw Error("tensor '" + name + "' of type " + std::string(data_type_name(dtype_)) +
                " read as elements of " + std::to_string(width) + " bytes");
}

}  // namespace onnxptq
