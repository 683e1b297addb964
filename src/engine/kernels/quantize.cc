// The quantize kernel family: Q/DQ (quantize_linear.cc), integer convolutions and matrix
// products (quantize_integer.cc), the com.microsoft QLinear ops (quantize_qlinear.cc), the custom
// Q/DQ ops of vai_q_onnx and Quark (quantize_custom.cc), Quark's block formats BFP and MX
// (quantize_block.cc), and the helpers they share.
#include "engine/kernels/quantize.h"

#include <cmath>

namespace onnxptq::engine {

void register_quantize_kernels(KernelRegistry& r) {
  register_quantize_linear_kernels(r);
  register_quantize_integer_kernels(r);
  register_quantize_qlinear_kernels(r);
  register_quantize_pool_kernels(r);
  register_quantize_custom_kernels(r);
  register_quantize_block_kernels(r);
}

void check_scalar(const Tensor& t, const std::string& what) {
  if (t.size() != 1)
    throw Error(what + " must be a scalar or a 1-element tensor, got shape " + ir::dims_to_string(t.dims()));
}

float scalar_scale(const Tensor& t, const std::string& what) {
  check_scalar(t, what);
  if (t.dtype() != DataType::Float && t.dtype() != DataType::Float16 && t.dtype() != DataType::BFloat16)
    throw Error(what + " has type " + std::string(ir::data_type_name(t.dtype())) + ", expected float");
  Tensor f = as_float32(t);
  return f.values<float>()[0];
}

std::vector<float> scale_values(const Tensor& t) {
  if (t.dtype() != DataType::Float && t.dtype() != DataType::Float16 && t.dtype() != DataType::BFloat16)
    throw Error("the scale has type " + std::string(ir::data_type_name(t.dtype())) + ", expected float");
  Tensor f = as_float32(t);
  auto v = f.values<float>();
  return {v.begin(), v.end()};
}

std::vector<int32_t> int32_values(const Tensor& t) {
  return visit_quant_type(t.dtype(), "the zero point", [&](auto tag) {
    using T = decltype(tag);
    auto v = t.values<T>();
    return std::vector<int32_t>(v.begin(), v.end());
  });
}

int32_t scalar_zero_point(const Tensor* t, DataType type, const std::string& what) {
  if (!t) return 0;
  check_scalar(*t, what);
  if (t->dtype() != type)
    throw Error(what + " has type " + std::string(ir::data_type_name(t->dtype())) + ", expected " +
                std::string(ir::data_type_name(type)));
  return int32_values(*t)[0];
}

const Tensor& required_input(std::span<const Tensor* const> in, size_t i, const std::string& name) {
  if (i >= in.size() || !in[i]) throw Error("input " + std::to_string(i) + " (" + name + ") is missing");
  return *in[i];
}

QParams read_qparams(std::span<const Tensor* const> in, size_t scale_index, size_t zp_index, DataType type,
                     const std::string& name) {
  return {scalar_scale(required_input(in, scale_index, name + "_scale"), name + "_scale"),
          scalar_zero_point(optional_input(in, zp_index), type, name + "_zero_point")};
}

void WindowGeometry::read(const ir::Node& node, bool with_dilations, bool with_ceil_mode) {
  auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    throw Error("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  kernel = node.attr_ints("kernel_shape", {});
  strides = node.attr_ints("strides", {});
  if (with_dilations) dilations = node.attr_ints("dilations", {});
  pads = node.attr_ints("pads", {});
  if (with_ceil_mode) {
    int64_t c = node.attr_int("ceil_mode", 0);
    if (c != 0 && c != 1) throw Error("ceil_mode must be 0 or 1, got " + std::to_string(c));
    ceil_mode = c == 1;
  }
  for (int64_t k : kernel)
    if (k <= 0) throw Error("kernel_shape values must be positive, got " + std::to_string(k));
  for (int64_t s : strides)
    if (s <= 0) throw Error("strides must be positive, got " + std::to_string(s));
  for (int64_t d : dilations)
    if (d <= 0) throw Error("dilations must be positive, got " + std::to_string(d));
  for (int64_t p : pads)
    if (p < 0) throw Error("pads must not be negative, got " + std::to_string(p));
}

void WindowGeometry::complete(size_t rank) {
  auto check = [&](std::vector<int64_t>& v, size_t n, int64_t fill, const char* name) {
    if (v.empty()) v.assign(n, fill);
    if (v.size() != n)
      throw Error(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n) +
                  " for " + std::to_string(rank) + " spatial dims");
  };
  if (kernel.size() != rank)
    throw Error("kernel_shape has " + std::to_string(kernel.size()) + " values, expected " + std::to_string(rank));
  check(strides, rank, 1, "strides");
  check(dilations, rank, 1, "dilations");
  check(pads, 2 * rank, 0, "pads");
}

std::vector<int64_t> WindowGeometry::output_dims(const std::vector<int64_t>& in, std::vector<int64_t>& pads_out) const {
  size_t rank = in.size();
  pads_out = pads;
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t dk = dilations[i] * (kernel[i] - 1) + 1;
    if (auto_pad == "VALID") {
      pads_out[i] = pads_out[i + rank] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t target = (in[i] + strides[i] - 1) / strides[i];
      int64_t needed = std::max<int64_t>(0, (target - 1) * strides[i] + dk - in[i]);
      pads_out[i] = auto_pad == "SAME_LOWER" ? (needed + 1) / 2 : needed / 2;
      pads_out[i + rank] = needed - pads_out[i];
    }
    int64_t span = in[i] + pads_out[i] + pads_out[i + rank] - dk;
    if (span < 0)
      throw Error("the window (" + std::to_string(dk) + ") is larger than the padded input (" +
                  std::to_string(in[i] + pads_out[i] + pads_out[i + rank]) + ") on spatial dim " + std::to_string(i));
    int64_t n = span / strides[i] + 1;
    if (ceil_mode) {
      n = (span + strides[i] - 1) / strides[i] + 1;
      // A last window that would start in the end padding is dropped (ONNX pooling rule).
      if ((n - 1) * strides[i] >= in[i] + pads_out[i]) --n;
    }
    out[i] = n;
  }
  return out;
}

}  // namespace onnxptq::engine
