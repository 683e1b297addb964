// Removes Identity nodes and inference-mode Dropout nodes, whose output 0 is their input 0.
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// Dropout passes its data through unless training mode is on; its mask must be unused.
bool is_inference_dropout(const ir::Node* node) {
  if (!is_op(node, "Dropout")) return false;
  for (size_t i = 1; i < node->outputs().size(); ++i)
    if (const ir::Value* mask = node->output(i); mask && (!mask->uses().empty() || node->graph()->is_output(mask)))
      return false;
  if (const ir::Value* training = node->input(2)) {
    const ir::Tensor* t = constant_of(training);
    if (!t || t->dtype() != ir::DataType::Bool || t->size() != 1 || t->values<bool>()[0]) return false;
  }
  return true;
}

}  // namespace

bool eliminate_identity(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t removed = 0;
  for (ir::Node* node : nodes_in_order(graph)) {
    if (!is_op(node, "Identity") && !is_inference_dropout(node)) continue;
    if (!node->input(0) || !node->output(0)) continue;
    if (bypass_node(graph, node, node->input(0))) ++removed;
  }
  if (removed) context.log.push_back("eliminate_identity: removed " + std::to_string(removed) + " nodes");
  return removed > 0;
}

}  // namespace onnxptq::passes
