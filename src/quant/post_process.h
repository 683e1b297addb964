// Quark's post-processes of the quantized model (its apply_post_process) that change numbers,
// applied to the plan so that its simulation computes what the written model does:
// RemoveQDQMulAdd and RemoveQDQBetweenOps (after the parameters, before fast finetune, as Quark
// runs them before its post-quantization algorithms) and Int16Bias (last). DedicateDQNode, which
// changes no number, is a pass on the written model (passes/dedicate.h).
#pragma once

#include <cstddef>
#include <set>
#include <string>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/config_keys.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// Their keys in the configuration table (post_process_keys.cc), with CopySharedInit and
// CopyBiasInit: RemoveQDQMulAdd, RemoveQDQBetweenOps, Int16Bias, DedicateDQNode.
void add_post_process_keys(std::vector<ConfigKey>& keys);

// Error (one line) for these keys where the format writes nothing they act on: RemoveQDQMulAdd,
// RemoveQDQBetweenOps and DedicateDQNode need Q/DQ pairs (not QOperator, not FixNeuron; the
// first two QuantizeLinear / DequantizeLinear, so not VitisQuantFormat.QDQ either), Int16Bias a
// QDQ or ExtendedQuantFormat.QDQ model with int32 biases (not enable_dpu, whose biases are weights).
void check_post_process(const QuantConfig& config);

// Quark's remove_qdq_mul_add, then remove_qdq_between_ops for each (upper, lower) pair in order:
// a tensor written by a node of op type `upper` (the Conv a Relu the plan removed was fused into
// counts as its writer), read by one node of op type `lower` and by nothing else (not a graph
// output), and quantized with an 8- or 16-bit integer QuantizeLinear / DequantizeLinear, leaves
// the plan: the lower node reads the float tensor. Tensors sharing its parameters keep them. With
// DedicatedQDQPair a tensor read by several nodes keeps its pairs, with a warning in plan.warnings
// (Quark would remove the lower node's pair only). Returns how many tensors left the plan.
size_t remove_qdq_between_ops(Plan& plan, const ir::Model& model, const QuantConfig& config);

// Quark's convert_bias_int32_to_int16: the int32 bias of a Conv, ConvTranspose, Gemm,
// LayerNormalization, InstanceNormalization or BatchNormalization becomes int16 with the same
// scale, its values clipped to [-32768, 32767] (a warning in plan.warnings names each bias
// clipped). Returns how many biases changed. The QDQ writer puts them, as every 16-bit type,
// in com.microsoft's DequantizeLinear below opset 21.
size_t convert_biases_to_int16(Plan& plan, const ir::Model& model);

// Quark's list for Int16Bias: the ops whose input 2 is a bias.
const std::set<std::string>& int16_bias_ops();
// An int32 tensor as int16, its values clipped to [-32768, 32767] (np.clip, as Quark); `clipped`
// grows by how many were.
ir::Tensor clip_to_int16(const ir::Tensor& t, size_t& clipped);

}  // namespace onnxptq::quant
