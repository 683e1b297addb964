// Rounds LeakyRelu's alpha to the DPU's slope, a multiple of 1/256 (vai_q_onnx SimulateDPU).
#include <cmath>

#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As vai_q_onnx 1.16's ConvertLeakyReluToDPUVersion: alpha := round(alpha * 256) / 256, Python's
// round (half to even) on the attribute's value as a double; 0.1 -> 26/256. A LeakyRelu without
// the attribute (ONNX's default 0.01) is left alone, as in vai_q_onnx. In the reference this edits
// the node of the quantized graph; here the float node, so a later calibration sees the DPU
// slope (dpu.h).
bool convert_leaky_relu_to_dpu_version(ir::Model& model, PassContext& context) {
  size_t changed = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "LeakyRelu") || !node->find_attribute("alpha") || !context.should_quantize(*node)) continue;
    float alpha = node->attr_float("alpha", 0.01f);
    float dpu = static_cast<float>(std::nearbyint(static_cast<double>(alpha) * 256.0) / 256.0);
    if (dpu == alpha) continue;
    node->set_attribute(ir::Attribute::of_float("alpha", dpu));
    ++changed;
  }
  if (changed)
    context.log.push_back("convert_leaky_relu_to_dpu_version: " + std::to_string(changed) + " LeakyRelu slopes");
  return changed > 0;
}

}  // namespace onnxptq::passes
