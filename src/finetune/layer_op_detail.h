// Private to src/finetune: the LayerOp of each op family (one file each), which make_layer_op
// (layer_op.cc) chooses from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "finetune/layer_op.h"

namespace onnxptq::finetune::detail {

// conv_op.cc: Conv and ConvTranspose (1-D to 3-D, groups, strides, dilations, pads, auto_pad,
// output_padding and output_shape), through oneDNN's forward and backward-weights primitives.
std::unique_ptr<LayerOp> make_conv_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                      int threads);

// linear_op.cc: Gemm (transB, alpha, beta; transA 0) and MatMul with a constant 2-D B.
std::unique_ptr<LayerOp> make_linear_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                        int threads);

// norm_op.cc: InstanceNormalization and LayerNormalization (axis, epsilon), the gradient with
// respect to their scale and bias.
std::unique_ptr<LayerOp> make_norm_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                      int threads);

}  // namespace onnxptq::finetune::detail
