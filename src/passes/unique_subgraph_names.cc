#include "passes/unique_subgraph_names.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace onnxptq::passes {

namespace {

// The values a graph holds itself: its inputs, initializers and node outputs (a body output
// may be an outer value, which its own graph names).
std::vector<ir::Value*> own_values(ir::Graph& g) {
  std::vector<ir::Value*> out;
  std::unordered_set<const ir::Value*> seen;
  auto add = [&](ir::Value* v) {
    if (v && v->graph() == &g && seen.insert(v).second) out.push_back(v);
  };
  for (ir::Value* v : g.inputs()) add(v);
  for (ir::Value* v : g.initializers()) add(v);
  for (const auto& n : g.nodes())
    for (ir::Value* v : n->outputs()) add(v);
  return out;
}

}  // namespace

bool unique_subgraph_names(ir::Model& model, PassContext& context) {
  ir::Graph& root = *model.graph;
  std::vector<ir::Graph*> bodies = root.nested_graphs();
  if (bodies.empty()) return false;
  std::unordered_set<std::string> values, nodes;
  for (ir::Value* v : own_values(root)) values.insert(v->name());
  for (const auto& n : root.nodes()) nodes.insert(n->name);
  size_t renamed = 0;
  for (ir::Graph* body : bodies) {  // enclosing graphs come first (nested_graphs is depth first)
    for (ir::Value* v : own_values(*body)) {
      if (!values.insert(v->name()).second) {
        body->rename_value(v, root.fresh_name(v->name()));
        values.insert(v->name());
        ++renamed;
      }
    }
    for (const auto& n : body->nodes()) {
      if (n->name.empty()) continue;
      if (!nodes.insert(n->name).second) {
        n->name = root.fresh_name(n->name);
        nodes.insert(n->name);
        ++renamed;
      }
    }
  }
  if (renamed > 0)
    context.log.push_back("unique_subgraph_names: " + std::to_string(renamed) +
                          " values and nodes of If/Loop/Scan bodies renamed (their names were taken)");
  return renamed > 0;
}

}  // namespace onnxptq::passes
