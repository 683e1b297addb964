// Fuses the decomposed instance norm x*k + (beta - mean*k) into InstanceNormalization (vai_q_onnx).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// The producer of `value` when it is `op` and `value` has exactly `uses` readers (not a graph output).
ir::Node* producer_used(const ir::Value* value, std::string_view op, size_t uses) {
  ir::Node* p = producer_of(value, op);
  return p && value->uses().size() == uses && !value->graph()->is_output(value) ? p : nullptr;
}

// A per-channel constant of a rank-`rank` input with `channels` channels: `channels` values that
// broadcast along axis 1 only ([C], [C,1,1], [1,C,1,1], ...), as a rank-1 tensor.
std::optional<ir::Tensor> channel_vector(const ir::Value* value, size_t rank, int64_t channels) {
  const ir::Tensor* t = float_constant_of(value);
  if (!t || t->size() != channels || t->rank() > rank) return std::nullopt;
  for (size_t d = 0; d < t->rank(); ++d) {
    size_t axis = rank - t->rank() + d;  // right-aligned broadcasting
    if (t->dims()[d] != 1 && axis != 1) return std::nullopt;
  }
  if (channels > 1 && t->rank() < rank - 1) return std::nullopt;  // a [C] tensor would meet the last axis
  return ir::Tensor::from_values<float>({channels},
                                        std::vector<float>(t->values<float>().begin(), t->values<float>().end()));
}

struct InstanceNormMatch {
  ir::Value *x, *gamma, *beta;
  float epsilon;
  std::vector<ir::Node*> nodes;  // root first
  ir::Value* eps_value;
};

// The reference's producer-by-producer walk from the root Add, checked also for what it takes for
// granted (the same x and mean everywhere, a square, single readers), so the fusion is exact.
std::optional<InstanceNormMatch> match(ir::Node* add0) {
  if (!is_op(add0, "Add") || add0->inputs().size() != 2 || !add0->output(0)) return std::nullopt;
  ir::Node* mul_x = producer_used(add0->input(0), "Mul", 1);
  ir::Node* sub0 = producer_used(add0->input(1), "Sub", 1);
  if (!mul_x || !sub0) return std::nullopt;
  ir::Node* mul0 = producer_used(sub0->input(1), "Mul", 1);
  if (!mul0) return std::nullopt;
  ir::Node* gap_mean = producer_of(mul0->input(0), "GlobalAveragePool");
  ir::Node* mul1 = producer_used(mul0->input(1), "Mul", 2);
  if (!gap_mean || !mul1 || gap_mean->output(0)->uses().size() != 2 || add0->graph()->is_output(gap_mean->output(0)))
    return std::nullopt;
  ir::Node* recip = producer_used(mul1->input(0), "Reciprocal", 1);
  ir::Node* sqrt = recip ? producer_used(recip->input(0), "Sqrt", 1) : nullptr;
  ir::Node* add1 = sqrt ? producer_used(sqrt->input(0), "Add", 1) : nullptr;
  ir::Node* gap_var = add1 ? producer_used(add1->input(0), "GlobalAveragePool", 1) : nullptr;
  ir::Node* mul2 = gap_var ? producer_used(gap_var->input(0), "Mul", 1) : nullptr;
  ir::Node* sub1 = mul2 ? producer_used(mul2->input(0), "Sub", 2) : nullptr;
  if (!sub1 || mul2->input(1) != sub1->output(0) || sub1->input(1) != gap_mean->output(0)) return std::nullopt;
  ir::Value* x = sub1->input(0);
  if (gap_mean->input(0) != x) return std::nullopt;
  ir::Value* k = mul1->output(0);
  if (!((mul_x->input(0) == x && mul_x->input(1) == k) || (mul_x->input(1) == x && mul_x->input(0) == k)))
    return std::nullopt;
  const ir::Tensor* eps = float_constant_of(add1->input(1));
  if (!eps || eps->size() != 1) return std::nullopt;
  return InstanceNormMatch{x,
                           mul1->input(1),
                           sub0->input(0),
                           eps->values<float>()[0],
                           {add0, mul_x, sub0, mul0, gap_mean, mul1, recip, sqrt, add1, gap_var, mul2, sub1},
                           add1->input(1)};
}

}  // namespace

// As vai_q_onnx 1.16's FuseInstanceNorm: InstanceNormalization(x, gamma, beta, epsilon) named after
// the root Add and writing its output, gamma and beta reshaped to [C]; the 12 matched nodes and the
// eps constant go. x's channel count must be known to check gamma and beta are per channel.
bool fuse_instance_norm(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t fused = 0;
  for (ir::Node* root : nodes_in_order(graph)) {
    if (root->graph() != &graph) continue;
    std::optional<InstanceNormMatch> m = match(root);
    if (!m) continue;
    const ir::ValueType& type = m->x->type;
    if (!type.is_tensor() || !type.has_shape || type.shape.size() < 3 || !type.shape[1].has_value) continue;
    size_t rank = type.shape.size();
    int64_t channels = type.shape[1].value;
    std::optional<ir::Tensor> gamma = channel_vector(m->gamma, rank, channels);
    std::optional<ir::Tensor> beta = channel_vector(m->beta, rank, channels);
    if (!gamma || !beta) continue;
    ir::Value* out = root->output(0);
    ir::Node* norm = graph.insert_node_before(root, "InstanceNormalization", {m->x, m->gamma, m->beta}, {}, root->name);
    norm->set_attribute(ir::Attribute::of_float("epsilon", m->epsilon));
    for (ir::Node* n : m->nodes) {
      std::vector<ir::Value*> outputs = n->outputs();
      graph.remove_node(n);
      for (ir::Value* v : outputs)
        if (v != out && v->uses().empty()) graph.remove_value(v);
    }
    graph.set_node_output(norm, 0, out);
    ir::Value* old_gamma = m->gamma;
    ir::Value* old_beta = m->beta;
    set_constant_input(model, norm, 1, std::move(*gamma));
    set_constant_input(model, norm, 2, std::move(*beta));
    for (ir::Value* v : {old_gamma, old_beta, m->eps_value}) remove_unused_constant(graph, v);
    ++fused;
  }
  if (fused) context.log.push_back("fuse_instance_norm: " + std::to_string(fused) + " instance norms fused");
  return fused > 0;
}

}  // namespace onnxptq::passes
