// VitisQuantFormat.QDQ and VitisQuantFormat.FixNeuron: vai_q_onnx's custom-op formats, written by
// the QDQ writer with the node family of each (vai_q_onnx's VitisExtendedQuantizer).
#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "quant/export.h"

namespace onnxptq::quant {
namespace {

// vai_q_onnx writes its ai.onnx.contrib QuantizeLinear / DequantizeLinear with two string
// attributes: bit_width "8" and pos (vitis_pos of the float32 scale initializer).
void add_contrib_attributes(ir::Model& model) {
  for (ir::Node* n : model.graph->topological_order_with_bodies()) {  // the bodies' pairs too
    if (n->domain != "ai.onnx.contrib") continue;
    const ir::Tensor* scale = passes::constant_of(n->input(1));
    if (!scale || scale->size() != 1) throw Error("VitisQuantFormat.QDQ export: '" + n->name + "' has no scalar scale");
    n->set_attribute(ir::Attribute::of_string("bit_width", "8"));
    n->set_attribute(ir::Attribute::of_string("pos", std::to_string(vitis_pos(scale->values<float>()[0]))));
  }
}

}  // namespace

ir::Model export_vitis_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  QdqStyle style;
  if (config.use_qdq_vitis_custom_ops) {
    style.domain = "com.vai.quantize";
    style.quantize_op = "VitisQuantizeLinear";
    style.dequantize_op = "VitisDequantizeLinear";
  } else {  // vai_q_onnx's Python ops (UseQDQVitisCustomOps false)
    style.domain = "ai.onnx.contrib";
  }
  style.weights_as_pair = true;  // VitisExtendedQuantizer sets add_qdq_pair_to_weight
  ir::Model out = export_qdq_styled(model, plan, config, style);
  if (!config.use_qdq_vitis_custom_ops) add_contrib_attributes(out);
  return out;
}

ir::Model export_fix_neuron(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  QdqStyle style;
  style.domain = "ai.onnx.contrib";
  style.fix_neuron = true;
  return export_qdq_styled(model, plan, config, style);
}

}  // namespace onnxptq::quant
