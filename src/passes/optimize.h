// The graph-optimisation passes of the preparation step (issue 6), one file each, and the list
// the pipeline runs them from.
#pragma once

#include <vector>

#include "passes/pass.h"

namespace onnxptq::passes {

bool eliminate_identity(ir::Model& model, PassContext& context);
bool eliminate_noop(ir::Model& model, PassContext& context);
bool fold_constants(ir::Model& model, PassContext& context);
bool fold_batch_norm(ir::Model& model, PassContext& context);
bool fold_channel_mul(ir::Model& model, PassContext& context);
bool convert_bn_to_conv(ir::Model& model, PassContext& context);
bool fuse_conv_add_bias(ir::Model& model, PassContext& context);
bool fuse_matmul_add_gemm(ir::Model& model, PassContext& context);
bool fuse_layer_norm(ir::Model& model, PassContext& context);
bool fuse_gelu(ir::Model& model, PassContext& context);
bool dedupe_initializers(ir::Model& model, PassContext& context);
bool eliminate_dead(ir::Model& model, PassContext& context);

// The passes optimize_model runs, in order. Each is exact (outputs unchanged up to float
// rounding) and says whether it changed anything, so the list may be run until nothing changes.
const std::vector<PassInfo>& optimization_passes();

// Passes run only when an option or `--passes` asks for them: convert_bn_to_conv (the seed's
// ConvertBNToConv, an NPU option; it turns an unquantized BatchNormalization into a quantized
// Conv) and dedupe_initializers (not before quantizing: see optimize.cc).
const std::vector<PassInfo>& optional_optimization_passes();

}  // namespace onnxptq::passes
