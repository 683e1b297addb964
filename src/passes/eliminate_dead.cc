// Removes nodes whose outputs nothing uses, initializers nothing uses, and value_info of gone values.
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// ONNX nodes have no side effects, so a node none of whose outputs is used or a graph output
// computes nothing anyone sees. Walking the nodes backwards removes whole dead chains in one go.
bool eliminate_dead(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t nodes = 0, initializers = 0, infos = 0;
  std::vector<ir::Node*> order = nodes_in_order(graph);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    ir::Node* node = *it;
    bool used = false;
    for (const ir::Value* out : node->outputs()) used |= out && (!out->uses().empty() || graph.is_output(out));
    if (used) continue;
    std::vector<ir::Value*> outputs = node->outputs();
    graph.remove_node(node);
    for (ir::Value* out : outputs)
      if (out) graph.remove_value(out);
    ++nodes;
  }
  // Unused initializers go, also when listed as graph inputs: an override nothing reads.
  std::vector<ir::Value*> inits = graph.initializers();
  for (ir::Value* v : inits) {
    if (!v->uses().empty() || graph.is_output(v)) continue;
    graph.remove_input(v);
    graph.remove_value(v);
    ++initializers;
  }
  // value_info of values that are neither produced, used nor part of the interface any more.
  std::vector<ir::Value*> info = graph.value_info();
  for (ir::Value* v : info) {
    if (v->producer() || !v->uses().empty() || graph.is_input(v) || graph.is_output(v) || v->has_initializer())
      continue;
    graph.remove_value(v);
    ++infos;
  }
  if (nodes + initializers + infos)
    context.log.push_back("eliminate_dead: removed " + std::to_string(nodes) + " nodes, " +
                          std::to_string(initializers) + " initializers, " + std::to_string(infos) + " value_info");
  return nodes + initializers + infos > 0;
}

}  // namespace onnxptq::passes
