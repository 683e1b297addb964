// Names unique across the whole model: every value and node of an If/Loop/Scan body whose name is
// taken elsewhere (in an enclosing graph, or in a sibling body) gets a fresh one. The quantizer
// keys its plan and calibration by name, and ONNX Runtime refuses a body value that shadows an
// outer name ("Graph must be in single static assignment (SSA) form"), so its Q/DQ pairs must not
// bring one in either.
#pragma once

#include "passes/pass.h"

namespace onnxptq::passes {

// Renames the body values and nodes whose names are used elsewhere; says how many in the log.
bool unique_subgraph_names(ir::Model& model, PassContext& context);

}  // namespace onnxptq::passes
