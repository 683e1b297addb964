// Rewrites of the private copy of a graph that a Session runs, for speed only: they never touch
// a tensor that must stay visible (observed, transformed, or a graph output).
#pragma once

#include <functional>

#include "ir/graph.h"

namespace onnxptq::engine {

// The domain of the engine's own ops (never written to a model file).
inline constexpr const char* kEngineDomain = "onnxptq.engine";

// Conv followed by its only user Relu / LeakyRelu / Clip (constant bounds) / HardSigmoid /
// HardSwish / Sigmoid / Tanh, or by x * Sigmoid(x) (SiLU: a Sigmoid and a Mul its only users,
// activation "Swish"), becomes one FusedConv node with the Conv's attributes plus
// `activation` (the op type) and `activation_params` (alpha, beta: LeakyRelu's alpha,
// HardSigmoid's alpha and beta, Clip's min and max). Returns how many were fused.
int fuse_conv_activations(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible);

// Quark's BFPQuantizeDequantize / MXQuantizeDequantize nodes reading an initializer (a weight or
// bias of a block-format model) replaced by their output, computed once: the convolution reading
// it then has constant weights, which the channels-last pass and the kernels' packing need.
// Returns how many nodes were folded (block_constants.cc).
int fold_block_quantized_constants(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible);

}  // namespace onnxptq::engine
