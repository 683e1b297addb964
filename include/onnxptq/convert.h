// The model tools of vai_q_onnx and Quark (`onnxptq remove-qdq`, `qdq-to-qop`, `fix-shapes`,
// `a8w8-npu-to-cpu`, `u16u8-to-u8u8`, `bias-int32-to-int16`, `lstm-to-customlstm`, `fp32-to-fp16`,
// `fp32-to-bf16`, `fp16-to-bf16`): each reads a model and returns a new one; the input is never
// modified. Every model they write loads and runs in ONNX Runtime, but lstm_to_customlstm's, whose
// Quark custom op needs Quark's custom-op library there (onnxptq's engine runs it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "onnxptq/model.h"

namespace onnxptq {

// What a tool did: how many things it changed (pairs removed, QLinear nodes written, biases
// converted, ...; each tool says), and a line per thing worth telling; lines starting with
// "warning: " are warnings.
struct ConvertResult {
  size_t changed = 0;
  std::vector<std::string> log;
};

struct Converted {
  Model model;
  ConvertResult result;
};

// vai_q_onnx's remove_qdq: every DequantizeLinear(QuantizeLinear(x)) (any of the Q/DQ op families
// onnxptq writes) whose quantized value only that DequantizeLinear reads becomes x, and every
// FixNeuron(x) becomes x; dequantized weights without a QuantizeLinear (stored integers) stay.
// `changed`: the pairs removed. Error for a model without a quantize node.
Converted remove_qdq(const Model& model);

// vai_q_onnx's convert_qdq_to_qop: a QDQ model in QOperator form (QLinearConv, QLinearMatMul and
// ONNX Runtime's com.microsoft QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid,
// QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool; data movement ops on the 8-bit
// values), computing what the QDQ model does: every 8-bit Q/DQ pair and dequantized 8-bit weight
// is read back as a quantized tensor, int32 Conv biases in units of s_x * s_w as QLinearConv
// biases, then written by the quantizer's QOperator writer. Nodes that cannot take a QLinear form
// stay float between DequantizeLinear and QuantizeLinear; Q/DQ nodes of other types stay as
// they are. `changed`: the QLinear nodes. Error for a model without Q/DQ nodes or below opset 10.
Converted qdq_to_qop(const Model& model);

// Quark's fix_shapes syntax, "in:[1,224,224,3];out:[1,1000]": a shape per input or output name.
// Error naming the entry that is not NAME:[d1,d2,...] with whole dims of 1 or more.
std::map<std::string, std::vector<int64_t>> parse_fix_shapes(const std::string& text);

// Quark's convert_dynamic_to_fixed and fix_shapes: the named inputs and outputs take the given
// shapes, then every tensor's shape, from one run of the model on a seeded random sample, is
// stored in the model (value_info). Error naming an input or output the model does not have, a
// shape contradicting the model's rank or fixed dims, an input left dynamic, or a given output
// shape the run contradicts. `changed`: the tensor shapes stored.
Converted fix_shapes(const Model& model, const std::map<std::string, std::vector<int64_t>>& shapes);

// Quark's convert_a8w8_npu_to_a8w8_cpu: each Conv, ConvTranspose and Gemm bias stored as an 8- or
// 16-bit weight of its own scale (an NPU model: Int32Bias false) becomes an int32 bias in units of
// s_x * s_w, as ONNX Runtime's CPU kernels take it (rounded half to even; Quark's tool
// truncates). `changed`: the biases converted. Error when there is none to convert.
Converted a8w8_npu_to_cpu(const Model& model);

// Quark's convert_u16u8_to_u8u8: every uint16 activation (Q/DQ pair) made uint8 with the same
// range (scale x 257, zero point / 257 rounded), no calibration; constants quantized like
// activations and the int32 biases reading those activations are quantized again with the new
// scales. `changed`: the activations converted. Error when there is no uint16 activation.
Converted u16u8_to_u8u8(const Model& model);

// Quark's block formats without its custom ops: every com.amd.quark BFPQuantizeDequantize /
// MXQuantizeDequantize node written as standard ONNX ops that compute its values bit for bit (what
// the quantizer's BlockQDQAsStandardOps writes, docs/formats.md), a node on a constant as the
// constant fake-quantized. `changed`: the nodes rewritten. Error for a model without such a node,
// or with one the rewrite cannot write (an input of unknown rank, opset below 13, ...).
Converted block_to_standard_ops(const Model& model);

// Quark's convert_bias_int32_to_int16: each int32 bias of a Conv, ConvTranspose, Gemm or
// normalization stored as int16 (same scale, values clipped to int16 with a warning); below opset
// 21 (ONNX's DequantizeLinear takes int16 from 21) the bias DequantizeLinear becomes com.microsoft's
// (Quark converts the model to opset 21 instead). `changed`: the biases.
// Error when there is no int32 bias.
Converted bias_int32_to_int16(const Model& model);

// Quark's convert_lstm_to_customlstm: each LSTM of a model quantized with uint16 X, W, R, B (each
// read through a DequantizeLinear) and Y (read by a QuantizeLinear), one scale each, becomes Quark's
// com.amd.quark ExtendedLSTM custom op with those scales and zero points as attributes
// (docs/formats.md); the Q/DQ nodes stay. `changed`: the LSTMs. Error for a model without an LSTM,
// and naming the LSTM and the reason for one that is not so quantized or that Quark's op cannot
// compute (direction other than bidirectional, layout 1, input_forget, clip, other activations,
// peepholes, no B, Y_h or Y_c read).
Converted lstm_to_customlstm(const Model& model);

// Quark's convert_fp32_to_fp16 (onnxconverter-common's float16 converter): float32 tensors and
// values made float16; nodes of the block list (and nodes with subgraphs or of other domains)
// stay float32 between Casts, as do nodes reading a constant beyond +-1e4 (the converter's
// max_finite_val; it clamps such values, which breaks BatchNormalization variances). Tensors are
// rounded to float16 as they are. With keep_io_types the graph inputs and outputs stay float32.
struct Fp16Options {
  bool keep_io_types = false;
  // Quark's DEFAULT_OP_BLOCK_LIST_FP16 when empty.
  std::vector<std::string> op_block_list{};
  std::vector<std::string> node_block_list{};
};
Converted fp32_to_fp16(const Model& model, const Fp16Options& options = {});

// The formats of Quark's convert_fp32_to_bf16 and convert_fp16_to_bf16: the model quantized with
// the BF16 preset on its random sample, its bfloat16 Q/DQ written as Cast pairs (WithCast, the
// default; BF16QDQToCast), as com.amd.quark custom ops (CustomQdq), or left out with weights
// rounded to bfloat16 and stored as float32 (SimulateBf16; EnableVaimlBF16). Quark's "bf16"
// (every tensor retyped bfloat16) is refused: ONNX Runtime's CPU kernels do not run bfloat16
// convolutions.
enum class Bf16Format { WithCast, CustomQdq, SimulateBf16 };
// "with_cast", "customqdq", "simulate_bf16". Error naming the value otherwise ("bf16": refused
// as unsupported).
Bf16Format parse_bf16_format(const std::string& name);
// From a float32 model. `changed`: the bfloat16 tensors.
Converted fp32_to_bf16(const Model& model, Bf16Format format = Bf16Format::WithCast);
// From a float16 model: made float32 first, converted, then its float16 inputs and outputs cast
// at the edges (Quark's add_fp16_input_output_cast).
Converted fp16_to_bf16(const Model& model, Bf16Format format = Bf16Format::WithCast);

}  // namespace onnxptq
