// Quark's block formats in the quantizer (its ExtendedQDQQuantizer with QBFP / QMX types): the one
// node that fake-quantizes a tensor of a block type, the BFPAttributes / MXAttributes keys that
// shape it, and the axis its blocks run along. A block tensor has no scale, no zero point and no
// calibrated range: the node's blocks share an exponent each (engine/kernels/quantize_block.cc).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// BFPAttributes / MXAttributes: the keys of a JSON object over `a`. Error naming an unknown key
// or a value of the wrong kind (the values themselves: check_block_attributes).
void apply_bfp_attributes(BfpAttributes& a, const nlohmann::json& value);
void apply_mx_attributes(MxAttributes& a, const nlohmann::json& value);

// The node Quark's _create_fn_nodes writes for a tensor of block type `type` (kQBfp, kQMx):
// BFPQuantizeDequantize or MXQuantizeDequantize of com.amd.quark with every attribute of the
// config's set, `axis` for the blocks' axis and, for a constant (a weight), convert_to_bfloat_before_bfp 0.
// Its name, inputs and outputs are left to the caller.
ir::Node block_node(ir::DataType type, const QuantConfig& config, int64_t axis, bool constant);

// Error (naming the key and the value) when the config's attributes for block type `type` are
// ones the op refuses: a bfp_method, bit_width, block_size, rounding_mode, ... out of its range.
void check_block_attributes(const QuantConfig& config, ir::DataType type);

// Every block tensor's TensorPlan::block_axis: the attributes' axis, 0 for an initializer of rank 1
// or less (as Quark writes), then, with RefineBlockAxis (on by default with block types), Quark's
// refine_block_axis: the blocks run along the dimension the reading op reduces, MatMul A (and
// MatMul's output) along A's last axis and B along its second to last, Gemm A along 0 (transA)
// or 1 and B along 1 (transB) or 0, a Softmax input along the Softmax axis. Nodes are visited in
// topological order; a tensor several of them read takes the last one's axis (as in Quark). A
// conversion to a block type (mixed precision) takes the axis its receiving readers want the same way.
void assign_block_axes(Plan& plan, const ir::Graph& graph, const QuantConfig& config);

}  // namespace onnxptq::quant
