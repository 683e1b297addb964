// Folds a BatchNormalization into the weights and bias of the Conv, ConvTranspose or Gemm before it.
#include <cmath>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// y = x * scale + shift per channel, from an inference-mode BatchNormalization with constant
// float parameters; nullopt when the node is not one.
struct ChannelAffine {
  std::vector<double> scale, shift;  // in double: the folded weights get one rounding each
};

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

// The output channel of each weight element's row for Conv ([M, C/g, k...]: axis 0) and
// ConvTranspose ([C, M/g, k...]: channel group(c) * M/g + axis-1 index).
bool scale_conv_weight(const ir::Node& node, ir::Tensor& w, const std::vector<double>& scale) {
  if (w.rank() < 3) return false;
  int64_t inner = 1;
  for (size_t d = 2; d < w.rank(); ++d) inner *= w.dims()[d];
  auto values = w.mutable_values<float>();
  int64_t d0 = w.dims()[0], d1 = w.dims()[1];
  if (node.op_type == "Conv") {
    if (d0 != static_cast<int64_t>(scale.size())) return false;
    for (int64_t m = 0; m < d0; ++m)
      for (int64_t j = 0; j < d1 * inner; ++j)
        values[m * d1 * inner + j] = static_cast<float>(values[m * d1 * inner + j] * scale[m]);
    return true;
  }
  int64_t group = node.attr_int("group", 1);
  if (group <= 0 || d0 % group != 0 || d1 * group != static_cast<int64_t>(scale.size())) return false;
  int64_t in_per_group = d0 / group;
  for (int64_t c = 0; c < d0; ++c)
    for (int64_t j = 0; j < d1; ++j)
      for (int64_t k = 0; k < inner; ++k) {
        float& v = values[(c * d1 + j) * inner + k];
        v = static_cast<float>(v * scale[(c / in_per_group) * d1 + j]);
      }
  return true;
}

bool fold_into(ir::Model& model, ir::Node& producer, const ChannelAffine& a) {
  const ir::Tensor* w = float_constant_of(producer.input(1));
  if (!w) return false;
  size_t channels = a.scale.size();
  ir::Tensor new_w(ir::DataType::Float, w->dims());
  std::copy(w->values<float>().begin(), w->values<float>().end(), new_w.mutable_values<float>().begin());
  std::vector<double> bias(channels, 0.0);
  if (producer.op_type == "Gemm") {
    // Y = alpha * A' * B' + beta * C over [M, N]: the channel is N, B's column (row when transB).
    if (w->rank() != 2) return false;
    bool trans_b = producer.attr_int("transB", 0) != 0;
    int64_t k = w->dims()[trans_b ? 1 : 0], n = w->dims()[trans_b ? 0 : 1];
    if (n != static_cast<int64_t>(channels)) return false;
    auto values = new_w.mutable_values<float>();
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c) {
        float& v = values[trans_b ? c * k + r : r * n + c];
        v = static_cast<float>(v * a.scale[c]);
      }
    if (const ir::Value* c_in = producer.input(2)) {
      const ir::Tensor* c = float_constant_of(c_in);
      // A C broadcast along M only: scalar, [N] or [1, N].
      if (!c || !(c->size() == 1 || (c->size() == n && c->dims().back() == n && c->rank() <= 2))) return false;
      double beta = producer.attr_float("beta", 1.0f);
      for (size_t i = 0; i < channels; ++i) bias[i] = beta * c->values<float>()[c->size() == 1 ? 0 : i];
    }
    producer.set_attribute(ir::Attribute::of_float("beta", 1.0f));
  } else {
    if (!scale_conv_weight(producer, new_w, a.scale)) return false;
    if (const ir::Value* b_in = producer.input(2)) {
      const ir::Tensor* b = float_constant_of(b_in);
      if (!b || b->size() != static_cast<int64_t>(channels)) return false;
      std::copy(b->values<float>().begin(), b->values<float>().end(), bias.begin());
    }
  }
  std::vector<float> new_b(channels);
  for (size_t i = 0; i < channels; ++i) new_b[i] = static_cast<float>(bias[i] * a.scale[i] + a.shift[i]);
  set_constant_input(model, &producer, 1, std::move(new_w));
  set_constant_input(model, &producer, 2, ir::Tensor::from_values<float>({static_cast<int64_t>(channels)}, new_b));
  return true;
}

}  // namespace

bool fold_batch_norm(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  int64_t opset = model.opset("");
  size_t folded = 0;
  for (ir::Node* bn : nodes_in_order(graph)) {
    if (!is_op(bn, "BatchNormalization") || !bn->output(0)) continue;
    ir::Value* x = bn->input(0);
    ir::Node* producer = x ? x->producer() : nullptr;
    if (!producer || producer->graph() != &graph || !has_single_use(x) || x->producer_output() != 0) continue;
    if (!is_op(producer, "Conv") && !is_op(producer, "ConvTranspose") && !is_op(producer, "Gemm")) continue;
    std::optional<ChannelAffine> affine = batch_norm_affine(*bn, opset);
    if (!affine || !fold_into(model, *producer, *affine)) continue;
    take_over_output(graph, producer, 0, bn);
    ++folded;
  }
  if (folded) context.log.push_back("fold_batch_norm: folded " + std::to_string(folded) + " BatchNormalization nodes");
  return folded > 0;
}

}  // namespace onnxptq::passes
