// The list of graph-optimisation passes, in the order the preparation step runs them.
#include "passes/optimize.h"

namespace onnxptq::passes {

const std::vector<PassInfo>& optimization_passes() {
  // Identities first so constants behind them are seen as constants; constants folded before
  // the fusions that need constant weights; dead code last to drop what the others left.
  static const std::vector<PassInfo> passes = {
      {"eliminate_identity", "remove Identity and inference Dropout nodes", eliminate_identity},
      {"fold_constants", "compute nodes whose inputs are all constants; Constant nodes to initializers",
       fold_constants},
      {"eliminate_noop", "remove Reshape, Transpose, Cast, Slice and Pad nodes that change nothing", eliminate_noop},
      {"fold_batch_norm", "fold BatchNormalization into the Conv, ConvTranspose or Gemm before it", fold_batch_norm},
      {"fold_channel_mul", "fold a Mul by a per-channel constant into the Conv, ConvTranspose or Gemm before it",
       fold_channel_mul},
      {"fuse_conv_add_bias", "fold an Add of a per-channel constant into the Conv bias before it", fuse_conv_add_bias},
      {"fuse_matmul_add_gemm", "MatMul of a 2-D input and a constant, plus a constant Add, into Gemm",
       fuse_matmul_add_gemm},
      {"fuse_layer_norm", "decomposed layer normalisation into LayerNormalization (opset >= 17)", fuse_layer_norm},
      {"fuse_gelu", "Erf-based Gelu subgraph into Gelu (opset >= 20)", fuse_gelu},
      {"eliminate_dead", "remove nodes, initializers and value_info nothing uses", eliminate_dead},
  };
  return passes;
}

const std::vector<PassInfo>& optional_optimization_passes() {
  // Not run before quantizing: an initializer shared by two nodes gets one quantization, and two
  // equal biases behind inputs of different scales need two (Quark even copies shared ones).
  static const std::vector<PassInfo> passes = {
      {"dedupe_initializers", "share equal initializers", dedupe_initializers},
      {"convert_bn_to_conv", "BatchNormalization on a 4-D input into a 1x1 depthwise Conv", convert_bn_to_conv},
  };
  return passes;
}

}  // namespace onnxptq::passes
