// Quark's CopySharedInit / CopyBiasInit (convert_shared_initializer_to_unique): one initializer per reader.
#include <algorithm>
#include <map>

#include "passes/dedicate.h"

namespace onnxptq::passes {

bool copy_shared_initializers(ir::Model& model, const std::vector<std::string>& op_types, bool only_bias,
                              PassContext& context) {
  ir::Graph& graph = *model.graph;
  std::map<const ir::Value*, int> reads;  // reads so far by nodes of op_types
  std::vector<ir::Node*> nodes;
  for (const auto& n : graph.nodes()) nodes.push_back(n.get());
  size_t copies = 0;
  for (ir::Node* node : nodes) {
    if (!op_types.empty() && std::find(op_types.begin(), op_types.end(), node->op_type) == op_types.end()) continue;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      ir::Value* v = node->input(i);
      if ((only_bias && i != 2) || !v || !v->has_initializer() || v->graph() != &graph || graph.is_input(v)) continue;
      int k = ++reads[v];
      if (k == 1) continue;
      ir::Value* copy = graph.add_unique_value("duplicated" + v->name() + std::to_string(k));
      copy->type = v->type;
      graph.set_initializer(copy, v->initializer());  // shares the bytes until one side writes
      graph.set_node_input(node, i, copy);
      ++copies;
    }
  }
  if (copies == 0) return false;
  if (model.ir_version < 4) model.ir_version = 4;  // initializers that are not graph inputs
  context.log.push_back(std::string(only_bias ? "CopyBiasInit" : "CopySharedInit") + ": " + std::to_string(copies) +
                        " shared initializer reads given a copy");
  return true;
}

}  // namespace onnxptq::passes
