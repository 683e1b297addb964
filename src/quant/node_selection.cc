#include "quant/node_selection.h"

#include <map>
#include <regex>

#include "onnxptq/error.h"

namespace onnxptq::quant {

namespace {

// Quark's rule (get_all_target_nodes): a pattern starts with '^'; one without ".*" is dropped.
bool is_pattern(const std::string& entry) { return !entry.empty() && entry[0] == '^'; }

void add_patterns(const std::vector<ir::Node*>& nodes, const std::vector<std::string>& patterns,
                  std::set<std::string>& excluded, std::vector<std::string>* warnings) {
  std::vector<std::string> unmatched;
  size_t matched = 0;
  for (const std::string& pattern : patterns) {
    std::regex re;
    try {
      re = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("nodes_to_exclude: '" + pattern + "' is not a valid regular expression (" + e.what() + ")");
    }
    size_t before = matched;
    for (const ir::Node* n : nodes)
      if (std::regex_search(n->name, re)) {
        excluded.insert(n->name);
        ++matched;
      }
    if (matched == before) unmatched.push_back(pattern);
  }
  if (patterns.empty() || unmatched.empty()) return;
  if (matched == 0) {
    std::string list;
    for (const std::string& p : unmatched) list += (list.empty() ? "'" : ", '") + p + "'";
    throw Error("nodes_to_exclude: no node name matches the regular expression" +
                std::string(unmatched.size() > 1 ? "s " : " ") + list);
  }
  if (warnings)
    for (const std::string& p : unmatched)
      warnings->push_back("nodes_to_exclude: no node name matches the regular expression '" + p + "'");
}

// One pair of subgraphs_to_exclude (Quark's match_subgraphs, whose walk goes back from each end
// node to the start nodes). `index` counts from 0, as the list does.
void add_subgraph(const std::map<std::string, const ir::Node*>& by_name, const QuantConfig::Subgraph& pair,
                  size_t index, std::set<std::string>& excluded) {
  const std::string what = "subgraphs_to_exclude[" + std::to_string(index) + "]";
  if (pair.start_nodes.empty() || pair.end_nodes.empty())
    throw Error(what + ": needs at least one start node and one end node");
  std::set<const ir::Node*> starts;
  for (const auto* list : {&pair.start_nodes, &pair.end_nodes})
    for (const std::string& name : *list) {
      auto it = by_name.find(name);
      if (it == by_name.end())
        throw Error(what + ": the model has no node named '" + name + "' (" +
                    (list == &pair.start_nodes ? "a start node" : "an end node") + ")");
      if (list == &pair.start_nodes) starts.insert(it->second);
    }
  std::set<const ir::Node*> region;
  for (const std::string& end : pair.end_nodes) {
    std::vector<const ir::Node*> stack = {by_name.at(end)};
    std::set<const ir::Node*> seen;
    bool reached_start = false;
    while (!stack.empty()) {
      const ir::Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      region.insert(n);
      if (starts.count(n)) {
        reached_start = true;
        continue;  // the walk stops at a start node
      }
      for (const ir::Value* v : n->inputs()) {
        if (!v) continue;
        if (v->producer()) {
          stack.push_back(v->producer());
        } else if (v->graph()->is_input(v) && !v->has_initializer()) {
          throw Error(what + ": going back from end node '" + end + "', node '" + n->name + "' reads graph input '" +
                      v->name() + "' before any start node (the start and end nodes must close the subgraph)");
        }
      }
    }
    if (!reached_start) throw Error(what + ": no start node leads to end node '" + end + "'");
  }
  for (const ir::Node* s : starts)
    if (!region.count(s)) throw Error(what + ": start node '" + s->name + "' leads to none of the end nodes");
  // Unnamed nodes cannot be named in the exclusion set without naming them all.
  for (const ir::Node* n : region)
    if (!n->name.empty()) excluded.insert(n->name);
}

}  // namespace

std::set<std::string> named_exclusions(const ir::Graph& graph, const QuantConfig& config,
                                       std::vector<std::string>* warnings) {
  std::vector<ir::Node*> nodes;
  std::map<std::string, const ir::Node*> by_name;
  for (ir::Node* n : graph.topological_order_with_bodies()) {  // the If/Loop/Scan bodies' too
    nodes.push_back(n);
    by_name.emplace(n->name, n);
  }
  std::set<std::string> excluded;
  std::vector<std::string> patterns;
  for (const std::string& entry : config.nodes_to_exclude) {
    if (!is_pattern(entry)) {
      if (!by_name.count(entry)) throw Error("the model has no node named '" + entry + "' (in nodes_to_exclude)");
      excluded.insert(entry);
    } else if (entry.find(".*") == std::string::npos) {
      if (warnings)
        warnings->push_back("nodes_to_exclude: '" + entry +
                            "' is ignored: it starts with ^ but has no .*, and Quark matches only such patterns");
    } else {
      patterns.push_back(entry);
    }
  }
  add_patterns(nodes, patterns, excluded, warnings);
  for (size_t i = 0; i < config.subgraphs_to_exclude.size(); ++i)
    add_subgraph(by_name, config.subgraphs_to_exclude[i], i, excluded);
  // An If, Loop or Scan left float leaves the nodes of its bodies float too.
  for (const ir::Node* n : nodes)
    if (excluded.count(n->name))
      for (const ir::Graph* body : n->subgraphs())
        for (const ir::Node* inner : body->topological_order_with_bodies()) excluded.insert(inner->name);
  return excluded;
}

}  // namespace onnxptq::quant
