// `onnxptq inspect`: what a model is made of, as JSON or as text for a terminal.
#pragma once

#include <string>

#include "onnxptq/model.h"

namespace onnxptq {

// One JSON object, indented by two spaces, with the keys: file, ir_version, producer {name,
// version}, opsets [{domain, version}], inputs and outputs [{name, type, shape}] (a shape is null
// for an unknown rank; a dimension is a number, its symbol or "?"), nodes, subgraph_nodes,
// op_types (node counts by op type, most first; "domain.op" outside the default domain),
// initializers, constants (Constant nodes holding a tensor), parameters and parameter_bytes
// (elements and bytes of both), parameters_by_type, external_data, metadata.
std::string inspect_json(const Model& model);

// The same facts as aligned lines: "model", "ir version", "opsets", "inputs", "outputs", "nodes",
// "op types", "parameters", "external data", "metadata".
std::string inspect_text(const Model& model);

}  // namespace onnxptq
