// Folds a BatchNormalization into the weights and bias of the Conv, ConvTranspose or Gemm before it.
#include <cmath>

#include "passes/channel_affine.h"
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// y = x * scale + shift per channel, from an inference-mode BatchNormalization with constant
// float parameters; nullopt when the node is not one.
std::optional<ChannelAffine> batch_norm_affine(const ir::Node& bn, int64_t opset) {
  if (bn.inputs().size() != 5) return std::nullopt;
  for (size_t i = 1; i < bn.outputs().size(); ++i)  // running statistics (training mode)
    if (const ir::Value* v = bn.output(i); v && (!v->uses().empty() || bn.graph()->is_output(v))) return std::nullopt;
  if (bn.attr_int("training_mode", 0) != 0) return std::nullopt;
  if (opset < 9 && bn.attr_int("spatial", 1) != 1) return std::nullopt;  // per-element statistics
  const ir::Tensor* p[4];
  for (size_t i = 0; i < 4; ++i) {
    p[i] = float_constant_of(bn.input(i + 1));
    if (!p[i] || p[i]->rank() != 1 || p[i]->size() != p[0]->size()) return std::nullopt;
  }
  float eps = bn.attr_float("epsilon", 1e-5f);
  auto gamma = p[0]->values<float>(), beta = p[1]->values<float>(), mean = p[2]->values<float>(),
       var = p[3]->values<float>();
  ChannelAffine a;
  for (size_t c = 0; c < gamma.size(); ++c) {
    double s = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
    a.scale.push_back(s);
    a.shift.push_back(beta[c] - mean[c] * s);
  }
  return a;
}

}  // namespace

bool fold_batch_norm(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  int64_t opset = model.opset("");
  size_t folded = 0;
  for (ir::Node* bn : nodes_in_order(graph)) {
    if (!is_op(bn, "BatchNormalization") || !bn->output(0)) continue;
    ir::Node* producer = weighted_producer(graph, bn->input(0));
    if (!producer) continue;
    std::optional<ChannelAffine> affine = batch_norm_affine(*bn, opset);
    if (!affine || !fold_channel_affine(model, *producer, *affine)) continue;
    take_over_output(graph, producer, 0, bn);
    ++folded;
  }
  if (folded) context.log.push_back("fold_batch_norm: folded " + std::to_string(folded) + " BatchNormalization nodes");
  return folded > 0;
}

}  // namespace onnxptq::passes
