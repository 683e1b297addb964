// Scales ReduceMean by the DPU's divisor factor (vai_q_onnx ConvertReduceMeanToDPUVersion).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As vai_q_onnx 1.16 (simulate_dpu.py): count = product of the input's dims over the axes (negative
// axes counted from the end), the factor dpu_division_factor(count) (no special cases, no 255
// limit), then a Mul as for the average pools. Axes from the attribute, or from a constant second
// input (opset 18), where vai_q_onnx 1.16 crashes (a NameError). No axes (a reduction over
// everything) or a dim not known: left alone, as in the reference.
bool convert_reduce_mean_to_dpu_version(ir::Model& model, PassContext& context) {
  size_t scaled = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "ReduceMean") || !node->input(0) || !node->output(0)) continue;
    if (!context.should_quantize(*node)) continue;
    std::optional<std::vector<int64_t>> axes;
    if (node->find_attribute("axes")) {
      axes = node->attr_ints("axes", {});
    } else if (node->inputs().size() == 2 && node->input(1)) {
      axes = constant_ints(node->input(1));
    }
    if (!axes || axes->empty()) continue;
    const ir::ValueType& type = node->input(0)->type;
    if (!type.is_tensor() || !type.has_shape) continue;
    int64_t rank = static_cast<int64_t>(type.shape.size());
    int64_t count = 1;
    for (int64_t a : *axes) {
      int64_t axis = a < 0 ? a + rank : a;
      if (axis < 0 || axis >= rank || !type.shape[axis].has_value) count = 0;
      if (count) count *= type.shape[axis].value;
    }
    if (count <= 0) continue;
    float k = static_cast<float>(dpu_division_factor(count));
    if (has_dpu_scale(node, k)) continue;
    insert_dpu_scale(node, k);
    ++scaled;
  }
  if (scaled) {
    model.graph->sort_nodes();
    context.log.push_back("convert_reduce_mean_to_dpu_version: " + std::to_string(scaled) + " ReduceMean nodes");
  }
  return scaled > 0;
}

}  // namespace onnxptq::passes
