// `onnxptq inspect`: what a model is made of, as JSON (for --json) or as text for a terminal.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ir/model.h"

namespace onnxptq::tools {

// Keys: file, ir_version, producer, opsets, inputs, outputs, nodes, subgraph_nodes, op_types
// (by count, then name), initializers, constants (Constant nodes holding a tensor),
// parameters and parameter_bytes (elements and bytes of both), parameters_by_type, external_data,
// metadata.
nlohmann::ordered_json inspect_model(const ir::Model& model);

std::string format_inspection(const nlohmann::ordered_json& summary);

}  // namespace onnxptq::tools
