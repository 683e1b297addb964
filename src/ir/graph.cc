#include "ir/graph.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "onnxptq/error.h"

namespace onnxptq::ir {

// ---------------------------------------------------------------- ValueType

ValueType ValueType::tensor(DataType elem_type) {
  ValueType t;
  t.kind = Kind::Tensor;
  t.elem_type = elem_type;
  return t;
}

ValueType ValueType::tensor(DataType elem_type, const std::vector<int64_t>& dims) {
  ValueType t = tensor(elem_type);
  t.has_shape = true;
  for (int64_t d : dims) t.shape.push_back(Dim::of(d));
  return t;
}

std::optional<std::vector<int64_t>> ValueType::static_shape() const {
  if (!is_tensor() || !has_shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : shape) {
    if (!d.has_value) return std::nullopt;
    dims.push_back(d.value);
  }
  return dims;
}

std::string ValueType::to_string() const {
  if (kind == Kind::None) return "(unknown)";
  if (kind == Kind::Other) return other_name.empty() ? "(not a tensor)" : other_name;
  std::string s(data_type_name(elem_type));
  if (!has_shape) return s + "[?...]";
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    const Dim& d = shape[i];
    s += d.has_value ? std::to_string(d.value) : (d.param.empty() ? "?" : d.param);
  }
  return s + "]";
}

// ---------------------------------------------------------------- Attribute

Attribute Attribute::of_int(std::string name, int64_t value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::Int;
  a.i = value;
  return a;
}

Attribute Attribute::of_float(std::string name, float value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::Float;
  a.f = value;
  return a;
}

Attribute Attribute::of_string(std::string name, std::string value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::String;
  a.s = std::move(value);
  return a;
}

Attribute Attribute::of_ints(std::string name, std::vector<int64_t> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::Ints;
  a.ints = std::move(values);
  return a;
}

Attribute Attribute::of_floats(std::string name, std::vector<float> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::Floats;
  a.floats = std::move(values);
  return a;
}

Attribute Attribute::of_tensor(std::string name, Tensor value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::Tensor;
  a.t = std::move(value);
  return a;
}

// ---------------------------------------------------------------- Node

const Attribute* Node::find_attribute(std::string_view attr_name) const {
  for (const Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

Attribute* Node::find_attribute(std::string_view attr_name) {
  for (Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

const Attribute& Node::typed_attribute(std::string_view attr_name, AttrType type) const {
  const Attribute* a = find_attribute(attr_name);
  if (a->type != type)
    throw Error(describe() + ": attribute '" + std::string(attr_name) + "' has type " +
                std::to_string(static_cast<int>(a->type)) + ", expected " + std::to_string(static_cast<int>(type)));
  return *a;
}

int64_t Node::attr_int(std::string_view attr_name, int64_t fallback) const {
  return find_attribute(attr_name) ? typed_attribute(attr_name, AttrType::Int).i : fallback;
}

float Node::attr_float(std::string_view attr_name, float fallback) const {
  return find_attribute(attr_name) ? typed_attribute(attr_name, AttrType::Float).f : fallback;
}

std::string Node::attr_string(std::string_view attr_name, std::string fallback) const {
  return find_attribute(attr_name) ? typed_attribute(attr_name, AttrType::String).s : fallback;
}

std::vector<int64_t> Node::attr_ints(std::string_view attr_name, std::vector<int64_t> fallback) const {
  return find_attribute(attr_name) ? typed_attribute(attr_name, AttrType::Ints).ints : fallback;
}

std::vector<float> Node::attr_floats(std::string_view attr_name, std::vector<float> fallback) const {
  return find_attribute(attr_name) ? typed_attribute(attr_name, AttrType::Floats).floats : fallback;
}

void Node::set_attribute(Attribute attribute) {
  if (Attribute* existing = find_attribute(attribute.name))
    *existing = std::move(attribute);
  else
    attributes.push_back(std::move(attribute));
}

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> result;
  for (const Attribute& a : attributes) {
    if (a.g) result.push_back(a.g.get());
    for (const auto& g : a.graphs) result.push_back(g.get());
  }
  return result;
}

std::string Node::describe() const {
  std::string op = domain.empty() || domain == "ai.onnx" ? op_type : domain + "." + op_type;
  return "node '" + name + "' (" + op + ")";
}

// ---------------------------------------------------------------- Graph: values

Graph* Graph::root() {
  Graph* g = this;
  while (g->parent_) g = g->parent_;
  return g;
}

void Graph::reserve_name(const std::string& used) {
  if (!used.empty()) root()->taken_names_.insert(used);
}

std::string Graph::fresh_name(std::string_view base) {
  Graph* r = root();
  std::string candidate(base);
  while (candidate.empty() || r->taken_names_.count(candidate))
    candidate = std::string(base) + "_" + std::to_string(++r->name_counter_);
  r->taken_names_.insert(candidate);
  return candidate;
}

Value* Graph::find_value(std::string_view value_name) const {
  auto it = values_.find(std::string(value_name));
  return it == values_.end() ? nullptr : it->second.get();
}

Value* Graph::lookup(std::string_view value_name) const {
  for (const Graph* g = this; g; g = g->parent_)
    if (Value* v = g->find_value(value_name)) return v;
  return nullptr;
}

Value* Graph::find_value_nested(std::string_view value_name) const {
  if (Value* v = find_value(value_name)) return v;
  for (const Graph* g : nested_graphs())
    if (Value* v = g->find_value(value_name)) return v;
  return nullptr;
}

std::vector<Graph*> Graph::nested_graphs() const {
  std::vector<Graph*> found;
  for (const auto& node : nodes_)
    for (Graph* sub : node->subgraphs()) {
      found.push_back(sub);
      for (Graph* deeper : sub->nested_graphs()) found.push_back(deeper);
    }
  return found;
}

Value* Graph::add_value(const std::string& value_name) {
  if (value_name.empty()) throw Error("a value needs a name");
  auto [it, inserted] = values_.try_emplace(value_name);
  if (!inserted) throw Error("graph '" + name + "' already has a value named '" + value_name + "'");
  it->second = std::make_unique<Value>();
  it->second->name_ = value_name;
  it->second->graph_ = this;
  reserve_name(value_name);
  return it->second.get();
}

Value* Graph::add_unique_value(std::string_view base) { return add_value(fresh_name(base)); }

void Graph::remove_value(Value* value) {
  if (value->producer_ || !value->uses_.empty() || is_input(value) || is_output(value))
    throw Error("value '" + value->name_ + "' is still in use and cannot be removed");
  if (value->initializer_) remove_initializer(value);
  std::erase(value_info_, value);
  values_.erase(value->name_);
}

void Graph::rename_value(Value* value, const std::string& new_name) {
  if (new_name == value->name_) return;
  if (find_value(new_name)) throw Error("graph '" + name + "' already has a value named '" + new_name + "'");
  auto node = values_.extract(value->name_);
  node.key() = new_name;
  value->name_ = new_name;
  values_.insert(std::move(node));
  reserve_name(new_name);
}

void Graph::remove_input(Value* value) { std::erase(inputs_, value); }

bool Graph::is_input(const Value* value) const {
  return std::find(inputs_.begin(), inputs_.end(), value) != inputs_.end();
}

bool Graph::is_output(const Value* value) const {
  return std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
}

void Graph::set_initializer(Value* value, Tensor tensor) {
  if (!value->initializer_) initializers_.push_back(value);
  tensor.name = value->name_;
  value->initializer_ = std::move(tensor);
}

void Graph::remove_initializer(Value* value) {
  value->initializer_.reset();
  std::erase(initializers_, value);
}

void Graph::add_value_info(Value* value) {
  if (std::find(value_info_.begin(), value_info_.end(), value) == value_info_.end()) value_info_.push_back(value);
}

// ---------------------------------------------------------------- Graph: nodes

Node* Graph::make_node(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                       std::string node_name, std::string domain) {
  auto node = std::make_unique<Node>();
  node->op_type = std::move(op_type);
  node->domain = std::move(domain);
  node->name = std::move(node_name);
  node->graph_ = this;
  reserve_name(node->name);
  Node* n = node.get();
  for (size_t i = 0; i < inputs.size(); ++i) set_node_input(n, i, inputs[i]);
  for (size_t i = 0; i < outputs.size(); ++i) set_node_output(n, i, outputs[i]);
  nodes_.push_back(std::move(node));
  return n;
}

Node* Graph::add_node(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                      std::string node_name, std::string domain) {
  return make_node(std::move(op_type), std::move(inputs), std::move(outputs), std::move(node_name), std::move(domain));
}

Node* Graph::insert_node_before(const Node* position, std::string op_type, std::vector<Value*> inputs,
                                std::vector<Value*> outputs, std::string node_name, std::string domain) {
  Node* n =
      make_node(std::move(op_type), std::move(inputs), std::move(outputs), std::move(node_name), std::move(domain));
  auto at = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == position; });
  std::rotate(at, nodes_.end() - 1, nodes_.end());
  return n;
}

void Graph::detach_subgraph_uses(const Node* node) {
  for (Graph* g : node->subgraphs())
    for (const auto& inner : g->nodes_) {
      for (size_t i = 0; i < inner->inputs_.size(); ++i)
        if (Value* v = inner->inputs_[i]; v && v->graph_ != g)
          std::erase_if(v->uses_, [&](const Use& u) { return u.node == inner.get() && u.input == i; });
      detach_subgraph_uses(inner.get());
    }
}

void Graph::remove_node(Node* node) {
  for (size_t i = 0; i < node->inputs_.size(); ++i) set_node_input(node, i, nullptr);
  for (Value* out : node->outputs_)
    if (out) out->producer_ = nullptr;
  detach_subgraph_uses(node);  // a removed node takes its subgraphs along
  std::erase_if(nodes_, [&](const auto& p) { return p.get() == node; });
}

void Graph::set_node_input(Node* node, size_t index, Value* value) {
  if (index >= node->inputs_.size()) node->inputs_.resize(index + 1, nullptr);
  if (Value* old = node->inputs_[index]) {
    std::erase_if(old->uses_, [&](const Use& u) { return u.node == node && u.input == index; });
  }
  node->inputs_[index] = value;
  if (value) value->uses_.push_back({node, index});
}

void Graph::set_node_output(Node* node, size_t index, Value* value) {
  if (value && value->producer_ && !(value->producer_ == node && value->producer_output_ == index))
    throw Error("value '" + value->name_ + "' is produced by " + value->producer_->describe() +
                " and cannot also be an output of " + node->describe());
  if (index >= node->outputs_.size()) node->outputs_.resize(index + 1, nullptr);
  if (Value* old = node->outputs_[index]) old->producer_ = nullptr;
  node->outputs_[index] = value;
  if (value) {
    value->producer_ = node;
    value->producer_output_ = index;
  }
}

void Graph::replace_uses(Value* from, Value* to) {
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) u.node->graph_->set_node_input(u.node, u.input, to);
}

namespace {

// True when `g` is `scope` or nested inside it.
bool graph_within(const Graph* g, const Graph* scope) {
  for (; g; g = g->parent())
    if (g == scope) return true;
  return false;
}

void collect_outer_uses(const Graph* sub, const Graph* outer_scope, std::vector<Value*>& found) {
  for (const auto& inner : sub->nodes()) {
    for (Value* v : inner->inputs())
      if (v && !graph_within(v->graph(), sub) && graph_within(outer_scope, v->graph()) &&
          std::find(found.begin(), found.end(), v) == found.end())
        found.push_back(v);
    for (Graph* deeper : inner->subgraphs()) collect_outer_uses(deeper, outer_scope, found);
  }
}

}  // namespace

std::vector<Value*> Graph::implicit_inputs(const Node* node) const {
  std::vector<Value*> found;
  for (Graph* sub : node->subgraphs()) collect_outer_uses(sub, this, found);
  return found;
}

std::vector<const Value*> Graph::fed_inputs() const {
  std::vector<const Value*> fed;
  for (const Value* v : inputs_)
    if (!v->has_initializer()) fed.push_back(v);
  return fed;
}

void Graph::sort_nodes() {
  std::vector<Node*> order = topological_order();
  std::unordered_map<const Node*, size_t> rank;
  for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
  std::stable_sort(nodes_.begin(), nodes_.end(), [&](const std::unique_ptr<Node>& a, const std::unique_ptr<Node>& b) {
    return rank[a.get()] < rank[b.get()];
  });
}

std::vector<Node*> Graph::topological_order_with_bodies() const {
  std::vector<Node*> order;
  for (Node* n : topological_order()) {
    for (const Graph* body : n->subgraphs()) {
      std::vector<Node*> inner = body->topological_order_with_bodies();
      order.insert(order.end(), inner.begin(), inner.end());
    }
    order.push_back(n);
  }
  return order;
}

std::vector<Node*> Graph::topological_order() const {
  // Kahn's algorithm, always taking the earliest ready node in file order, so a graph already
  // in order comes out unchanged.
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  std::vector<size_t> waiting(nodes_.size(), 0);
  std::vector<std::vector<size_t>> successors(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<Value*> needs(nodes_[i]->inputs_.begin(), nodes_[i]->inputs_.end());
    for (Value* v : implicit_inputs(nodes_[i].get())) needs.push_back(v);
    for (Value* v : needs) {
      if (!v || !v->producer_ || v->producer_->graph_ != this) continue;
      successors[index[v->producer_]].push_back(i);
      ++waiting[i];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(nodes_[i].get());
    for (size_t s : successors[i])
      if (--waiting[s] == 0) ready.push(s);
  }
  if (order.size() != nodes_.size()) {
    // Walk back from a node left waiting through waiting producers: the first node seen twice
    // lies on a cycle (the others may only be downstream of one).
    size_t at = 0;
    while (waiting[at] == 0) ++at;
    std::vector<bool> seen(nodes_.size(), false);
    while (!seen[at]) {
      seen[at] = true;
      for (Value* v : nodes_[at]->inputs_)
        if (v && v->producer_ && v->producer_->graph_ == this && waiting[index[v->producer_]] != 0) {
          at = index[v->producer_];
          break;
        }
    }
    throw Error("graph '" + name + "' has a cycle through " + nodes_[at]->describe());
  }
  return order;
}

}  // namespace onnxptq::ir
