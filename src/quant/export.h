// Writing a quantized model from a float model and its plan (with parameters assigned).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// The model in the config's format. The float model is not changed. Graph inputs and outputs
// keep their names and float types. Error when the model's opset cannot hold the plan
// (per-channel parameters need opset 13).
ir::Model export_model(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// QuantFormat.QDQ (ORT's layout and names, its qdq_quantizer.py):
// weights stored quantized with a DequantizeLinear (or float with a Q/DQ pair under
// AddQDQPairToWeight), int32 biases with a DequantizeLinear writing the bias's name, and a
// QuantizeLinear/DequantizeLinear pair after every quantized activation (one per consumer under
// DedicatedQDQPair). 16-bit types use opset 21's ops, or com.microsoft's below opset 21.
ir::Model export_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// The node family a Q/DQ-shaped format writes (the QDQ writer in export_qdq.cc serves all three).
struct QdqStyle {
  std::string domain;          // of the nodes ("": the default domain, or com.microsoft for 16-bit below opset 21)
  int64_t domain_version = 1;  // imported for a domain other than ""
  std::string quantize_op = "QuantizeLinear";
  std::string dequantize_op = "DequantizeLinear";
  bool fix_neuron = false;       // one FixNeuron node (x, scale, int8 zp) -> x' per quantized tensor
  bool weights_as_pair = false;  // float weights with a Q/DQ pair, whatever AddQDQPairToWeight says
  // float16/bfloat16 weights written with the custom ops: float with a pair (Quark's default for them).
  bool float_weights_as_pair = false;
  // float16/bfloat16 Q/DQ in standard ops (the Cast form of Quark's BF16QDQToCast): a quantize is
  // [Div scale] [Add zero point] Cast(to type), a dequantize Cast(to float) [Sub zero point]
  // [Mul scale], the scale and zero point nodes only where they are not 1 and 0.
  bool cast_float16 = false;
  bool cast_bfloat16 = false;
  bool clip_bfloat16 = false;   // BF16WithClip: Clip(x, -bf16 max, bf16 max) before a bfloat16 quantize
  bool vaiml_bfloat16 = false;  // EnableVaimlBF16: no bfloat16 Q/DQ, weights stored rounded as float32
};
ir::Model export_qdq_styled(const ir::Model& model, const Plan& plan, const QuantConfig& config, const QdqStyle& style);

// VitisQuantFormat.QDQ (vai_q_onnx's VitisExtendedQuantizer): the QDQ layout with VitisQuantizeLinear /
// VitisDequantizeLinear (com.vai.quantize v1, no attributes) for every type; weights always float
// with a pair (vai_q_onnx forces AddQDQPairToWeight), int32 biases stored with a
// VitisDequantizeLinear writing the bias's name.
ir::Model export_vitis_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// The pos attribute of vai_q_onnx's FixNeuron and ai.onnx.contrib Q/DQ: int(rint(-log2(scale)))
// of the float32 scale.
inline int vitis_pos(float scale) { return static_cast<int>(std::nearbyint(-std::log2(static_cast<double>(scale)))); }

// VitisQuantFormat.FixNeuron (vai_q_onnx's VitisExtendedQuantizer): one FixNeuron (ai.onnx.contrib v1) per
// quantized tensor and weight, named <t>_DequantizeLinear, string attributes bit_width ("8"; "32"
// for an int32 bias) and pos (rint(-log2(scale))).
ir::Model export_fix_neuron(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// ExtendedQuantFormat.QDQ (Quark's custom-op format): the QDQ layout with com.amd.quark
// ExtendedQuantizeLinear / ExtendedDequantizeLinear (v1; `axis` per channel), integer weights stored
// quantized; then every custom Q/DQ with an 8/16-bit zero point, and every int32 DequantizeLinear
// with zero points 0, becomes com.microsoft's QuantizeLinear / DequantizeLinear (Quark's
// _convert_qdq_nodes). float16/bfloat16 Q/DQ are written in the Cast form (QdqStyle) unless the
// config keeps them custom (FloatQDQAsCustomOps, BF16QDQToCast false): then float weights stay
// float with a pair. BF16WithClip and EnableVaimlBF16 as QdqStyle says. Imports com.microsoft 1 and
// com.amd.quark 1.
ir::Model export_extended_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// QuantFormat.QOperator (ORT's ONNXQuantizer, QLinearOps): QLinearConv, QLinearMatMul and com.microsoft's
// QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu,
// QLinearGlobalAveragePool, QLinearAveragePool where a quantized node has every tensor
// quantized; data movement ops (MaxPool, Reshape, Transpose, Squeeze, Unsqueeze, Split, Slice,
// Gather, nearest Resize, Pad) run on the quantized tensor; every other node stays float between
// DequantizeLinear and QuantizeLinear, so the model computes what the QDQ export of the plan does.
ir::Model export_qoperator(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// Int16Bias (Quark; its convert_bias_int32_to_int16 tool): each int32 bias a DequantizeLinear
// dequantizes for a Conv, ConvTranspose, Gemm or normalization is stored as int16 with the same
// scale, values beyond int16 clipped (as Quark clips them); below opset 21, whose DequantizeLinear
// takes no int16, that DequantizeLinear becomes com.microsoft's (Quark converts the model to opset
// 21 instead, which libonnx's version converter cannot do here). In place.
struct Int16Biases {
  size_t converted = 0;  // biases
  size_t clipped = 0;    // values beyond int16
  size_t contrib = 0;    // DequantizeLinear nodes made com.microsoft's
};
Int16Biases store_biases_as_int16(ir::Model& model);

// The Relu/Clip nodes the plan removed (ORT's QDQRemovableActivation): each goes, and its producer writes its output.
void remove_planned_activations(ir::Graph& graph, const Plan& plan);
// Sets beta to 1 on a Gemm whose bias the plan quantizes as int32: that bias's scale holds beta.
void drop_gemm_beta_held_by_bias(ir::Node& node, const Plan& plan);

// A zero point tensor of `type` (an integer type, float16 or bfloat16) holding each parameter's
// zero point, with `dims` (a scalar when empty).
ir::Tensor zero_point_tensor(ir::DataType type, std::vector<int64_t> dims,
                             const std::vector<qmath::ScaleZeroPoint>& params);

}  // namespace onnxptq::quant
