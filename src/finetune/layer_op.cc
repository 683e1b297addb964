#include "finetune/layer_op.h"

#include "finetune/layer_op_detail.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune {

std::unique_ptr<LayerOp> make_layer_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                       int threads) {
  if (!node.domain.empty() && node.domain != "ai.onnx")
    throw Error("finetune: node '" + node.name + "' is " + node.domain + "." + node.op_type +
                ", which fast finetune does not train");
  if (node.op_type == "Conv" || node.op_type == "ConvTranspose")
    return detail::make_conv_op(node, weight_dims, bias_size, threads);
  if (node.op_type == "Gemm" || node.op_type == "MatMul")
    return detail::make_linear_op(node, weight_dims, bias_size, threads);
  if (node.op_type == "InstanceNormalization" || node.op_type == "LayerNormalization")
    return detail::make_norm_op(node, weight_dims, bias_size, threads);
  throw Error("finetune: node '" + node.name + "' is a " + node.op_type +
              ", which fast finetune does not train (Conv, ConvTranspose, Gemm, MatMul, InstanceNormalization, "
              "LayerNormalization)");
}

}  // namespace onnxptq::finetune
