// Turns a ReduceMean over the two spatial axes of a 4-D tensor into GlobalAveragePool (vai_q_onnx).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As vai_q_onnx 1.16's ConvertReduceMeanToGlobalAvgPool: axes exactly [2,3] (the attribute, or a
// constant second input when there is no attribute) and keepdims absent or 1; the GlobalAveragePool
// keeps the node's name and output. vai_q_onnx does not look at the rank; here it must be known to
// be 4, since over a 5-D input GlobalAveragePool would also average axis 4. Negative axes ([-2,-1])
// are not recognised, as in vai_q_onnx.
bool convert_reduce_mean_to_global_avg_pool(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t converted = 0;
  for (ir::Node* node : nodes_in_order(graph)) {
    if (!is_op(node, "ReduceMean") || !node->input(0) || !node->output(0)) continue;
    if (!context.should_quantize(*node)) continue;
    std::optional<std::vector<int64_t>> axes;
    if (node->find_attribute("axes")) {
      axes = node->attr_ints("axes", {});
    } else if (node->inputs().size() == 2) {
      axes = constant_ints(node->input(1));
    }
    if (!axes || *axes != std::vector<int64_t>{2, 3} || node->attr_int("keepdims", 1) != 1) continue;
    const ir::ValueType& type = node->input(0)->type;
    if (!type.is_tensor() || !type.has_shape || type.shape.size() != 4) continue;
    ir::Value* x = node->input(0);
    ir::Value* out = node->output(0);
    ir::Value* axes_input = node->input(1);
    ir::Node* pool = graph.insert_node_before(node, "GlobalAveragePool", {x}, {}, node->name);
    graph.remove_node(node);
    graph.set_node_output(pool, 0, out);
    remove_unused_constant(graph, axes_input);
    ++converted;
  }
  if (converted)
    context.log.push_back("convert_reduce_mean_to_global_avg_pool: " + std::to_string(converted) +
                          " ReduceMean nodes to GlobalAveragePool");
  return converted > 0;
}

}  // namespace onnxptq::passes
