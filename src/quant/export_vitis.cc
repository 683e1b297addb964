// VitisQuantFormat.QDQ and VitisQuantFormat.FixNeuron: vai_q_onnx's custom-op formats, written by
// the QDQ writer with the node family of each (vai_q_onnx's VitisExtendedQuantizer).
#include "quant/export.h"

namespace onnxptq::quant {

ir::Model export_vitis_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  QdqStyle style;
  style.domain = "com.vai.quantize";
  style.quantize_op = "VitisQuantizeLinear";
  style.dequantize_op = "VitisDequantizeLinear";
  style.weights_as_pair = true;  // VitisExtendedQuantizer sets add_qdq_pair_to_weight
  return export_qdq_styled(model, plan, config, style);
}

ir::Model export_fix_neuron(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  QdqStyle style;
  style.domain = "ai.onnx.contrib";
  style.fix_neuron = true;
  return export_qdq_styled(model, plan, config, style);
}

}  // namespace onnxptq::quant
