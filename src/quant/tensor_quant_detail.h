// Helpers shared by tensor_quant.cc and tensor_quant_weight.cc; not an API.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant::detail {

std::string type_name(ir::DataType t);
// Numbers in messages: enough digits to tell a scale from its neighbours.
std::string number_text(double v);
// "weight 'conv1.weight'", or just "weight" for an unnamed tensor.
std::string tensor_text(const ir::Tensor& t, const char* what);
[[noreturn]] void throw_not_quant_type(ir::DataType t);
// v as a value of `t` (Float, Float16, BFloat16), round to nearest even.
double round_to(ir::DataType t, double v);
// The type's full range, or the symmetric one for signed types (qmath::clip_range).
qmath::QRange saturation_range(ir::DataType type, Saturation s);

// Float values of x (float, float16, bfloat16): a view of float data, else a converted copy.
struct FloatValues {
  std::vector<float> own;
  std::span<const float> values;
};

FloatValues float_values(const ir::Tensor& x, const char* what);

// x seen as [outer, channels, inner] around the axis (channels = 1, inner = all: per tensor).
struct Layout {
  int64_t outer = 1, channels = 1, inner = 1;
  std::optional<int64_t> axis;
};

// Error for an axis out of range, naming the tensor.
Layout layout_of(const ir::Tensor& x, std::optional<int64_t> axis, const char* what);

}  // namespace onnxptq::quant::detail
