// Folds an Add of a per-output-channel constant ([C,1,1], [1,C,1,1], a scalar) into the bias of the Conv before it.
#include <unordered_set>

#include "passes/channel_affine.h"
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

bool fuse_conv_add_bias(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t fused = 0;
  std::unordered_set<const ir::Node*> removed;  // later entries of the snapshot that are gone
  for (ir::Node* conv : nodes_in_order(graph)) {
    if (removed.count(conv)) continue;
    if (!is_op(conv, "Conv") || !conv->output(0)) continue;
    ir::Node* add = single_user(conv->output(0), "Add");
    if (!add || !add->output(0) || add->input(0) == add->input(1)) continue;
    size_t other = add->input(0) == conv->output(0) ? 1 : 0;
    const ir::Tensor* k = float_constant_of(add->input(other));
    std::optional<ChannelLayout> layout = channel_layout(*conv);
    if (!k || !layout) continue;
    const int64_t channels = layout->channels;
    std::optional<std::vector<float>> addend = per_channel(*k, *layout);
    if (!addend) continue;
    std::vector<float> bias(channels, 0.0f);
    if (const ir::Value* b_in = conv->input(2)) {
      const ir::Tensor* b = float_constant_of(b_in);
      if (!b || b->size() != channels) continue;
      std::copy(b->values<float>().begin(), b->values<float>().end(), bias.begin());
    }
    for (int64_t c = 0; c < channels; ++c) bias[c] += (*addend)[c];
    set_constant_input(model, conv, 2, ir::Tensor::from_values<float>({channels}, bias));
    removed.insert(add);
    take_over_output(graph, conv, 0, add);
    ++fused;
  }
  if (fused) context.log.push_back("fuse_conv_add_bias: " + std::to_string(fused) + " Adds folded into Conv biases");
  return fused > 0;
}

}  // namespace onnxptq::passes
