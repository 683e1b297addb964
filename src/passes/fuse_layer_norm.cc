// Fuses decomposed layer normalisation over the last axis into LayerNormalization (opset >= 17).
#include <unordered_set>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// The single value of a constant float, or nullopt.
std::optional<float> scalar_of(const ir::Value* v) {
  const ir::Tensor* t = float_constant_of(v);
  if (!t || t->size() != 1) return std::nullopt;
  return t->values<float>()[0];
}

// The input of a binary node other than `known`, or nullptr.
ir::Value* other_input(const ir::Node* n, const ir::Value* known) {
  if (n->inputs().size() != 2 || n->input(0) == n->input(1)) return nullptr;
  return n->input(0) == known ? n->input(1) : n->input(1) == known ? n->input(0) : nullptr;
}

// ReduceMean over the last axis only, keeping dimensions (axes as attribute, or input from opset
// 18); `x` is the tensor normalised, whose rank the reduced input shares.
bool reduces_last_axis(const ir::Node& n, int64_t opset, const ir::Value* x) {
  if (n.attr_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (opset >= 18) {
    const ir::Tensor* t = constant_of(n.input(1));
    if (!t || t->dtype() != ir::DataType::Int64) return false;
    axes.assign(t->values<int64_t>().begin(), t->values<int64_t>().end());
  } else {
    axes = n.attr_ints("axes", {});
  }
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  const ir::ValueType& t = x->type;
  return t.is_tensor() && t.has_shape && axes[0] == static_cast<int64_t>(t.shape.size()) - 1;
}

// gamma or beta as a [D] tensor: all dimensions 1 but the last (a single value is repeated).
std::optional<ir::Tensor> as_row(const ir::Tensor& t, std::optional<int64_t> d, size_t x_rank_bound) {
  if (t.rank() > x_rank_bound) return std::nullopt;
  for (size_t i = 0; i + 1 < t.rank(); ++i)
    if (t.dims()[i] != 1) return std::nullopt;
  int64_t last = t.rank() ? t.dims().back() : 1;
  int64_t size = d ? *d : last;
  if (last != size && last != 1) return std::nullopt;
  if (last == 1 && !d) return std::nullopt;  // the normalised size is not known
  std::vector<float> row(size);
  auto v = t.values<float>();
  for (int64_t i = 0; i < size; ++i) row[i] = v[last == 1 ? 0 : i];
  return ir::Tensor::from_values<float>({size}, row);
}

}  // namespace

// Pattern (as torch exports F.layer_norm): m = ReduceMean(x); d = Sub(x, m); v = ReduceMean(Pow(d, 2));
// n = Div(d, Sqrt(Add(v, eps))); y = Add(Mul(n, gamma), beta), with Mul and Add optional.
bool fuse_layer_norm(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  int64_t opset = model.opset("");
  if (opset < 17) return false;
  size_t fused = 0;
  std::unordered_set<const ir::Node*> removed;  // later entries of the snapshot that are gone
  for (ir::Node* mean : nodes_in_order(graph)) {
    if (removed.count(mean)) continue;
    if (!is_op(mean, "ReduceMean") || !mean->input(0) || !mean->output(0) ||
        !reduces_last_axis(*mean, opset, mean->input(0)))
      continue;
    ir::Value* x = mean->input(0);
    ir::Node* sub = single_user(mean->output(0), "Sub");
    if (!sub || sub->input(0) != x || sub->input(1) != mean->output(0) || !sub->output(0)) continue;
    ir::Value* d = sub->output(0);
    if (d->uses().size() != 2 || graph.is_output(d)) continue;
    ir::Node* power = nullptr;
    ir::Node* div = nullptr;
    for (const ir::Use& u : d->uses()) {
      if (is_op(u.node, "Pow") && u.input == 0) power = u.node;
      if (is_op(u.node, "Div") && u.input == 0) div = u.node;
    }
    if (!power || !div || scalar_of(power->input(1)) != 2.0f) continue;
    ir::Node* var = single_user(power->output(0), "ReduceMean");
    if (!var || !reduces_last_axis(*var, opset, x)) continue;
    ir::Node* add_eps = single_user(var->output(0), "Add");
    if (!add_eps) continue;
    std::optional<float> eps = scalar_of(other_input(add_eps, var->output(0)));
    ir::Node* root = single_user(add_eps->output(0), "Sqrt");
    if (!eps || !root || div->input(1) != root->output(0) || !has_single_use(root->output(0))) continue;
    std::vector<ir::Node*> matched = {mean, sub, power, var, add_eps, root, div};
    ir::Node* last = div;
    const ir::ValueType& xt = x->type;
    std::optional<int64_t> d_size;
    if (xt.is_tensor() && xt.has_shape && !xt.shape.empty() && xt.shape.back().has_value)
      d_size = xt.shape.back().value;
    size_t rank_bound = xt.is_tensor() && xt.has_shape ? xt.shape.size() : 1;
    std::optional<ir::Tensor> gamma, beta;
    if (ir::Node* mul = single_user(last->output(0), "Mul")) {
      const ir::Tensor* g = float_constant_of(other_input(mul, last->output(0)));
      if (g && (gamma = as_row(*g, d_size, rank_bound))) {
        d_size = gamma->size();
        matched.push_back(mul);
        last = mul;
      }
    }
    if (ir::Node* add = single_user(last->output(0), "Add")) {
      const ir::Tensor* b = float_constant_of(other_input(add, last->output(0)));
      if (b && (beta = as_row(*b, d_size, rank_bound))) {
        d_size = beta->size();
        matched.push_back(add);
        last = add;
      }
    }
    if (!d_size || (gamma && gamma->size() != *d_size)) continue;
    if (!gamma) gamma = ir::Tensor::from_values<float>({*d_size}, std::vector<float>(*d_size, 1.0f));
    std::string base = mean->name.empty() ? x->name() : mean->name;
    std::vector<ir::Value*> inputs = {x, add_initializer(model, graph, base + "_scale", std::move(*gamma))};
    if (beta) inputs.push_back(add_initializer(model, graph, base + "_bias", std::move(*beta)));
    ir::Node* ln = graph.insert_node_before(last, "LayerNormalization", inputs, {}, graph.fresh_name(base + "_fused"));
    ln->set_attribute(ir::Attribute::of_int("axis", -1));
    ln->set_attribute(ir::Attribute::of_float("epsilon", *eps));
    ir::Value* out = last->output(0);
    std::vector<ir::Value*> inner;
    for (ir::Node* n : matched)
      for (ir::Value* v : n->outputs())
        if (v && v != out) inner.push_back(v);
    for (auto it = matched.rbegin(); it != matched.rend(); ++it) {
      removed.insert(*it);
      graph.remove_node(*it);
    }
    for (ir::Value* v : inner) graph.remove_value(v);
    graph.set_node_output(ln, 0, out);
    ++fused;
  }
  if (fused) context.log.push_back("fuse_layer_norm: " + std::to_string(fused) + " LayerNormalization nodes");
  return fused > 0;
}

}  // namespace onnxptq::passes
