// Preconditions and edits shared by the graph-optimisation passes: constants, single uses, and
// removing a node whose output equals one of its inputs.
#pragma once

#include <string_view>
#include <vector>

#include "ir/model.h"

namespace onnxptq::passes {

// The value when `value` is a constant: an initializer that is not also a graph input (a graph
// input may be overridden at run time), or the output of a Constant node holding a tensor.
const ir::Tensor* constant_of(const ir::Value* value);
// A constant float tensor, or nullptr.
const ir::Tensor* float_constant_of(const ir::Value* value);

// Used by exactly one node input and not a graph output (so a rewrite may consume it).
bool has_single_use(const ir::Value* value);

// The node of op `op_type` in the default domain using `value` as its only use, or nullptr.
ir::Node* single_user(const ir::Value* value, std::string_view op_type);
// The node producing `value` when it is `op_type` in the default domain, or nullptr.
ir::Node* producer_of(const ir::Value* value, std::string_view op_type);
bool is_op(const ir::Node* node, std::string_view op_type);

// A new initializer named after `base`; its type is the tensor's. Raises an IR version below 4
// to 4, the first that allows initializers which are not graph inputs.
ir::Value* add_initializer(ir::Model& model, ir::Graph& graph, std::string_view base, ir::Tensor tensor);

// Gives input `index` of `node` the value `tensor`: in place when that input is an initializer
// only this node uses, else as a new initializer (the old one stays for its other users).
void set_constant_input(ir::Model& model, ir::Node* node, size_t index, ir::Tensor tensor);

// Removes `node`, whose output 0 carries the same data as `source`: its users read `source`
// instead. When that output is a graph output the name is kept by making `source`'s producer
// write it; false (nothing changed) when that cannot be done (source is a graph input,
// initializer or graph output itself, or comes from another graph).
bool bypass_node(ir::Graph& graph, ir::Node* node, ir::Value* source);

// Removes `node` and gives its output 0 to `producer`'s output `index` (which `node` was the
// only user of): the fused producer keeps writing the name the rest of the graph reads.
void take_over_output(ir::Graph& graph, ir::Node* producer, size_t index, ir::Node* node);

// Nodes of the main graph in topological order (a snapshot: passes may remove nodes as they go).
std::vector<ir::Node*> nodes_in_order(const ir::Graph& graph);

}  // namespace onnxptq::passes
