#include "tools/inspect.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace onnxptq::tools {
namespace {

using nlohmann::ordered_json;

ordered_json describe_value(const ir::Value& v) {
  ordered_json shape = nullptr;  // unknown rank
  if (v.type.is_tensor() && v.type.has_shape) {
    shape = ordered_json::array();
    for (const auto& d : v.type.shape) {
      if (d.has_value) shape.push_back(d.value);
      else shape.push_back(d.param.empty() ? "?" : d.param);
    }
  }
  std::string type = v.type.is_tensor() ? std::string(ir::data_type_name(v.type.elem_type))
                                        : v.type.to_string();
  return {{"name", v.name()}, {"type", type}, {"shape", shape}};
}

struct Counts {
  std::map<std::string, int64_t> op_types;
  int64_t subgraph_nodes = 0;
  int64_t initializers = 0;
  int64_t constants = 0;
  int64_t parameters = 0;
  int64_t parameter_bytes = 0;
  std::map<std::string, int64_t> parameters_by_type;
};

void count_tensor(const ir::Tensor& t, Counts& c) {
  c.parameters += t.size();
  c.parameter_bytes += static_cast<int64_t>(t.byte_size());
  c.parameters_by_type[std::string(ir::data_type_name(t.dtype()))] += t.size();
}

void count_graph(const ir::Graph& graph, bool nested, Counts& c) {
  for (const auto& node : graph.nodes()) {
    // Some exporters (PaddlePaddle's among them) keep every weight in a Constant node.
    if (node->op_type == "Constant" && (node->domain.empty() || node->domain == "ai.onnx"))
      if (const ir::Attribute* value = node->find_attribute("value"); value && value->type == ir::AttrType::Tensor) {
        ++c.constants;
        count_tensor(value->t, c);
      }
    if (nested) ++c.subgraph_nodes;
    else ++c.op_types[node->domain.empty() || node->domain == "ai.onnx" ? node->op_type
                                                                          : node->domain + "." + node->op_type];
    for (const ir::Graph* sub : node->subgraphs()) count_graph(*sub, true, c);
  }
  for (const ir::Value* v : graph.initializers()) {
    ++c.initializers;
    count_tensor(v->initializer(), c);
  }
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  std::ostringstream s;
  s.precision(u == 0 ? 0 : 1);
  s << std::fixed << v << " " << units[u];
  return s.str();
}

std::string shape_text(const ordered_json& value) {
  if (value["shape"].is_null()) return value["type"].get<std::string>() + "[?...]";
  std::string s = value["type"].get<std::string>() + "[";
  bool first = true;
  for (const auto& d : value["shape"]) {
    s += (first ? "" : ",") + (d.is_string() ? d.get<std::string>() : std::to_string(d.get<int64_t>()));
    first = false;
  }
  return s + "]";
}

}  // namespace

ordered_json inspect_model(const ir::Model& model) {
  const ir::Graph& g = *model.graph;
  Counts c;
  count_graph(g, false, c);

  ordered_json summary;
  summary["file"] = model.path.string();
  summary["ir_version"] = model.ir_version;
  summary["producer"] = {{"name", model.producer_name}, {"version", model.producer_version}};
  summary["opsets"] = ordered_json::array();
  for (const auto& op : model.opset_import)
    summary["opsets"].push_back({{"domain", op.domain.empty() ? "ai.onnx" : op.domain}, {"version", op.version}});
  summary["inputs"] = ordered_json::array();
  for (const ir::Value* v : g.fed_inputs())
    summary["inputs"].push_back(describe_value(*v));  // IR < 4 lists weights too
  summary["outputs"] = ordered_json::array();
  for (const ir::Value* v : g.outputs()) summary["outputs"].push_back(describe_value(*v));
  summary["nodes"] = g.node_count();
  summary["subgraph_nodes"] = c.subgraph_nodes;
  std::vector<std::pair<std::string, int64_t>> ops(c.op_types.begin(), c.op_types.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  summary["op_types"] = ordered_json::object();
  for (const auto& [op, n] : ops) summary["op_types"][op] = n;
  summary["initializers"] = c.initializers;
  summary["constants"] = c.constants;
  summary["parameters"] = c.parameters;
  summary["parameter_bytes"] = c.parameter_bytes;
  summary["parameters_by_type"] = c.parameters_by_type;
  summary["external_data"] = model.uses_external_data;
  summary["metadata"] = ordered_json::object();
  for (const auto& [key, value] : model.metadata_props) summary["metadata"][key] = value;
  return summary;
}

std::string format_inspection(const ordered_json& s) {
  std::ostringstream out;
  auto line = [&](const std::string& label, const std::string& text) {
    out << label << std::string(label.size() < 14 ? 14 - label.size() : 1, ' ') << text << "\n";
  };
  line("model", s["file"].get<std::string>());
  std::string producer = s["producer"]["name"].get<std::string>();
  if (!s["producer"]["version"].get<std::string>().empty()) producer += " " + s["producer"]["version"].get<std::string>();
  line("ir version", std::to_string(s["ir_version"].get<int64_t>()) + (producer.empty() ? "" : ", producer " + producer));
  std::string opsets;
  for (const auto& op : s["opsets"])
    opsets += (opsets.empty() ? "" : ", ") + op["domain"].get<std::string>() + " " + std::to_string(op["version"].get<int64_t>());
  line("opsets", opsets);
  for (const char* side : {"inputs", "outputs"})
    for (size_t i = 0; i < s[side].size(); ++i)
      line(i == 0 ? side : "", s[side][i]["name"].get<std::string>() + "  " + shape_text(s[side][i]));
  std::string nodes = with_commas(s["nodes"].get<int64_t>());
  if (s["subgraph_nodes"].get<int64_t>() > 0) nodes += " (and " + with_commas(s["subgraph_nodes"].get<int64_t>()) + " in subgraphs)";
  line("nodes", nodes);
  std::string ops;
  for (const auto& [op, n] : s["op_types"].items()) ops += (ops.empty() ? "" : ", ") + op + " " + std::to_string(n.get<int64_t>());
  if (!ops.empty()) line("op types", ops);
  std::string params = with_commas(s["parameters"].get<int64_t>()) + " in " +
                       with_commas(s["initializers"].get<int64_t>()) + " initializers and " +
                       with_commas(s["constants"].get<int64_t>()) + " constants, " +
                       human_bytes(s["parameter_bytes"].get<int64_t>());
  std::string types;
  for (const auto& [type, n] : s["parameters_by_type"].items())
    types += (types.empty() ? "" : ", ") + type + " " + with_commas(n.get<int64_t>());
  if (!types.empty()) params += " (" + types + ")";
  line("parameters", params);
  line("external data", s["external_data"].get<bool>() ? "yes" : "no");
  for (const auto& [key, value] : s["metadata"].items()) line("metadata", key + " = " + value.get<std::string>());
  return out.str();
}

}  // namespace onnxptq::tools
