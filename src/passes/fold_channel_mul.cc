// Folds a Mul by a per-output-channel constant (a scalar, [1], [C,1,1], [1,C,1,1]; either operand
// order) into the weights and bias of the Conv, ConvTranspose or Gemm before it. ONNX Runtime's
// ConvMulFusion takes only Conv * K with K a scalar or [C,1,1]; PaddlePaddle exports scale
// layers as K * Conv with K of shape [1] (the PP-OCRv4 detector has 28 after Convs), and each one
// left is one more tensor to calibrate and quantize.
#include "passes/channel_affine.h"
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

bool fold_channel_mul(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t folded = 0;
  for (ir::Node* mul : nodes_in_order(graph)) {
    if (!is_op(mul, "Mul") || !mul->output(0) || mul->inputs().size() != 2) continue;
    for (size_t x = 0; x < 2; ++x) {
      ir::Node* producer = weighted_producer(graph, mul->input(x));
      const ir::Tensor* k = float_constant_of(mul->input(1 - x));
      if (!producer || !k) continue;
      std::optional<ChannelLayout> layout = channel_layout(*producer);
      std::optional<std::vector<float>> factors = layout ? per_channel(*k, *layout) : std::nullopt;
      if (!factors) continue;
      ChannelAffine a;
      a.scale.assign(factors->begin(), factors->end());
      a.shift.assign(factors->size(), 0.0);
      if (!fold_channel_affine(model, *producer, a)) continue;
      take_over_output(graph, producer, 0, mul);
      ++folded;
      break;
    }
  }
  if (folded)
    context.log.push_back("fold_channel_mul: folded " + std::to_string(folded) +
                          " Muls by per-channel constants into the Conv, ConvTranspose or Gemm before them");
  return folded > 0;
}

}  // namespace onnxptq::passes
