// Scales HardSigmoid(1/6, 0.5) by (2731/16384)/(1/6), the DPU's 1/6 (vai_q_onnx SimulateDPU).
#include <cmath>

#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// The DPU computes x/6 as x * 2731 / 2^14.
constexpr double kHardSigmoidScale = (2731.0 / 16384.0) / (1.0 / 6.0);

// As vai_q_onnx 1.16's ConvertHardSigmoidToDPUVersion: a HardSigmoid with alpha within 1e-6 of 1/6
// and beta absent or within 1e-6 of 0.5 gets a Mul by 16386/16384 after it (insert_dpu_scale).
// alpha absent is ONNX's 0.2: left alone. In the reference the Mul lands between the HardSigmoid
// and its output Q/DQ.
bool convert_hard_sigmoid_to_dpu_version(ir::Model& model, PassContext& context) {
  const float k = static_cast<float>(kHardSigmoidScale);
  size_t scaled = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "HardSigmoid") || !node->output(0) || !node->find_attribute("alpha")) continue;
    if (!context.name_selected(*node)) continue;  // the name filters only, as vai_q_onnx
    if (std::fabs(node->attr_float("alpha", 0.2f) - 1.0 / 6.0) >= 1e-6) continue;
    if (node->find_attribute("beta") && std::fabs(node->attr_float("beta", 0.5f) - 0.5) >= 1e-6) continue;
    if (has_dpu_scale(node, k)) continue;
    insert_dpu_scale(node, k);
    ++scaled;
  }
  if (scaled) {
    model.graph->sort_nodes();
    context.log.push_back("convert_hard_sigmoid_to_dpu_version: " + std::to_string(scaled) + " HardSigmoid nodes");
  }
  return scaled > 0;
}

}  // namespace onnxptq::passes
