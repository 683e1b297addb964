// The plan's own parts: the op types each configuration quantizes, lookups of the tensors and
// their shared parameters, the tensors to calibrate, and the plan as JSON. The marking that makes
// a plan is plan_marking.cc; its parameters, plan_params.cc.
#include "quant/plan.h"

#include <nlohmann/json.hpp>

#include "onnxptq/error.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

const std::set<std::string>& default_op_types() {
  static const std::set<std::string> ops = {"ArgMax",
                                            "Conv",
                                            "ConvTranspose",
                                            "Gemm",
                                            "MatMul",
                                            "Add",
                                            "Mul",
                                            "Relu",
                                            "Clip",
                                            "LeakyRelu",
                                            "Sigmoid",
                                            "MaxPool",
                                            "GlobalAveragePool",
                                            "AveragePool",
                                            "Split",
                                            "Pad",
                                            "Reshape",
                                            "Squeeze",
                                            "Unsqueeze",
                                            "Resize",
                                            "Concat",
                                            "Softmax",
                                            "Where",
                                            "Gather",
                                            "Transpose",
                                            "EmbedLayerNormalization",
                                            "InstanceNormalization"};
  return ops;
}

const std::set<std::string>& dpu_op_types() {
  static const std::set<std::string> ops = {
      "HardSigmoid",  "LayerNormalization", "Div",   "Erf",   "Tanh",           "Sub", "Max", "ReduceMean",
      "DepthToSpace", "SpaceToDepth",       "Slice", "PRelu", "LpNormalization"};
  return ops;
}

const std::set<std::string>& npu_transformer_op_types() {
  static const std::set<std::string> ops = {"Gemm", "MatMul"};
  return ops;
}

std::set<std::string> quantized_op_types(const QuantConfig& config) {
  std::set<std::string> ops(config.op_types_to_quantize.begin(), config.op_types_to_quantize.end());
  if (ops.empty() && config.enable_npu_transformer) {  // Quark's get_static_op_types: this registry only
    ops = npu_transformer_op_types();
  } else if (ops.empty()) {
    ops = default_op_types();
    if (config.enable_dpu) ops.insert(dpu_op_types().begin(), dpu_op_types().end());
    // Quark's ExtendedQDQQuantizer adds its NPU CNN registry (its get_static_op_types).
    if (config.format == QuantFormat::ExtendedQDQ) {
      ops.insert(dpu_op_types().begin(), dpu_op_types().end());
      ops.insert("Min");
    }
  }
  // ConvertBNToConv (on by default on the NPU paths) makes a standalone BatchNormalization quantizable.
  if (rewrite_on(config, "ConvertBNToConv")) ops.insert("BatchNormalization");
  return ops;
}

std::set<std::string> quantized_op_types(const QuantConfig& config, const ir::Graph& graph) {
  std::set<std::string> ops = quantized_op_types(config);
  // Quark's get_static_op_types adds these to any set, like QuantizeAllOpTypes' (generic rule).
  ops.insert(config.extra_op_types_to_quantize.begin(), config.extra_op_types_to_quantize.end());
  if (config.quantize_all_op_types) {
    std::vector<ir::Graph*> graphs = quantizes_subgraphs(config) ? graph.nested_graphs() : std::vector<ir::Graph*>{};
    auto add = [&](const ir::Graph& g) {
      for (const auto& n : g.nodes())
        if (n->domain.empty() || n->domain == "ai.onnx") ops.insert(n->op_type);
    };
    add(graph);
    for (const ir::Graph* g : graphs) add(*g);
  }
  return ops;
}

bool quantizes_subgraphs(const QuantConfig& config) {
  const bool qdq_writer = config.format == QuantFormat::QDQ || config.format == QuantFormat::VitisQDQ ||
                          config.format == QuantFormat::ExtendedQDQ;
  return config.enable_subgraph && qdq_writer;
}

std::optional<int64_t> TensorPlan::data_axis() const {
  if (role != Role::Bias) return axis;
  return params.size() > 1 ? std::optional<int64_t>(0) : std::nullopt;
}

TensorPlan* Plan::find(const std::string& name) {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

const TensorPlan* Plan::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

const TensorPlan& Plan::provider(const std::string& name) const {
  const TensorPlan* t = find(name);
  if (!t) throw Error("quantization plan: no tensor '" + name + "'");
  for (size_t hops = 0; !t->shared_from.empty(); ++hops) {
    if (hops > tensors.size()) throw Error("quantization plan: shared parameters of '" + name + "' form a cycle");
    t = find(t->shared_from);
    if (!t) throw Error("quantization plan: '" + name + "' shares the parameters of a tensor not in the plan");
  }
  return *t;
}

std::vector<std::string> Plan::tensors_to_calibrate() const {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const TensorPlan& t : tensors) {
    // A block tensor has no range, unless readers convert it to a type with a scale.
    const bool block_with_scaled_copy =
        t.convert && !quant_type_is_block(t.convert->type) && !t.convert->fixed && !t.convert->range;
    if (t.role != Role::Activation || !t.shared_from.empty() || !t.fixed.empty() || t.range ||
        (quant_type_is_block(t.type) && !block_with_scaled_copy))
      continue;
    const std::string& source = t.range_from.empty() ? t.name : t.range_from;
    if (seen.insert(source).second) names.push_back(source);
  }
  return names;
}

namespace {

const char* role_name(Role role) {
  switch (role) {
    case Role::Activation:
      return "activation";
    case Role::Weight:
      return "weight";
    case Role::Bias:
      return "bias";
  }
  return "?";
}

}  // namespace

nlohmann::json Plan::to_json() const {
  nlohmann::json j;
  j["quantized_nodes"] = quantized_nodes;
  j["float_nodes"] = float_nodes;
  j["removed_activations"] = removed_activations;
  if (!fused_activations.empty()) j["fused_activations"] = fused_activations;
  nlohmann::json list = nlohmann::json::array();
  for (const TensorPlan& t : tensors) {
    nlohmann::json e;
    e["name"] = t.name;
    e["role"] = role_name(t.role);
    e["type"] = quant_type_name(t.type);
    e["symmetric"] = t.symmetric;
    if (t.axis) e["axis"] = *t.axis;
    if (t.block_axis) e["block_axis"] = *t.block_axis;
    if (!t.shared_from.empty()) e["shared_from"] = t.shared_from;
    if (!t.range_from.empty()) e["range_from"] = t.range_from;
    if (t.role == Role::Bias) e["bias_of"] = {t.bias_input, t.bias_weight};
    if (!t.params.empty()) {
      nlohmann::json scales = nlohmann::json::array(), zero_points = nlohmann::json::array();
      for (const qmath::ScaleZeroPoint& p : t.params) {
        scales.push_back(p.scale);
        zero_points.push_back(p.zero_point);
      }
      e["scale"] = t.params.size() == 1 ? scales[0] : scales;
      e["zero_point"] = t.params.size() == 1 ? zero_points[0] : zero_points;
    }
    if (t.pos) e["pos"] = *t.pos;
    list.push_back(e);
  }
  j["tensors"] = list;
  return j;
}

}  // namespace onnxptq::quant
