// Giving each reader its own copy of what several share: Quark's CopySharedInit and CopyBiasInit
// on the float model (its convert_shared_initializer_to_unique), so each node's initializer is
// quantized for that node, and its DedicateDQNode post-process on the quantized model.
#pragma once

#include <string>
#include <vector>

#include "ir/model.h"
#include "passes/pass.h"

namespace onnxptq::passes {

// In node order, the first read of an initializer by a node of `op_types` (every op type when
// empty) keeps it and each later read gets a copy named duplicated<name><k>, k counting the reads
// (2, 3, ...), as Quark names them. `only_bias`: input 2 only (CopyBiasInit). Main graph only; an
// initializer that is also a graph input (overridable at run time) stays shared.
bool copy_shared_initializers(ir::Model& model, const std::vector<std::string>& op_types, bool only_bias,
                              PassContext& context);

// Quark's dedicate_dq_node: a DequantizeLinear (any domain; ExtendedDequantizeLinear,
// VitisDequantizeLinear) fed by a quantize op and read by several nodes, or by a node and as a graph
// output, is copied for each reader after the first (<name>_k, output <output>_k, k = 1, 2, ...;
// a graph output keeps the original); when the quantize reads an initializer (a weight with a Q/DQ
// pair) it is copied too. DequantizeLinear nodes of stored weights (no quantize in front) stay shared.
bool dedicate_dq_nodes(ir::Model& model, PassContext& context);

}  // namespace onnxptq::passes
