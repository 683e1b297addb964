// Private to the quantize kernel family (quantize*.cc): the parts' register functions and the
// small helpers they share (reading scales and zero points, sliding-window geometry).
#pragma once

#include <string>
#include <vector>

#include "engine/kernel.h"
#include "qmath/quantize.h"

namespace onnxptq::engine {

// The arithmetic of quantizing, the same for every layer, is qmath's.
using qmath::dequantize_value;
using qmath::dequantize_values;
using qmath::fake_quantize_values;
using qmath::kInt4Range;
using qmath::kUInt4Range;
using qmath::QRange;
using qmath::quant_range_of;
using qmath::quantize_scaled;
using qmath::quantize_value;
using qmath::quantize_values;
using qmath::requantize_value;
using qmath::requantize_values;
using qmath::round_half_even;
using qmath::round_half_even_small;
using qmath::visit_8bit_type;
using qmath::visit_integer_quant_type;
using qmath::visit_quant_type;

void register_quantize_linear_kernels(KernelRegistry& r);   // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_quantize_integer_kernels(KernelRegistry& r);  // QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger
void register_quantize_qlinear_kernels(KernelRegistry& r);  // com.microsoft QLinearAdd, Mul, Concat, Sigmoid, LeakyRelu
void register_quantize_pool_kernels(KernelRegistry& r);     // com.microsoft QLinearGlobalAveragePool, QLinearAveragePool
void register_quantize_custom_kernels(KernelRegistry& r);   // Vitis*, Extended* Q/DQ, ai.onnx.contrib FixNeuron, Q/DQ
void register_quantize_block_kernels(KernelRegistry& r);    // com.amd.quark BFPQuantizeDequantize, MXQuantizeDequantize

// C[M][N] = A[M][K] * B[K][N], all row-major, exact in int32 (quantize_gemm.cc). The values of A
// and B are 8-bit numbers minus their zero point (|v| <= 255), so pairs of products fit in int32.
void gemm_s16(int threads, int64_t M, int64_t N, int64_t K, const int16_t* A, const int16_t* B, int32_t* C);

// The single value of a scale (float, float16 or bfloat16; a scalar or a 1-element tensor).
float scalar_scale(const Tensor& t, const std::string& what);
// Every value of a scale as float32.
std::vector<float> scale_values(const Tensor& t);
// The single value of a zero point of type `type` as int32, or 0 when omitted (nullptr).
int32_t scalar_zero_point(const Tensor* t, DataType type, const std::string& what);
// Every value of an integer tensor (int8 ... int32) as int32.
std::vector<int32_t> int32_values(const Tensor& t);
// Error unless `t` holds one element.
void check_scalar(const Tensor& t, const std::string& what);

// in[i], or an Error naming the input when the node does not give it.
const Tensor& required_input(std::span<const Tensor* const> in, size_t i, const std::string& name);
// in[i], or nullptr when omitted.
inline const Tensor* optional_input(std::span<const Tensor* const> in, size_t i) { return i < in.size() ? in[i] : nullptr; }

// The scale and zero point of one quantized operand of a QLinear op.
struct QParams {
  float scale;
  int32_t zp;
};
// Inputs in[scale_index] (required) and in[zp_index] (optional: 0) of type `type`; `name` ("x",
// "y", ...) names them in errors as name_scale and name_zero_point.
QParams read_qparams(std::span<const Tensor* const> in, size_t scale_index, size_t zp_index, DataType type,
                     const std::string& name);

// Sliding windows (convolution, pooling) over N-D spatial dims: attributes as in ONNX Conv.
struct WindowGeometry {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel;     // spatial sizes
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> dilations;  // default 1
  std::vector<int64_t> pads;       // begins then ends; default 0
  bool ceil_mode = false;

  // Reads auto_pad, strides, dilations (when `with_dilations`), pads, ceil_mode (when
  // `with_ceil_mode`) and kernel_shape (may be empty: then set from the weights).
  void read(const ir::Node& node, bool with_dilations, bool with_ceil_mode);
  // Fills defaults for `rank` spatial dims and checks the attribute sizes.
  void complete(size_t rank);
  // Output spatial sizes for input spatial sizes `in`; `pads_out` gets the pads actually used.
  std::vector<int64_t> output_dims(const std::vector<int64_t>& in, std::vector<int64_t>& pads_out) const;
};

}  // namespace onnxptq::engine
