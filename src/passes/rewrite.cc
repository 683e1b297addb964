// Preconditions and edits shared by the graph-optimisation passes.
#include "passes/rewrite.h"

namespace onnxptq::passes {

bool is_op(const ir::Node* node, std::string_view op_type) {
  return node && node->op_type == op_type && (node->domain.empty() || node->domain == "ai.onnx");
}

const ir::Tensor* constant_of(const ir::Value* value) {
  if (!value) return nullptr;
  if (value->has_initializer()) return value->graph()->is_input(value) ? nullptr : &value->initializer();
  const ir::Node* p = value->producer();
  if (!is_op(p, "Constant") || p->attributes.size() != 1) return nullptr;
  const ir::Attribute& a = p->attributes[0];
  return a.name == "value" && a.type == ir::AttrType::Tensor ? &a.t : nullptr;
}

const ir::Tensor* float_constant_of(const ir::Value* value) {
  const ir::Tensor* t = constant_of(value);
  return t && t->dtype() == ir::DataType::Float ? t : nullptr;
}

bool has_single_use(const ir::Value* value) {
  return value && value->uses().size() == 1 && !value->graph()->is_output(value);
}

ir::Node* single_user(const ir::Value* value, std::string_view op_type) {
  if (!has_single_use(value)) return nullptr;
  ir::Node* user = value->uses()[0].node;
  return is_op(user, op_type) && user->graph() == value->graph() ? user : nullptr;
}

ir::Node* producer_of(const ir::Value* value, std::string_view op_type) {
  if (!value) return nullptr;
  ir::Node* p = value->producer();
  return is_op(p, op_type) && p->graph() == value->graph() ? p : nullptr;
}

ir::Value* add_initializer(ir::Model& model, ir::Graph& graph, std::string_view base, ir::Tensor tensor) {
  ir::Value* v = graph.add_unique_value(base);
  v->type = ir::ValueType::tensor(tensor.dtype(), tensor.dims());
  graph.set_initializer(v, std::move(tensor));
  // IR version 4 (ONNX 1.4) only dropped the rule that initializers be graph inputs.
  if (model.ir_version < 4) model.ir_version = 4;
  return v;
}

void set_constant_input(ir::Model& model, ir::Node* node, size_t index, ir::Tensor tensor) {
  ir::Graph& graph = *node->graph();
  ir::Value* old = node->input(index);
  if (old && old->has_initializer() && old->graph() == &graph && old->uses().size() == 1 && !graph.is_input(old) &&
      !graph.is_output(old)) {
    old->type = ir::ValueType::tensor(tensor.dtype(), tensor.dims());
    graph.set_initializer(old, std::move(tensor));
    return;
  }
  std::string base = old ? old->name() : node->name.empty() ? node->op_type : node->name;
  graph.set_node_input(node, index, add_initializer(model, graph, base, std::move(tensor)));
}

namespace {

// Removes the values a removed node left behind that nothing refers to.
void remove_orphans(ir::Graph& graph, const std::vector<ir::Value*>& values) {
  for (ir::Value* v : values)
    if (v && !v->producer() && v->uses().empty() && !graph.is_output(v) && !graph.is_input(v) && !v->has_initializer())
      graph.remove_value(v);
}

}  // namespace

bool bypass_node(ir::Graph& graph, ir::Node* node, ir::Value* source) {
  ir::Value* out = node->output(0);
  std::vector<ir::Value*> outputs = node->outputs();
  if (!graph.is_output(out)) {
    graph.replace_uses(out, source);
    graph.remove_node(node);
    remove_orphans(graph, outputs);
    return true;
  }
  // The output is part of the model's interface: let source's producer write that name.
  ir::Node* producer = source->producer();
  if (!producer || producer->graph() != &graph || source->graph() != &graph || graph.is_output(source) ||
      graph.is_input(source) || source->has_initializer())
    return false;
  size_t index = source->producer_output();
  graph.remove_node(node);
  graph.replace_uses(source, out);
  graph.set_node_output(producer, index, out);
  graph.remove_value(source);
  remove_orphans(graph, outputs);
  return true;
}

void take_over_output(ir::Graph& graph, ir::Node* producer, size_t index, ir::Node* node) {
  ir::Value* inner = producer->output(index);
  ir::Value* out = node->output(0);
  std::vector<ir::Value*> outputs = node->outputs();
  graph.remove_node(node);
  graph.set_node_output(producer, index, out);
  outputs.push_back(inner);
  remove_orphans(graph, outputs);
}

std::vector<ir::Node*> nodes_in_order(const ir::Graph& graph) { return graph.topological_order(); }

}  // namespace onnxptq::passes
