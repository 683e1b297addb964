// Fuses the Erf form of Gelu, x * 0.5 * (1 + erf(x / sqrt(2))), into Gelu (opset >= 20).
#include <cmath>
#include <unordered_set>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

bool is_scalar(const ir::Value* v, double expected) {
  const ir::Tensor* t = float_constant_of(v);
  return t && t->size() == 1 && std::fabs(t->values<float>()[0] - expected) <= 1e-6 * std::fabs(expected);
}

ir::Value* other_input(const ir::Node* n, const ir::Value* known) {
  if (n->inputs().size() != 2 || n->input(0) == n->input(1)) return nullptr;
  return n->input(0) == known ? n->input(1) : n->input(1) == known ? n->input(0) : nullptr;
}

}  // namespace

// Gelu joined ONNX at opset 20, later than Debian's libonnx (1.12, opset 17): models reach it only
// when made at that opset, and ONNX Runtime runs it. Matched from the Erf, as torch exports it:
// Erf(Div(x, sqrt 2) or Mul(x, 1/sqrt 2)) -> Add 1 -> then Mul(x, .) -> Mul 0.5, or Mul(Mul(x, 0.5), .).
bool fuse_gelu(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  if (model.opset("") < 20) return false;
  size_t fused = 0;
  std::unordered_set<const ir::Node*> removed;  // later entries of the snapshot that are gone
  for (ir::Node* erf : nodes_in_order(graph)) {
    if (removed.count(erf) || !is_op(erf, "Erf") || !erf->input(0) || !erf->output(0)) continue;
    ir::Node* scale = erf->input(0)->producer();
    if (!has_single_use(erf->input(0)) || !scale || scale->graph() != &graph) continue;
    ir::Value* x = nullptr;
    if (is_op(scale, "Div") && is_scalar(scale->input(1), std::sqrt(2.0)))
      x = scale->input(0);
    else if (is_op(scale, "Mul") && is_scalar(scale->input(1), std::sqrt(0.5)))
      x = scale->input(0);
    else if (is_op(scale, "Mul") && is_scalar(scale->input(0), std::sqrt(0.5)))
      x = scale->input(1);
    if (!x) continue;
    ir::Node* add = single_user(erf->output(0), "Add");
    if (!add || !is_scalar(other_input(add, erf->output(0)), 1.0)) continue;
    ir::Node* mul = single_user(add->output(0), "Mul");
    if (!mul) continue;
    ir::Value* other = other_input(mul, add->output(0));
    std::vector<ir::Node*> matched = {scale, erf, add, mul};
    ir::Node* last = nullptr;
    if (other == x) {  // (x * (1 + erf)) * 0.5
      ir::Node* half = single_user(mul->output(0), "Mul");
      if (half && is_scalar(other_input(half, mul->output(0)), 0.5)) {
        matched.push_back(half);
        last = half;
      }
    } else if (ir::Node* half = producer_of(other, "Mul");
               half && has_single_use(other) && other_input(half, x) && is_scalar(other_input(half, x), 0.5)) {
      matched.insert(matched.begin(), half);  // (x * 0.5) * (1 + erf)
      last = mul;
    }
    if (!last) continue;
    ir::Node* gelu = graph.insert_node_before(last, "Gelu", {x}, {},
                                              graph.fresh_name(erf->name.empty() ? "gelu" : erf->name + "_gelu"));
    ir::Value* out = last->output(0);
    std::vector<ir::Value*> inner;
    for (ir::Node* n : matched)
      if (n->output(0) != out) inner.push_back(n->output(0));
    for (ir::Node* n : matched) {
      removed.insert(n);
      graph.remove_node(n);
    }
    for (ir::Value* v : inner) graph.remove_value(v);
    graph.set_node_output(gelu, 0, out);
    ++fused;
  }
  if (fused) context.log.push_back("fuse_gelu: " + std::to_string(fused) + " Gelu nodes");
  return fused > 0;
}

}  // namespace onnxptq::passes
