// ExtendedQuantFormat.QDQ: Quark's custom-op format (its com.amd.quark ops),
// written by the QDQ writer with com.amd.quark ExtendedQuantizeLinear / ExtendedDequantizeLinear,
// then Quark's post-pass (_convert_qdq_nodes) turns every one it can into com.microsoft
// QuantizeLinear / DequantizeLinear: only 32-bit quantize ops and uint32 stay custom, and float16
// and bfloat16 where the config keeps their custom ops (by default they are Casts, which ONNX
// Runtime runs: docs/formats.md).
#include "onnxptq/error.h"
#include "quant/export.h"

namespace onnxptq::quant {

namespace {

// Quark's _convert_qdq_nodes: a custom Q/DQ whose zero point is int8, uint8, int16 or uint16, or
// an ExtendedDequantizeLinear whose int32 zero points are all 0 (the int32 biases).
bool converts_to_microsoft(const ir::Node& n) {
  const ir::Value* zp = n.input(2);
  if (!zp || !zp->has_initializer()) return false;
  const ir::Tensor& z = zp->initializer();
  switch (z.dtype()) {
    case ir::DataType::Int8:
    case ir::DataType::UInt8:
    case ir::DataType::Int16:
    case ir::DataType::UInt16:
      return true;
    case ir::DataType::Int32: {
      if (n.op_type != "ExtendedDequantizeLinear") return false;  // com.microsoft QuantizeLinear has no int32
      for (int32_t v : z.values<int32_t>())
        if (v != 0) return false;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

ir::Model export_extended_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  // Quark's ExtendedQDQQuantizer: integer weights stored quantized (unless AddQDQPairToWeight),
  // float16/bfloat16 weights of its custom ops kept float with a pair (its default for those types).
  // Its post-processes (quantize.py's apply_post_process, in this order): BF16QDQToCast's Cast form,
  // here for float16 too and the default, EnableVaimlBF16's cast removal, BF16WithClip's Clip.
  QdqStyle style;
  style.domain = "com.amd.quark";
  style.quantize_op = "ExtendedQuantizeLinear";
  style.dequantize_op = "ExtendedDequantizeLinear";
  style.float_weights_as_pair = true;
  style.cast_float16 = config.casts_float16();
  style.cast_bfloat16 = config.casts_bfloat16();
  style.vaiml_bfloat16 = config.enable_vaiml_bf16;
  style.clip_bfloat16 = config.bf16_with_clip;
  if (model.opset("") < 13)
    for (const TensorPlan& t : plan.tensors)
      if (t.axis && t.role == Role::Weight)
        throw Error("per-channel quantization needs opset 13 or later; the model has opset " +
                    std::to_string(model.opset("")) + " (upgrade it first)");

  ir::Model out = export_qdq_styled(model, plan, config, style);
  for (ir::Node* node : out.graph->topological_order_with_bodies()) {  // the bodies' pairs too
    if (node->domain != "com.amd.quark" || !converts_to_microsoft(*node)) continue;
    node->op_type = node->op_type == "ExtendedQuantizeLinear" ? "QuantizeLinear" : "DequantizeLinear";
    node->domain = "com.microsoft";
  }
  // Quark imports both domains before quantizing, whichever ops remain.
  out.set_opset("com.microsoft", 1);
  out.set_opset("com.amd.quark", 1);
  return out;
}

}  // namespace onnxptq::quant
