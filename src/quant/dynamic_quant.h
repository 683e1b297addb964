// Dynamic quantization (ONNX Runtime's quantize_dynamic, IntegerOps mode, which vai_q_onnx's
// quantize_dynamic and Quark's use_dynamic_quant run): weights quantized offline, activations at run
// time by DynamicQuantizeLinear (uint8, asymmetric, the range widened to hold 0). Nothing is
// calibrated; the rest of the model stays float. docs/formats.md describes what is written.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

// A weight as ONNX Runtime's quantizer quantizes it in this mode (compute_scale_zp and
// quantize_nparray on its range table): symmetric by default for int8 ([-127, 127]), asymmetric
// for uint8 ([0, 255]); reduce_range gives [-64, 64] and [0, 127]; per tensor, or per channel
// along `axis`. The weight type must be QInt8 or QUInt8.
QuantizedTensor quantize_dynamic_weight(const ir::Tensor& w, const QuantConfig& config, std::optional<int64_t> axis,
                                        bool reduce_range);

struct DynamicQuantResult {
  ir::Model model;
  std::vector<std::string> quantized_nodes;  // by their names in the source model
  std::vector<std::string> warnings;
};

// The model with its MatMuls, Gemms and Convs written as ONNX Runtime's ONNXQuantizer writes them
// in IntegerOps mode (operators/matmul.py MatMulInteger, operators/conv.py ConvInteger):
//   x -> DynamicQuantizeLinear -> (x_q, x_scale, x_zp)      one per float activation, shared
//   MatMulInteger(x_q, W_q, x_zp, W_zp) | ConvInteger(...)  -> int32
//   Cast(to float) -> Mul(by x_scale * W_scale, a Mul node) [-> Add(Reshape(bias, [1, -1, 1, ...])) for Conv]
// MatMul: B a constant float32 initializer (MatMulConstBOnly, on by default as quantize_dynamic sets
// it; when set false, a non-constant B is quantized at run time like A), per channel along B's last
// axis with per_channel (2-D B), reduce_range honoured. Gemm: first rewritten as MatMul (+ Add of C)
// when alpha = beta = 1 and transA = 0, a constant B transposed for transB (replace_gemm_with_matmul),
// then quantized as MatMul. Conv: weights per tensor (ORT's ConvInteger path ignores per_channel),
// float bias added after the scales. op_types_to_quantize (MatMul, Gemm, Conv), nodes_to_quantize
// and nodes_to_exclude (names and Quark's patterns, as named_exclusions) choose the nodes; a Gemm's
// name selects the MatMul it becomes. ONNX Runtime fuses these nodes into its com.microsoft
// DynamicQuantizeMatMul / MatMulIntegerToFloat itself when it loads the model, so that op is not written.
DynamicQuantResult write_dynamic_quant(const ir::Model& model, const QuantConfig& config);

// The config checks of this path (check_config calls it): weight_type QInt8 or QUInt8, op types
// among MatMul, Gemm, Conv, and no option of the Q/DQ path that would be ignored here.
void check_dynamic_quant_config(const QuantConfig& config);

}  // namespace onnxptq::quant
