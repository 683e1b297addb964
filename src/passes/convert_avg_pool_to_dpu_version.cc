// Scales square average pools by the DPU's divisor factor (vai_q_onnx ConvertAvgPoolToDPUVersion).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As vai_q_onnx 1.16 (simulate_dpu.py): the kernel of an AveragePool is its 2-D kernel_shape, of a
// GlobalAveragePool the (H, W) of its rank-4 input; it must be square and not empty. The output is
// multiplied by dpu_avg_pool_factor (a Mul by 1.0 too, as vai_q_onnx writes it). Padding and
// count_include_pad are not looked at, as in the reference. There the Mul lands between the pool
// and its output Q/DQ; see dpu.h for placing it so here.
bool convert_avg_pool_to_dpu_version(ir::Model& model, PassContext& context) {
  size_t scaled = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!node->output(0) || !node->input(0) || !context.should_quantize(*node)) continue;
    int64_t kh = 0, kw = 0;
    if (is_op(node, "AveragePool")) {
      std::vector<int64_t> kernel = node->attr_ints("kernel_shape", {});
      if (kernel.size() != 2) continue;
      kh = kernel[0], kw = kernel[1];
    } else if (is_op(node, "GlobalAveragePool")) {
      const ir::ValueType& type = node->input(0)->type;
      if (!type.is_tensor() || !type.has_shape || type.shape.size() != 4) continue;
      if (!type.shape[2].has_value || !type.shape[3].has_value) continue;
      kh = type.shape[2].value, kw = type.shape[3].value;
    } else {
      continue;
    }
    if (kh != kw || kh * kw == 0) continue;
    float k = static_cast<float>(dpu_avg_pool_factor(kh, kw));
    if (has_dpu_scale(node, k)) continue;
    insert_dpu_scale(node, k);
    ++scaled;
  }
  if (scaled) {
    model.graph->sort_nodes();
    context.log.push_back("convert_avg_pool_to_dpu_version: " + std::to_string(scaled) + " average pools");
  }
  return scaled > 0;
}

}  // namespace onnxptq::passes
