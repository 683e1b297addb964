// enable_dpu on the quantizer's side: the node filter the DPU rewrites use, and the QDQ removal
// between annotated producers and their activations (vai_q_onnx's VitisQDQDPUQuantizer) on the plan.
#pragma once

#include <cstddef>

#include "ir/model.h"
#include "passes/pass.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// A PassContext whose should_quantize is vai_q_onnx's should_quantize_node for `config`: the op
// types quantized_op_types gives for `model`, nodes_to_quantize and nodes_to_exclude (with the nodes that
// input_nodes / output_nodes exclude in `model`, vai_q_onnx's get_exclude_nodes).
passes::PassContext dpu_pass_context(const ir::Model& model, const QuantConfig& config);

// That QDQ removal on a plan made for `model`: every tensor that is output 0 of a Conv, Add, MaxPool,
// AveragePool, GlobalAveragePool, MatMul or Gemm and input 0 of an activation the NPU fuses (Relu,
// Clip with constant bounds 0 and 6, LeakyRelu with RemoveQDQConvLeakyRelu, PRelu with
// RemoveQDQConvPRelu, Gelu with RemoveQDQConvGelu; with RemoveQDQInstanceNorm an
// InstanceNormalization counts as a producer too), and every Pad output read by an average
// pool, leaves the plan (no Q/DQ; the activation node stays, float) and is recorded in
// plan.fused_activations. Tensors sharing its parameters keep them (the first becomes their
// provider, with the removed tensor's range). A tensor that another kind of node also reads, or
// that is a graph output, keeps its Q/DQ with a warning in plan.warnings (vai_q_onnx rejects the
// edit when it leaves a reader without input). Returns how many tensors left the plan.
size_t fuse_annotated_activations(Plan& plan, const ir::Model& model, const QuantConfig& config);

}  // namespace onnxptq::quant
