#include "quant/overrides.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "onnxptq/error.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

using ir::DataType;

constexpr std::array<std::pair<DataType, const char*>, 12> kPrecisions = {{
    {DataType::Int4, "int4"},
    {DataType::UInt4, "uint4"},
    {DataType::Int8, "int8"},
    {DataType::UInt8, "uint8"},
    {DataType::Int16, "int16"},
    {DataType::UInt16, "uint16"},
    {DataType::Int32, "int32"},
    {DataType::UInt32, "uint32"},
    {DataType::Float16, "float16"},
    {DataType::BFloat16, "bfloat16"},
    {kQBfp, "bfp"},
    {kQMx, "mx"},
}};

// How much a type keeps: wider is more; at one width a float type (its range cannot overflow)
// over an integer one. A block format (8-bit elements by default, an exponent shared per block)
// between the 8-bit and the 16-bit types, whatever its attributes.
int rank(DataType t) {
  if (quant_type_is_block(t)) return 17;
  return 2 * ir::data_type_bits(t) + (quant_type_is_float(t) ? 1 : 0);
}

bool is_signed(DataType t) {
  return t == DataType::Int4 || t == DataType::Int8 || t == DataType::Int16 || t == DataType::Int32 ||
         quant_type_is_float(t);
}

double json_number(const std::string& what, const nlohmann::json& v) {
  if (!v.is_number()) throw Error(what + ": expected a number, got " + v.dump());
  return v.get<double>();
}

bool json_bool(const std::string& what, const nlohmann::json& v) {
  if (!v.is_boolean()) throw Error(what + ": expected true or false, got " + v.dump());
  return v.get<bool>();
}

int64_t json_integer(const std::string& what, const nlohmann::json& v) {
  if (!v.is_number_integer()) throw Error(what + ": expected an integer, got " + v.dump());
  return v.get<int64_t>();
}

DataType json_quant_type(const std::string& what, const nlohmann::json& v) {
  if (!v.is_string()) throw Error(what + ": expected a type name, got " + v.dump());
  std::optional<DataType> t;
  try {
    t = parse_precision(v.get<std::string>());
  } catch (const Error& e) {
    throw Error(what + ": " + e.what(), e.kind());
  }
  if (!t)
    throw Error(what + ": 'float' is not a quant type (leave the node float with NodePrecision or nodes_to_exclude)");
  return *t;
}

TensorOverride::Convert parse_convert(const std::string& where, const nlohmann::json& j) {
  if (!j.is_object()) throw Error(where + ": expected an object, got " + j.dump());
  TensorOverride::Convert c;
  if (!j.contains("quant_type")) throw Error(where + ": quant_type is required");
  for (const auto& [key, v] : j.items()) {
    const std::string what = where + "." + key;
    if (key == "quant_type") {
      c.quant_type = json_quant_type(what, v);
    } else if (key == "symmetric") {
      c.symmetric = json_bool(what, v);
    } else if (key == "rmin") {
      c.rmin = json_number(what, v);
    } else if (key == "rmax") {
      c.rmax = json_number(what, v);
    } else if (key == "scale") {
      c.scale = json_number(what, v);
    } else if (key == "zero_point") {
      c.zero_point = json_integer(what, v);
    } else if (key == "recv_nodes") {
      if (!v.is_array()) throw Error(what + ": expected a list of node names, got " + v.dump());
      for (const auto& n : v) {
        if (!n.is_string()) throw Error(what + ": expected a list of node names, got " + v.dump());
        c.recv_nodes.insert(n.get<std::string>());
      }
    } else {
      throw Error(where + ": unknown key '" + key + "'");
    }
  }
  if (c.rmin.has_value() != c.rmax.has_value()) throw Error(where + ": rmin and rmax go together");
  if (c.scale.has_value() != c.zero_point.has_value()) throw Error(where + ": scale and zero_point go together");
  if (c.scale && (c.rmin || c.symmetric))
    throw Error(where + ": scale and zero_point exclude rmin, rmax and symmetric");
  return c;
}

// One tensor's list of dicts: one (per tensor, or per channel with `axis`), or one per channel,
// which may differ only in their scale and zero point.
TensorOverride parse_tensor_override(const std::string& tensor, const nlohmann::json& list) {
  const std::string where = "TensorQuantOverrides['" + tensor + "']";
  if (!list.is_array() || list.empty())
    throw Error(where + ": expected a list of override objects, got " + list.dump());
  TensorOverride o;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& d = list[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!d.is_object()) throw Error(at + ": expected an object, got " + d.dump());
    if (i > 0) {  // the channels after the first: scale and zero point only
      for (const auto& [key, v] : d.items()) {
        if (key == "scale")
          o.scale.push_back(json_number(at + ".scale", v));
        else if (key == "zero_point")
          o.zero_point.push_back(json_integer(at + ".zero_point", v));
        else if (!list[0].contains(key) || list[0][key] != v)
          throw Error(at + "." + key + ": per-channel entries may differ only in scale and zero_point");
      }
      continue;
    }
    for (const auto& [key, v] : d.items()) {
      const std::string what = at + "." + key;
      if (key == "quant_type")
        o.quant_type = json_quant_type(what, v);
      else if (key == "symmetric")
        o.symmetric = json_bool(what, v);
      else if (key == "reduce_range")
        o.reduce_range = json_bool(what, v);
      else if (key == "axis")
        o.axis = json_integer(what, v);
      else if (key == "rmin")
        o.rmin = json_number(what, v);
      else if (key == "rmax")
        o.rmax = json_number(what, v);
      else if (key == "scale")
        o.scale.push_back(json_number(what, v));
      else if (key == "zero_point")
        o.zero_point.push_back(json_integer(what, v));
      else if (key == "convert")
        o.convert = parse_convert(what, v);
      else
        throw Error(at + ": unknown key '" + key + "'");
    }
  }
  if (o.rmin.has_value() != o.rmax.has_value()) throw Error(where + ": rmin and rmax go together");
  if (o.rmin && *o.rmin > *o.rmax) throw Error(where + ": rmin is above rmax");
  if (o.scale.size() != o.zero_point.size()) throw Error(where + ": scale and zero_point go together, per channel");
  if (!o.scale.empty() && (o.rmin || o.symmetric || o.reduce_range))
    throw Error(where + ": scale and zero_point exclude rmin, rmax, symmetric and reduce_range");
  if (list.size() > 1 && o.scale.size() != list.size())
    throw Error(
        where + ": " + std::to_string(list.size()) +
        " per-channel entries need a scale and zero_point each (other per-channel keys apply to every channel)");
  for (double s : o.scale)
    if (!(s > 0) || !std::isfinite(s)) throw Error(where + ": scale must be positive and finite");
  return o;
}

}  // namespace

void apply_auto_mixprecision(AutoMixprecision& a, const nlohmann::json& j) {
  const std::string where = "AutoMixprecision";
  if (!j.is_object()) throw Error(where + ": expected an object of Quark's keys, got " + j.dump());
  a.given = true;
  auto strings = [&](const std::string& what, const nlohmann::json& v) {
    if (!v.is_array()) throw Error(what + ": expected a list of names, got " + v.dump());
    std::vector<std::string> out;
    for (const auto& e : v) {
      if (!e.is_string()) throw Error(what + ": expected a list of names, got " + v.dump());
      out.push_back(e.get<std::string>());
    }
    return out;
  };
  auto integers = [&](const std::string& what, const nlohmann::json& v) {
    if (!v.is_array()) throw Error(what + ": expected a list of integers, got " + v.dump());
    std::vector<int64_t> out;
    for (const auto& e : v) out.push_back(json_integer(what, e));
    return out;
  };
  auto count = [&](const std::string& what, const nlohmann::json& v) {
    double n = json_number(what, v);
    if (!(n >= 0) || n != std::floor(n)) throw Error(what + ": expected a count of at least 0, got " + v.dump());
    return static_cast<size_t>(n);
  };
  for (const auto& [key, v] : j.items()) {
    const std::string what = where + "." + key;
    if (key == "DataSize")
      a.data_size = count(what, v);
    else if (key == "TargetOpType")
      a.target_op_types = strings(what, v);
    else if (key == "TargetQuantType")
      a.activation_target = a.weight_target = json_quant_type(what, v);
    else if (key == "ActTargetQuantType")
      a.activation_target = json_quant_type(what, v);
    else if (key == "WeightTargetQuantType")
      a.weight_target = json_quant_type(what, v);
    else if (key == "BiasTargetQuantType")
      a.bias_target = json_quant_type(what, v);
    else if (key == "DualQuantNodes")
      a.dual_quant_nodes = json_bool(what, v);
    else if (key == "OutputIndex")
      a.output_index = count(what, v);
    else if (key == "L2Target")
      a.l2_target = json_number(what, v);
    else if (key == "Top1AccTarget")
      a.top1_acc_target = json_number(what, v);
    else if (key == "NumTarget")
      a.num_target = count(what, v);
    else if (key == "TargetTensors")
      a.target_tensors = strings(what, v);
    else if (key == "TargetIndices")
      a.target_indices = integers(what, v);
    else if (key == "ExcludeIndices")
      a.exclude_indices = integers(what, v);
    else if (key == "NoInputQDQShared")
      a.no_input_qdq_shared = json_bool(what, v);
    else if (key == "AutoMixUseFastFT")
      a.use_fast_ft = json_bool(what, v);
    else if (key == "EvaluateFunction") {
      throw Error(what +
                  ": a Python function, given in onnxptq's Python module; on the command line, "
                  "--evaluate-command");
    } else {
      throw Error(where + ": unknown key '" + key + "'");
    }
  }
  if (a.bias_target && *a.bias_target != DataType::Int32)
    throw Error(where + ".BiasTargetQuantType: only QInt32 is built (biases of other types are not)");
}

std::optional<DataType> parse_precision(const std::string& name) {
  if (name == "float" || name == "float32") return std::nullopt;
  for (const auto& [type, text] : kPrecisions)
    if (name == text) return type;
  try {
    return parse_quant_type(name);
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("unknown quant type", 0) != 0) throw;  // a type named but not built
    throw Error("unknown precision '" + name +
                "' (known: int8, uint8, int16, uint16, int32, uint32, float16, bfloat16, bfp, mx, float, or a "
                "quant type such as QInt16)");
  }
}

const char* precision_name(DataType type) {
  for (const auto& [t, text] : kPrecisions)
    if (t == type) return text;
  return "float";
}

NodePrecision parse_node_precision(const std::string& text) {
  NodePrecision p;
  size_t comma = text.find(',');
  std::optional<DataType> a = parse_precision(text.substr(0, comma));
  if (!a) {
    if (comma != std::string::npos) throw Error("precision '" + text + "': 'float' takes no weight type");
    p.keep_float = true;
    return p;
  }
  p.activation = a;
  p.weight = a;
  if (comma != std::string::npos) {
    std::optional<DataType> w = parse_precision(text.substr(comma + 1));
    if (!w) throw Error("precision '" + text + "': a weight cannot stay float in a quantized node");
    p.weight = w;
  }
  return p;
}

NodePrecision parse_node_precision(const nlohmann::json& value, const std::string& node) {
  const std::string where = "NodePrecision['" + node + "']";
  if (value.is_string()) {
    try {
      return parse_node_precision(value.get<std::string>());
    } catch (const Error& e) {
      throw Error(where + ": " + e.what(), e.kind());
    }
  }
  if (!value.is_object())
    throw Error(where + ": expected a precision or {\"activation\": ..., \"weight\": ...}, got " + value.dump());
  NodePrecision p;
  for (const auto& [key, v] : value.items()) {
    if (key != "activation" && key != "weight") throw Error(where + ": unknown key '" + key + "'");
    DataType t = json_quant_type(where + "." + key, v);
    (key == "activation" ? p.activation : p.weight) = t;
  }
  return p;
}

void apply_node_precision(QuantConfig& c, const nlohmann::json& v) {
  if (!v.is_object()) throw Error("extra option NodePrecision: expected {node name: precision}, got " + v.dump());
  for (const auto& [node, p] : v.items()) c.node_precision[node] = parse_node_precision(p, node);
}

void apply_tensor_quant_overrides(QuantConfig& c, const nlohmann::json& v) {
  if (!v.is_object()) throw Error("extra option TensorQuantOverrides: expected {tensor name: [...]}, got " + v.dump());
  for (const auto& [tensor, list] : v.items()) c.tensor_overrides[tensor] = parse_tensor_override(tensor, list);
}

void apply_mixed_precision_tensor(QuantConfig& c, const nlohmann::json& v) {
  if (!v.is_object())
    throw Error("extra option MixedPrecisionTensor: expected {type: [tensor names]}, got " + v.dump());
  for (const auto& [type, names] : v.items()) {
    DataType t = json_quant_type("MixedPrecisionTensor", type);
    if (!names.is_array()) throw Error("MixedPrecisionTensor['" + type + "']: expected a list of tensor names");
    for (const auto& n : names) {
      if (!n.is_string()) throw Error("MixedPrecisionTensor['" + type + "']: expected a list of tensor names");
      c.mixed_precision_tensor[n.get<std::string>()] = t;
    }
  }
}

bool has_mixed_precision(const QuantConfig& c) {
  return c.include_auto_mp || !c.node_precision.empty() || !c.tensor_overrides.empty() ||
         (c.specific_tensor_precision && !c.mixed_precision_tensor.empty());
}

void check_mixed_precision(const QuantConfig& c) {
  if (!c.mixed_precision_tensor.empty() && !c.specific_tensor_precision)
    throw Error("MixedPrecisionTensor needs specific_tensor_precision true (as Quark reads it)");
  if (c.auto_mp.given && !c.include_auto_mp)
    throw Error("extra option AutoMixprecision takes effect only with include_auto_mp true");
  if (c.include_auto_mp && !c.auto_mp.activation_target && !c.auto_mp.weight_target)
    throw Error(
        "include_auto_mp needs AutoMixprecision's ActTargetQuantType or WeightTargetQuantType (the precision "
        "nodes are converted to)");
  if (!has_mixed_precision(c)) return;
  auto check = [&](const std::string& where, DataType t, bool weight) {
    const std::string type = precision_name(t);
    if (c.format == QuantFormat::QOperator)
      throw Error(where +
                  ": QuantFormat.QOperator writes one precision (QLinear ops); mixed precision needs a QDQ format");
    if (c.format == QuantFormat::FixNeuron && where.find(".convert") != std::string::npos)
      throw Error(where + ": VitisQuantFormat.FixNeuron writes one FixNeuron per tensor, no conversions");
    if (c.format == QuantFormat::FixNeuron && t != DataType::Int8)
      throw Error(where + ": " + type + ": VitisQuantFormat.FixNeuron quantizes to int8 only");
    if (c.format == QuantFormat::QDQ && (quant_type_is_float(t) || ir::data_type_bits(t) == 32))
      throw Error(
          where + ": " + type +
          " needs ExtendedQuantFormat.QDQ or VitisQuantFormat.QDQ (QuantFormat.QDQ takes 8- and 16-bit integers)");
    if (c.power_of_two() && quant_type_is_float(t))
      throw Error(where + ": " + type + " has no power-of-two scale; use a float-scale calibrate_method");
    if (c.enable_dpu && weight && t != DataType::Int8)
      throw Error(where + ": enable_dpu: the NPU's weights are int8, not " + type);
    if (c.enable_dpu && !weight && t != DataType::Int8 && t != DataType::UInt8 && t != DataType::Int16)
      throw Error(where + ": enable_dpu: the NPU's activations are int8, uint8 or int16, not " + type);
  };
  for (const auto& [node, p] : c.node_precision) {
    if (p.activation) check("NodePrecision['" + node + "']", *p.activation, false);
    if (p.weight) check("NodePrecision['" + node + "']", *p.weight, true);
  }
  for (const auto& [tensor, o] : c.tensor_overrides) {
    if (o.quant_type) check("TensorQuantOverrides['" + tensor + "']", *o.quant_type, false);
    if (o.convert) check("TensorQuantOverrides['" + tensor + "'].convert", o.convert->quant_type, false);
  }
  if (c.specific_tensor_precision)
    for (const auto& [tensor, t] : c.mixed_precision_tensor) check("MixedPrecisionTensor '" + tensor + "'", t, false);
  if (c.include_auto_mp) {
    if (c.auto_mp.activation_target) check("AutoMixprecision.ActTargetQuantType", *c.auto_mp.activation_target, false);
    if (c.auto_mp.weight_target) check("AutoMixprecision.WeightTargetQuantType", *c.auto_mp.weight_target, true);
  }
}

namespace {

// The precision each quantized node asks of its activations: its NodePrecision, or the
// config's; none for a node whose quantized outputs all share its input's parameters (data
// movement).
std::map<const ir::Node*, DataType> wishes(const Plan& plan, const ir::Graph& graph, const QuantConfig& config) {
  std::set<std::string> quantized(plan.quantized_nodes.begin(), plan.quantized_nodes.end());
  std::map<const ir::Node*, DataType> out;
  for (const auto& n : graph.nodes()) {
    if (!quantized.count(n->name)) continue;
    auto it = config.node_precision.find(n->name);
    if (it != config.node_precision.end() && it->second.activation) {
      out[n.get()] = *it->second.activation;
      continue;
    }
    bool own_output = false, any_output = false;
    for (const ir::Value* v : n->outputs())
      if (const TensorPlan* t = v ? plan.find(v->name()) : nullptr) {
        any_output = true;
        own_output = own_output || t->shared_from.empty();
      }
    if (!any_output || own_output) out[n.get()] = config.activation_type;
  }
  return out;
}

// Tensors that share a parameter set follow its provider; biases whose product scale no longer
// exists are quantized like weights (as the planner does for float and 32-bit types).
void follow_providers(Plan& plan, const QuantConfig& config) {
  for (TensorPlan& t : plan.tensors) {
    if (t.shared_from.empty()) continue;
    const TensorPlan& p = plan.provider(t.name);
    t.type = p.type;
    t.symmetric = p.symmetric;
  }
  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Bias) continue;
    const TensorPlan* w = plan.find(t.bias_weight);
    DataType in = plan.provider(t.bias_input).type, wt = w ? w->type : DataType::Int8;
    auto int32_product = [](DataType x) {
      return !quant_type_is_float(x) && !quant_type_is_block(x) && ir::data_type_bits(x) != 32;
    };
    if (int32_product(in) && int32_product(wt)) continue;
    t.role = Role::Weight;
    t.type = wt;
    t.symmetric = config.weight_symmetric.value_or(is_signed(wt));
    t.bias_input.clear();
    t.bias_weight.clear();
  }
}

}  // namespace

void settle_precisions(Plan& plan, const ir::Graph& graph, const QuantConfig& config) {
  if (config.node_precision.empty()) return;
  const std::map<const ir::Node*, DataType> wish = wishes(plan, graph, config);
  // Readers of each parameter set: of the provider and of every tensor sharing it.
  std::map<std::string, std::vector<const ir::Node*>> readers;
  for (const TensorPlan& t : plan.tensors) {
    if (t.role != Role::Activation) continue;
    const ir::Value* v = graph.find_value_nested(t.name);
    if (!v) continue;
    auto& list = readers[plan.provider(t.name).name];
    for (const ir::Use& u : v->uses()) list.push_back(u.node);
  }
  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Activation || !t.shared_from.empty() || !t.fixed.empty()) continue;
    const ir::Value* v = graph.find_value_nested(t.name);
    std::vector<const ir::Node*> nodes = readers[t.name];
    if (v && v->producer()) nodes.push_back(v->producer());
    for (const ir::Node* n : nodes)
      if (auto w = wish.find(n); w != wish.end() && rank(w->second) > rank(t.type)) {
        t.type = w->second;
        t.symmetric = config.activation_symmetric;
      }
  }
  follow_providers(plan, config);
  if (!config.dual_quant_nodes) return;
  // Readers wanting less than the tensor holds read it converted (the most common such type).
  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Activation || t.convert) continue;
    const ir::Value* v = graph.find_value_nested(t.name);
    if (!v) continue;
    std::map<DataType, std::set<std::string>> lower;
    for (const ir::Use& u : v->uses())
      if (auto w = wish.find(u.node); w != wish.end() && w->second != t.type && rank(w->second) <= rank(t.type))
        lower[w->second].insert(u.node->name);
    if (lower.empty()) continue;
    auto most = std::max_element(lower.begin(), lower.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    TensorPlan::Conversion c;
    c.type = most->first;
    c.symmetric = config.activation_symmetric;
    c.recv_nodes = most->second;
    t.convert = c;
  }
}

void apply_tensor_overrides(Plan& plan, const ir::Graph& graph, const QuantConfig& config) {
  std::map<std::string, TensorOverride> overrides;
  if (config.specific_tensor_precision)
    for (const auto& [tensor, type] : config.mixed_precision_tensor) overrides[tensor].quant_type = type;
  for (const auto& [tensor, o] : config.tensor_overrides) {  // over MixedPrecisionTensor, key by key
    TensorOverride& into = overrides[tensor];
    std::optional<DataType> legacy = into.quant_type;
    into = o;
    if (!into.quant_type) into.quant_type = legacy;
  }
  if (overrides.empty()) return;
  for (const auto& [name, o] : overrides) {
    const std::string where = "TensorQuantOverrides['" + name + "']";
    const ir::Value* v = graph.find_value_nested(name);
    if (!v) throw Error(where + ": the model has no tensor of that name");
    TensorPlan* t = plan.find(name);
    if (!t) {
      plan.warnings.push_back(where + ": the tensor is not quantized (no quantized node reads or writes it)");
      continue;
    }
    if (t->role == Role::Bias)
      throw Error(where + ": an int32 bias takes its scale from its input and weight; it has no overrides");
    if (quant_type_is_block(o.quant_type.value_or(t->type)) &&
        (o.symmetric || o.reduce_range || o.axis || o.rmin || !o.scale.empty()))
      throw Error(where + ": the tensor is of the block type " + quant_type_name(o.quant_type.value_or(t->type)) +
                  ", whose blocks share exponents: it has no scale, range, symmetry or axis to set");
    if (o.convert && quant_type_is_block(o.convert->quant_type) &&
        (o.convert->symmetric || o.convert->rmin || o.convert->scale))
      throw Error(where + ".convert: the block type " + quant_type_name(o.convert->quant_type) +
                  " shares exponents per block: it has no scale, range or symmetry to set");
    const bool weight = t->role == Role::Weight;
    if (o.reduce_range && !weight) throw Error(where + ": reduce_range applies to initializers only");
    if (o.axis && !weight) throw Error(where + ": axis applies to initializers (weights) only");
    if (o.rmin && weight) throw Error(where + ": rmin and rmax apply to activations (a weight's range is its values)");
    if (o.convert && weight) throw Error(where + ": convert applies to activations only");
    if (o.scale.size() > 1 && !weight) throw Error(where + ": an activation has one scale");
    const bool own = o.quant_type || o.symmetric || o.rmin || !o.scale.empty();
    if (own && !t->shared_from.empty()) {  // its own parameters from here: calibrated for it
      t->shared_from.clear();
      t->range_from.clear();
    }
    if (o.quant_type) {
      t->type = *o.quant_type;
      t->fixed.clear();  // Softmax's fixed parameters were for the old type
    }
    if (o.symmetric) t->symmetric = *o.symmetric;
    if (o.reduce_range) t->reduce_range = o.reduce_range;
    if (o.axis) {
      const int64_t rank = static_cast<int64_t>(v->initializer().rank());
      if (*o.axis < -rank || *o.axis >= rank)
        throw Error(where + ": axis " + std::to_string(*o.axis) + " is outside the weight's " + std::to_string(rank) +
                    " dimensions");
      t->axis = *o.axis < 0 ? *o.axis + rank : *o.axis;
    }
    if (o.rmin) t->range = std::pair{*o.rmin, *o.rmax};
    if (!o.scale.empty()) {
      size_t channels = t->axis ? static_cast<size_t>(v->initializer().dims()[static_cast<size_t>(*t->axis)]) : 1;
      if (o.scale.size() != channels && !(o.scale.size() == 1 && weight))
        throw Error(where + ": " + std::to_string(o.scale.size()) + " scales for " + std::to_string(channels) +
                    " channels");
      qmath::QRange q = qmath::quant_range(t->type, false);
      t->fixed.clear();
      for (size_t c = 0; c < channels; ++c) {
        size_t i = o.scale.size() == 1 ? 0 : c;
        if (o.zero_point[i] < q.min || o.zero_point[i] > q.max)
          throw Error(where + ": zero point " + std::to_string(o.zero_point[i]) + " is outside " +
                      precision_name(t->type));
        t->fixed.push_back({o.scale[i], o.zero_point[i]});
      }
    }
    if (o.convert) {
      TensorPlan::Conversion c;
      c.type = o.convert->quant_type;
      c.symmetric = o.convert->symmetric.value_or(t->symmetric);
      if (o.convert->rmin) c.range = std::pair{*o.convert->rmin, *o.convert->rmax};
      if (o.convert->scale) c.fixed = qmath::ScaleZeroPoint{*o.convert->scale, *o.convert->zero_point};
      for (const std::string& n : o.convert->recv_nodes) {
        bool reads = false;
        for (const ir::Use& u : v->uses()) reads = reads || u.node->name == n;
        if (!reads) throw Error(where + ": convert.recv_nodes names '" + n + "', which does not read the tensor");
      }
      c.recv_nodes = o.convert->recv_nodes;
      t->convert = c;
    }
  }
  follow_providers(plan, config);
}

}  // namespace onnxptq::quant
