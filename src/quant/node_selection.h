// The nodes a config leaves float by name, as Quark resolves them (quark/onnx quant_utils.py,
// get_all_target_nodes and match_subgraphs): nodes_to_exclude's names and regular expressions,
// and the nodes of subgraphs_to_exclude.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/config.h"

namespace onnxptq::quant {

// The nodes of `graph` and of its If/Loop/Scan bodies that nodes_to_exclude and
// subgraphs_to_exclude name, with every node of the bodies of an If, Loop or Scan named.
//
// nodes_to_exclude: an entry starting with '^' and containing ".*" is a regular expression
// (ECMAScript syntax) searched in every node name, as Quark's re.search; any other entry is a
// node name. One that starts with '^' without ".*" is dropped, as Quark drops it (a warning).
// Error when no pattern matches any node (Quark raises too); a warning for each pattern that
// matches none while others do. Error for a name that is no node and for a bad pattern.
//
// subgraphs_to_exclude: for each pair, every node found going back from an end node through the
// producers of its inputs, up to and including the start nodes. Error (naming the pair and the
// node) for a name that is no node, a graph input reached without passing a start node (Quark's
// "closed subgraph" check), an end node no start node leads to, a start node leading to no end
// node.
//
// `warnings` (when given) gets one line per warning.
std::set<std::string> named_exclusions(const ir::Graph& graph, const QuantConfig& config,
                                       std::vector<std::string>* warnings = nullptr);

}  // namespace onnxptq::quant
