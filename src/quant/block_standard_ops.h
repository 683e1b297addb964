// Quark's block formats without a custom-op library: each com.amd.quark BFPQuantizeDequantize or
// MXQuantizeDequantize node rewritten as standard ONNX ops that compute the same values, bit for
// bit, as the node's kernel (engine/kernels/quantize_block.cc), so that ONNX Runtime or any runtime
// of the standard runs the model.
#pragma once

#include <cstddef>

#include "ir/model.h"

namespace onnxptq::quant {

// Every BFPQuantizeDequantize / MXQuantizeDequantize node of the main graph replaced: a node
// reading a constant by the constant fake-quantized (an initializer), any other by standard ops
// (opset 13 or later; the blocks along the node's axis moved last, padded, cut into blocks; each
// block's exponent from its largest finite magnitude; rounding, clamping and Inf/NaN as the
// kernel does). Returns the number of nodes replaced. Error naming the node when one cannot be
// written so: a default-domain opset below 13, an input of unknown rank, an attribute the kernel
// refuses. Known differences: with convert_to_bfloat_before_bfp, a NaN whose payload lies in
// its low 16 bits may leave as NaN where the kernel's bit rounding makes it an infinity; in ONNX
// Runtime, a tensor whose dimensions are known only at run time and turn out to hold one
// element, -0, leaves as +0.
size_t write_block_nodes_in_standard_ops(ir::Model& model);

}  // namespace onnxptq::quant
