// The computation of one finetuned node and the gradient of a loss with respect to its
// parameters: what AdaRound and AdaQuant train, layer by layer (Nagel et al., "Up or Down?
// Adaptive Rounding for Post-Training Quantization", ICML 2020; Hubara et al., "Accurate Post
// Training Quantization With Small Calibration Sets", arXiv:2006.10518; Quark for ONNX's fast
// finetune, whose TargetOpType these are).
//
// Every node has its trained parameters at the same places: the weight is input 1 (Conv and
// ConvTranspose W, Gemm and MatMul B, InstanceNormalization and LayerNormalization scale), the
// bias input 2 (Conv B, Gemm C, the normalizations' B), when the node has it (a MatMul's is the
// constant of the Add after it, for bias correction). The node's input 0 is the layer's input,
// given as a batch: its first dimension is the batch (the samples of a mini-batch concatenated),
// the rest as the node sees one sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"

namespace onnxptq::finetune {

class LayerOp {
 public:
  virtual ~LayerOp() = default;

  // The output dims for input dims `x_dims` (Error when the input does not fit the node).
  virtual std::vector<int64_t> output_dims(const std::vector<int64_t>& x_dims) const = 0;

  // y = node(x; w, b). `w` holds weight_size() values in the weight's layout, `b` bias_size()
  // values or is nullptr when bias_size() is 0; y gets the product of output_dims(x_dims).
  virtual void forward(const float* x, const std::vector<int64_t>& x_dims, const float* w, const float* b,
                       float* y) const = 0;

  // The gradients of a loss L with respect to the weight and the bias, given dy = dL/dy at the
  // forward's output for the same x and w: dw gets weight_size() values, db bias_size() (either
  // may be nullptr: not wanted). Overwritten, not accumulated.
  virtual void backward(const float* x, const std::vector<int64_t>& x_dims, const float* w, const float* dy, float* dw,
                        float* db) const = 0;

  virtual size_t weight_size() const = 0;
  virtual size_t bias_size() const = 0;

  // The axis of output dims `y_dims` along which the bias has one value a position: 1 (channels
  // first), the last for Gemm and MatMul.
  virtual size_t bias_axis(const std::vector<int64_t>& y_dims) const {
    (void)y_dims;
    return 1;
  }
};

// The LayerOp of `node` (Conv, ConvTranspose, Gemm, MatMul, InstanceNormalization or
// LayerNormalization, ai.onnx domain) with its weight of dims `weight_dims` and a bias of
// `bias_size` values (0: none), computing on `threads` threads (0: all). Error naming the node
// for any other op, or attributes it cannot compute (Gemm's transA, ...).
std::unique_ptr<LayerOp> make_layer_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                       int threads);

}  // namespace onnxptq::finetune
