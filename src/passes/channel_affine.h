// Folding y = x * scale + shift per output channel into the weights and bias of the Conv,
// ConvTranspose or Gemm computing x: what fold_batch_norm and fold_channel_mul share.
#pragma once

#include <optional>
#include <vector>

#include "ir/model.h"

namespace onnxptq::passes {

struct ChannelAffine {
  std::vector<double> scale, shift;  // in double: the folded weights get one rounding each
};

// The Conv, ConvTranspose or Gemm of `graph` whose output 0 is `x`, used only once (by the node
// to fold into it), or nullptr.
ir::Node* weighted_producer(const ir::Graph& graph, const ir::Value* x);

// The producer's output channels and the rank of its output (Conv, ConvTranspose: the weight's
// rank; Gemm: 2, the channels being N), when its weight is a constant.
struct ChannelLayout {
  int64_t channels = 0;
  size_t rank = 0;
};
std::optional<ChannelLayout> channel_layout(const ir::Node& producer);

// The constant k as one value per channel of an output with this layout (channels on axis 1),
// when applying it elementwise changes neither the output's shape nor differs along anything but
// the channel axis: a scalar, [1], [C,1,1], [1,C,1,1], [C] for Gemm...
std::optional<std::vector<float>> per_channel(const ir::Tensor& k, ChannelLayout layout);

// Gives the producer the weights and bias that compute a(x) directly; false (nothing changed)
// when its weights or bias are not constants of the expected shapes. A producer without a bias
// gets one unless every shift is 0.
bool fold_channel_affine(ir::Model& model, ir::Node& producer, const ChannelAffine& a);

}  // namespace onnxptq::passes
