// Fuses u * 1/sqrt(max(sum(u*u), eps)) into LpNormalization(u, p=2) (vai_q_onnx FuseL2Norm).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

ir::Node* producer_used_once(const ir::Value* value, std::string_view op) {
  ir::Node* p = producer_of(value, op);
  return p && has_single_use(value) ? p : nullptr;
}

// The single axis a ReduceSum with keepdims 1 reduces over (attribute, or input from opset 13), or nullopt.
std::optional<int64_t> reduced_axis(const ir::Node* reduce) {
  if (reduce->attr_int("keepdims", 1) != 1) return std::nullopt;
  std::optional<std::vector<int64_t>> axes;
  if (reduce->find_attribute("axes")) {
    axes = reduce->attr_ints("axes", {});
  } else if (reduce->input(1)) {
    axes = constant_ints(reduce->input(1));
  }
  if (!axes || axes->size() != 1) return std::nullopt;
  return (*axes)[0];
}

}  // namespace

// As vai_q_onnx 1.16's FuseL2Norm, rooted at Mul(u, Reciprocal(Sqrt(Max(ReduceSum(Mul(u, u)), eps)))):
// LpNormalization(u, p = 2) named after the root Mul; the six nodes and the eps constant go. Two
// differences: the reference wants u to come from an Unsqueeze and writes the default axis -1
// whatever the ReduceSum reduces; here u may come from anywhere, the ReduceSum must reduce exactly
// one axis with keepdims, and that axis is the LpNormalization's. Exact except where sum(u*u) < eps
// (a zero vector), which the eps guarded.
bool fuse_l2_norm(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t fused = 0;
  for (ir::Node* root : nodes_in_order(graph)) {
    if (!is_op(root, "Mul") || root->inputs().size() != 2 || !root->output(0)) continue;
    ir::Value* u = root->input(0);
    ir::Node* recip = producer_used_once(root->input(1), "Reciprocal");
    ir::Node* sqrt = recip ? producer_used_once(recip->input(0), "Sqrt") : nullptr;
    ir::Node* max = sqrt ? producer_used_once(sqrt->input(0), "Max") : nullptr;
    if (!max || max->inputs().size() != 2) continue;
    size_t sum_side = producer_of(max->input(0), "ReduceSum") ? 0 : 1;
    ir::Node* reduce = producer_used_once(max->input(sum_side), "ReduceSum");
    const ir::Tensor* eps = float_constant_of(max->input(1 - sum_side));
    if (!reduce || !eps || eps->size() != 1) continue;
    ir::Node* square = producer_used_once(reduce->input(0), "Mul");
    if (!square || square->input(0) != u || square->input(1) != u) continue;
    std::optional<int64_t> axis = reduced_axis(reduce);
    if (!axis) continue;
    ir::Value* out = root->output(0);
    ir::Value* eps_value = max->input(1 - sum_side);
    ir::Value* axes_value = reduce->input(1);
    ir::Node* norm = graph.insert_node_before(root, "LpNormalization", {u}, {}, root->name);
    norm->set_attribute(ir::Attribute::of_int("axis", *axis));
    norm->set_attribute(ir::Attribute::of_int("p", 2));
    for (ir::Node* n : {root, recip, sqrt, max, reduce, square}) {
      std::vector<ir::Value*> outputs = n->outputs();
      graph.remove_node(n);
      for (ir::Value* v : outputs)
        if (v != out && v->uses().empty()) graph.remove_value(v);
    }
    graph.set_node_output(norm, 0, out);
    remove_unused_constant(graph, eps_value);
    remove_unused_constant(graph, axes_value);
    ++fused;
  }
  if (fused) context.log.push_back("fuse_l2_norm: " + std::to_string(fused) + " L2 norms fused");
  return fused > 0;
}

}  // namespace onnxptq::passes
