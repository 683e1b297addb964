// Replaces Sigmoid by HardSigmoid(alpha = 1/6), the DPU's version (vai_q_onnx SimulateDPU).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As vai_q_onnx 1.16's ConvertSigmoidToHardSigmoid: same name, input and output; beta is not
// written (ONNX's default 0.5). vai_q_onnx swaps the op between the Sigmoid's Q/DQ pairs, which
// keep the positions calibrated on the Sigmoid; run after calibration the same holds here (dpu.h).
bool convert_sigmoid_to_hard_sigmoid(ir::Model& model, PassContext& context) {
  size_t converted = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "Sigmoid") || !context.should_quantize(*node)) continue;
    node->op_type = "HardSigmoid";
    node->domain.clear();
    node->attributes.clear();
    node->set_attribute(ir::Attribute::of_float("alpha", 1.0f / 6.0f));
    ++converted;
  }
  if (converted)
    context.log.push_back("convert_sigmoid_to_hard_sigmoid: " + std::to_string(converted) + " Sigmoid nodes");
  return converted > 0;
}

}  // namespace onnxptq::passes
