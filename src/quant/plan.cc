// Marking: which tensors each selected node quantizes, by the per-op rules of ORT's QDQ
// quantizer (shared/spec/ort_quantization.md §4.2-4.9) and vai_q_onnx (vai_q_onnx.md §4.2-4.7).
#include "quant/plan.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "onnxptq/error.h"
#include "quant/overrides.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

using ir::DataType;

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
    // Quark's ExtendedQDQQuantizer adds its NPU CNN registry (quark_onnx.md §4 step 10, §7.1).
    if (config.format == QuantFormat::ExtendedQDQ) {
      ops.insert(dpu_op_types().begin(), dpu_op_types().end());
      ops.insert("Min");
    }
  }
  auto bn = config.dpu_pass_switches.find("ConvertBNToConv");
  if ((config.enable_dpu || config.enable_npu_transformer) && (bn == config.dpu_pass_switches.end() || bn->second))
    ops.insert("BatchNormalization");
  return ops;
}

std::set<std::string> quantized_op_types(const QuantConfig& config, const ir::Graph& graph) {
  std::set<std::string> ops = quantized_op_types(config);
  if (config.quantize_all_op_types)
    for (const auto& n : graph.nodes())
      if (n->domain.empty() || n->domain == "ai.onnx") ops.insert(n->op_type);
  return ops;
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
    if (t.role != Role::Activation || !t.shared_from.empty() || !t.fixed.empty() || t.range) continue;
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

namespace {

bool is_float(DataType t) { return t == DataType::Float || t == DataType::Float16; }

class Planner {
 public:
  Planner(const ir::Model& model, const QuantConfig& config, const std::map<std::string, DataType>& types)
      : model_(model), graph_(*model.graph), config_(config), types_(types) {}

  Plan run() {
    std::vector<ir::Node*> order = graph_.topological_order();
    std::set<std::string> names;
    for (const ir::Node* n : order) names.insert(n->name);
    for (const auto* list : {&config_.nodes_to_exclude, &config_.nodes_to_quantize})
      for (const std::string& name : *list)
        if (!names.count(name))
          throw Error("the model has no node named '" + name + "' (in " +
                      (list == &config_.nodes_to_exclude ? "nodes_to_exclude" : "nodes_to_quantize") + ")");
    std::set<std::string> excluded(config_.nodes_to_exclude.begin(), config_.nodes_to_exclude.end());
    exclude_outside_input_output_nodes(order, excluded);
    std::set<std::string> selected(config_.nodes_to_quantize.begin(), config_.nodes_to_quantize.end());
    const std::set<std::string> op_types = quantized_op_types(config_, graph_);
    const std::set<std::string> registry_op_types = quantized_op_types(config_);

    for (const auto& [name, p] : config_.node_precision) {
      if (!names.count(name)) throw Error("the model has no node named '" + name + "' (in NodePrecision)");
      if (p.keep_float) excluded.insert(name);
    }
    for (const ir::Node* n : order) {
      auto precision = config_.node_precision.find(n->name);
      precision_ = precision == config_.node_precision.end() ? nullptr : &precision->second;
      std::string why;
      bool standard = n->domain.empty() || n->domain == "ai.onnx";
      if (!standard || !op_types.count(n->op_type))
        why = "op type " + n->op_type + " is not quantized";
      else if (n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear")
        why = "already a quantize op";
      else if (excluded.count(n->name))
        why = "excluded";
      else if (!selected.empty() && !selected.count(n->name))
        why = "not in nodes_to_quantize";
      else
        why = mark(*n);
      // QuantizeAllOpTypes' ops with integer tensors only (a Constant of int64, shape arithmetic) stay float.
      if (why.empty() && !registry_op_types.count(n->op_type) && !touches_plan(*n)) why = "it has no float tensor";
      if (why.empty())
        plan_.quantized_nodes.push_back(n->name);
      else
        plan_.float_nodes[n->name.empty() ? "(" + n->op_type + " without a name)" : n->name] = why;
    }
    precision_ = nullptr;
    settle_precisions(plan_, graph_, config_);
    apply_tensor_overrides(plan_, graph_, config_);
    if (fold_relu_kept_ > 0)
      plan_.warnings.push_back("FoldRelu: " + std::to_string(fold_relu_kept_) +
                               " Relu/Clip kept: with symmetric activations (ActivationSymmetric) their producer's "
                               "quantized output would not clip at 0 (Quark keeps them too)");
    return std::move(plan_);
  }

  // nodes_to_exclude with the nodes input_nodes / output_nodes exclude (for the DPU rewrites' filter).
  std::set<std::string> excluded_nodes() {
    std::set<std::string> excluded(config_.nodes_to_exclude.begin(), config_.nodes_to_exclude.end());
    exclude_outside_input_output_nodes(graph_.topological_order(), excluded);
    return excluded;
  }

 private:
  // vai §4.7: nodes before an input node, and after an output node, in topological order.
  void exclude_outside_input_output_nodes(const std::vector<ir::Node*>& order, std::set<std::string>& excluded) {
    auto positions = [&](const std::string& name, const char* what) {
      std::vector<size_t> at;
      for (size_t i = 0; i < order.size(); ++i)
        if (order[i]->name == name) at.push_back(i);
      if (!at.empty()) return at;
      const ir::Value* v = graph_.find_value(name);
      if (v && graph_.is_input(v)) {
        for (const ir::Use& u : v->uses())
          for (size_t i = 0; i < order.size(); ++i)
            if (order[i] == u.node) at.push_back(i);
      } else if (v && graph_.is_output(v) && v->producer()) {
        for (size_t i = 0; i < order.size(); ++i)
          if (order[i] == v->producer()) at.push_back(i);
      }
      if (at.empty())
        plan_.warnings.push_back(std::string(what) + " '" + name + "' is neither a node nor a graph input or output");
      return at;
    };
    std::set<std::string> keep;
    for (const std::string& name : config_.input_nodes)
      for (size_t i : positions(name, "input node")) {
        for (size_t k = 0; k < i; ++k) excluded.insert(order[k]->name);
        keep.insert(order[i]->name);
      }
    for (const std::string& name : config_.output_nodes)
      for (size_t i : positions(name, "output node")) {
        for (size_t k = i + 1; k < order.size(); ++k) excluded.insert(order[k]->name);
        keep.insert(order[i]->name);
      }
    for (const std::string& name : keep) excluded.erase(name);
  }

  // The types of the node being marked: its NodePrecision's, or the config's.
  DataType activation_type() const {
    return precision_ && precision_->activation ? *precision_->activation : config_.activation_type;
  }
  DataType weight_type() const { return precision_ && precision_->weight ? *precision_->weight : config_.weight_type; }
  bool weights_symmetric() const {
    if (!precision_ || !precision_->weight || config_.weight_symmetric) return config_.weights_symmetric();
    DataType t = *precision_->weight;
    return t == DataType::Int8 || t == DataType::Int16 || t == DataType::Int32 || quant_type_is_float(t);
  }

  DataType type_of(const ir::Value* v) const {
    if (!v) return DataType::Undefined;
    if (v->has_initializer()) return v->initializer().dtype();
    if (v->type.is_tensor() && v->type.elem_type != DataType::Undefined) return v->type.elem_type;
    auto it = types_.find(v->name());
    return it == types_.end() ? DataType::Undefined : it->second;
  }
  bool quantizable(const ir::Value* v) const { return v && is_float(type_of(v)); }
  bool is_constant(const ir::Value* v) const { return v && v->has_initializer() && !graph_.is_input(v); }
  bool planned(const ir::Value* v) const { return v && plan_.find(v->name()); }
  bool touches_plan(const ir::Node& n) const {
    for (const ir::Value* v : n.inputs())
      if (planned(v)) return true;
    for (const ir::Value* v : n.outputs())
      if (planned(v)) return true;
    return false;
  }

  TensorPlan& add(const ir::Value* v, Role role) {
    plan_.index[v->name()] = plan_.tensors.size();
    TensorPlan& t = plan_.tensors.emplace_back();
    t.name = v->name();
    t.role = role;
    return t;
  }

  // An activation, or an initializer quantized like one (ORT: activation type and symmetry).
  void activation(const ir::Value* v) {
    if (!quantizable(v) || planned(v)) return;
    TensorPlan& t = add(v, is_constant(v) ? Role::Weight : Role::Activation);
    t.type = activation_type();
    t.symmetric = config_.activation_symmetric;
    if (config_.enable_dpu && t.role == Role::Weight) {  // vai §4.4: the dpu quantizer's initializers are weights
      t.type = weight_type();
      t.symmetric = weights_symmetric();
    }
    if (config_.format == QuantFormat::ExtendedQDQ && t.role == Role::Weight) extended_initializer(v, t);
  }

  // Quark's ExtendedQDQQuantizer quantizes every initializer with the weight type and symmetry;
  // AlignEltwiseQuantType gives the initializer inputs of Mul, Div, Add, Sub, Min and Max the
  // activation type instead (quark_onnx.md §9.8; its get_eltwise_op override, symmetry still the weights').
  void extended_initializer(const ir::Value* v, TensorPlan& t) const {
    t.type = weight_type();
    t.symmetric = weights_symmetric();
    if (!config_.align_eltwise_quant_type.value_or(false)) return;
    static const std::set<std::string> eltwise = {"Mul", "Div", "Add", "Sub", "Min", "Max"};
    for (const ir::Use& u : v->uses())
      if (eltwise.count(u.node->op_type)) t.type = activation_type();
  }

  void weight(const ir::Value* v, const std::string& op_type, int64_t default_axis) {
    if (!quantizable(v) || planned(v)) return;
    if (!is_constant(v)) return activation(v);
    TensorPlan& t = add(v, Role::Weight);
    t.type = weight_type();
    t.symmetric = weights_symmetric();
    if (config_.per_channel) {
      auto it = config_.per_channel_axis.find(op_type);
      t.axis = it != config_.per_channel_axis.end() ? it->second : default_axis;
    }
  }

  void bias(const ir::Value* b, const ir::Value* input, const ir::Value* w, double beta) {
    if (!config_.quantize_bias || !b || !is_constant(b) || !quantizable(b) || planned(b)) return;
    if (!planned(input) || !planned(w)) return;
    DataType wt = plan_.find(w->name())->type, it = plan_.provider(input->name()).type;
    if (config_.enable_dpu && config_.power_of_two()) {
      // The dpu quantizer's bias is an ordinary weight (vai §4.5): weight_type, its own power-of-two
      // position from its values (WeightSymmetric, calibrate_method), later held by AdjustShiftBias.
      TensorPlan& t = add(b, Role::Weight);
      t.type = weight_type();
      t.symmetric = weights_symmetric();
      return;
    }
    if (quant_type_is_float(wt) || ir::data_type_bits(wt) == 32 || ir::data_type_bits(it) == 32 ||
        !config_.int32_bias.value_or(true)) {
      // An int32 bias with scale s_in * s_w cannot hold float16/bfloat16 or 32-bit products: the
      // bias is quantized like a weight, as vai_q_onnx does for its Vitis formats (vai §4.5), and
      // as Quark does with Int32Bias false.
      TensorPlan& t = add(b, Role::Weight);
      t.type = wt;
      t.symmetric = weights_symmetric();
      return;
    }
    TensorPlan& t = add(b, Role::Bias);
    t.type = DataType::Int32;
    t.symmetric = true;
    t.bias_input = input->name();
    t.bias_weight = w->name();
    t.bias_beta = beta;
  }

  void output(const ir::Node& n, const ir::Value* v) {
    if (config_.op_types_to_exclude_output_quantization.count(n.op_type)) return;
    activation(v);
  }

  void share(const ir::Value* out, const ir::Value* in) {
    if (!quantizable(out) || planned(out)) return;
    // Copies of the provider's fields: adding a tensor may move the plan's tensors.
    const TensorPlan& source = plan_.provider(in->name());
    const DataType type = source.type;
    const bool symmetric = source.symmetric;
    TensorPlan& t = add(out, Role::Activation);
    t.type = type;
    t.symmetric = symmetric;
    t.shared_from = in->name();
  }

  // Marks the tensors of `n`; returns why it stays float, or nothing when it is quantized.
  std::string mark(const ir::Node& n) {
    const std::string& op = n.op_type;
    int64_t opset = model_.opset("");
    if (op == "Conv" || op == "ConvTranspose") {
      activation(n.input(0));
      weight(n.input(1), op, op == "Conv" ? 0 : 1);
      bias(n.input(2), n.input(0), n.input(1), 1.0);
      output(n, n.output(0));
    } else if (op == "Gemm") {
      activation(n.input(0));
      weight(n.input(1), op, n.attr_int("transB", 0) ? 0 : 1);
      bias(n.input(2), n.input(0), n.input(1), n.attr_float("beta", 1.0f));
      output(n, n.output(0));
    } else if (op == "MatMul") {
      if (config_.matmul_const_b_only_on() && !is_constant(n.input(1)))
        return "MatMulConstBOnly and B is not a constant";
      for (const ir::Value* v : n.inputs()) is_constant(v) ? weight(v, op, 1) : activation(v);
      output(n, n.output(0));
    } else if (op == "Relu" || op == "Clip") {
      return removable_activation(n);
    } else if (config_.enable_dpu && (op == "HardSigmoid" || op == "LayerNormalization" || op == "PRelu" ||
                                      op == "Slice")) {
      return mark_dpu(n);
    } else if (op == "Reshape" || op == "Transpose" || op == "Squeeze" || op == "Unsqueeze" || op == "AveragePool" ||
               op == "Slice" || (op == "Resize" && opset >= 11) || (op == "MaxPool" && opset >= 12)) {
      if (config_.force_quantize_no_input_check) activation(n.input(0));
      if (!planned(n.input(0))) return "its input is not quantized";
      share(n.output(0), n.input(0));
    } else if (op == "Resize" || op == "MaxPool") {
      return "opset " + std::to_string(opset) + " is too old to quantize " + op;
    } else if (op == "Split") {
      activation(n.input(0));
      if (!planned(n.input(0))) return "its input is not a float tensor";
      for (const ir::Value* v : n.outputs()) share(v, n.input(0));
    } else if (op == "Gather" || op == "GatherElements") {
      const ir::Value* data = n.input(0);
      if ((is_constant(data) && quantizable(data)) || config_.force_quantize_no_input_check) activation(data);
      if (!planned(data)) return "its data input is not quantized";
      share(n.output(0), data);
    } else if (op == "Pad") {
      for (size_t i = 0; i < n.inputs().size(); ++i)
        if (i != 1) activation(n.input(i));  // pads (and axes) are integers anyway
      if (!planned(n.input(0))) return "its input is not a float tensor";
      std::string mode = n.attr_string("mode", "constant");
      if (mode != "constant" || pads_with_zero(n))
        share(n.output(0), n.input(0));
      else
        output(n, n.output(0));
    } else if (op == "Where") {
      if (config_.force_quantize_no_input_check) {
        activation(n.input(1));
        activation(n.input(2));
      }
      if (!planned(n.input(1)) || !planned(n.input(2))) return "its value inputs are not quantized";
      share(n.output(0), n.input(1));
    } else if (op == "InstanceNormalization" || op == "LayerNormalization" || op == "BatchNormalization") {
      activation(n.input(0));
      const ir::Value* scale = n.input(1);
      bool one_d = is_constant(scale) && scale->initializer().rank() <= 1;
      if (one_d) {  // a 1-D scale has no axis 1: per tensor (ORT warns and does the same)
        if (quantizable(scale) && !planned(scale)) {
          TensorPlan& t = add(scale, Role::Weight);
          t.type = weight_type();
          t.symmetric = weights_symmetric();
        }
      } else {
        weight(scale, op, 1);
      }
      bias(n.input(2), n.input(0), scale, 1.0);
      for (const ir::Value* v : n.outputs()) output(n, v);
    } else {
      generic(n);
      if (op == "Softmax") softmax_output(n);
    }
    return "";
  }

  // vai §4.2's DPU registry: QDQHardSigmoid (only the DPU's 1/6 slope), QDQLayerNorm (the bias a
  // plain weight), QDQPRelu (the slope a weight), and Slice as a generic op (ORT's registry of
  // vai_q_onnx 1.16 has no Slice, so the DPU registry's QDQOperatorBase gives it its own range).
  std::string mark_dpu(const ir::Node& n) {
    const std::string& op = n.op_type;
    if (op == "HardSigmoid") {
      bool dpu_slope = n.find_attribute("alpha") && std::fabs(n.attr_float("alpha", 0.2f) - 1.0 / 6.0) < 1e-6 &&
                       (!n.find_attribute("beta") || std::fabs(n.attr_float("beta", 0.5f) - 0.5) < 1e-6);
      if (!dpu_slope) return "HardSigmoid without alpha 1/6 and beta 0.5 is not quantized by the dpu quantizer";
      activation(n.input(0));
      output(n, n.output(0));
    } else if (op == "LayerNormalization") {
      activation(n.input(0));
      weight(n.input(1), op, 1);
      const ir::Value* b = n.input(2);
      if (b && is_constant(b) && quantizable(b) && !planned(b)) {
        TensorPlan& t = add(b, Role::Weight);
        t.type = weight_type();
        t.symmetric = weights_symmetric();
      }
      output(n, n.output(0));
    } else if (op == "PRelu") {
      activation(n.input(0));
      weight(n.input(1), op, 0);
      output(n, n.output(0));
    } else {
      generic(n);
    }
    return "";
  }

  void generic(const ir::Node& n) {
    for (const ir::Value* v : n.inputs()) activation(v);
    for (const ir::Value* v : n.outputs()) output(n, v);
  }

  bool pads_with_zero(const ir::Node& n) const {
    const ir::Value* c = n.input(2);
    if (!c || c->name().empty()) return true;
    if (!is_constant(c)) return false;
    ir::Tensor f = c->initializer();
    if (f.size() != 1) return false;
    double v = f.dtype() == DataType::Float ? f.values<float>()[0] : 1.0;
    return v == 0;
  }

  // Softmax outputs lie in [0, 1]: ORT sets that range (§3.7); vai_q_onnx fixes the parameters
  // for power-of-two scales (vai §4.2 QDQSoftmax).
  void softmax_output(const ir::Node& n) {
    TensorPlan* t = plan_.find(n.output(0) ? n.output(0)->name() : "");
    if (!t || t->role != Role::Activation || !t->shared_from.empty()) return;
    t->fixed = {softmax_params(t->type, t->symmetric, config_.power_of_two())};
  }

  static qmath::ScaleZeroPoint softmax_params(DataType type, bool symmetric, bool power_of_two) {
    if (power_of_two) {
      // vai §4.2: symmetric 2^-(b-1) with the midpoint (unsigned) or 0; asymmetric 2^-b.
      int bits = ir::data_type_bits(type);
      bool is_signed = type == DataType::Int8 || type == DataType::Int16 || type == DataType::Int32;
      double half = std::ldexp(1.0, bits - 1);
      if (symmetric) return {1.0 / half, is_signed ? 0 : static_cast<int64_t>(half)};
      return {1.0 / (2 * half), is_signed ? -static_cast<int64_t>(half) : 0};
    }
    ScaleOptions o = scale_options_of(Tool::ort);
    o.symmetric = symmetric;
    return compute_scale_zp(0.0, 1.0, type, o);  // ORT: the range [0, 1]
  }

  // Relu and Clip (ORT §4.9): only after a quantized tensor. With asymmetric activations the node
  // goes away and its producer writes its output, whose range clips; otherwise both are
  // quantized and the input takes the output's range (§3.7).
  std::string removable_activation(const ir::Node& n) {
    ir::Value* in = n.input(0);
    const ir::Value* out = n.output(0);
    if (!planned(in)) return "its input is not quantized";
    bool single_use = in->uses().size() == 1 && in->producer() && !graph_.is_input(in) && !graph_.is_output(in);
    TensorPlan* in_plan = plan_.find(in->name());
    bool own_input = in_plan->role == Role::Activation && in_plan->shared_from.empty();
    // vai_q_onnx's VitisExtendedQuantizer never removes them (vai §4.2).
    bool vitis = config_.format == QuantFormat::VitisQDQ || config_.format == QuantFormat::FixNeuron;
    // Quark's ExtendedQDQQuantizer removes them only with FoldRelu (its try_replacing_upstream_output),
    // under ORT's conditions (quark_onnx.md §9.8, ort §4.9): never with symmetric activations.
    bool extended_keeps = config_.format == QuantFormat::ExtendedQDQ && !config_.fold_relu;
    if (config_.format == QuantFormat::ExtendedQDQ && config_.fold_relu && config_.activation_symmetric && single_use &&
        own_input)
      ++fold_relu_kept_;
    // Removing the node is exact only when quantizing its output clips where it does, at 0: not
    // with a symmetric calibrated range (-m, m), where ORT and vai_q_onnx remove it anyway and
    // the negative values pass (docs/options.md).
    calib::CalibOptions calib = config_.calib;
    calib.method = config_.calibrate_method;
    if (!config_.activation_symmetric && !calib::ranges_symmetric(calib) && !config_.keep_removable_activations &&
        !vitis && !extended_keeps && single_use && own_input && in_plan->range_from.empty() && quantizable(out) &&
        !planned(out)) {
      // The producer will write `out`: `in` leaves the plan.
      size_t at = plan_.index.at(in->name());
      plan_.tensors.erase(plan_.tensors.begin() + static_cast<std::ptrdiff_t>(at));
      plan_.index.erase(in->name());
      for (auto& [name, i] : plan_.index)
        if (i > at) --i;
      activation(out);
      mark_relu_like(n, out);
      plan_.removed_activations.insert(out->name());
      return "";
    }
    output(n, out);  // may move the plan's tensors: in_plan is stale from here
    mark_relu_like(n, out);
    if (single_use && own_input && planned(out) && plan_.find(out->name())->shared_from.empty())
      plan_.find(in->name())->range_from = out->name();
    return "";
  }

  void mark_relu_like(const ir::Node& n, const ir::Value* out) {
    TensorPlan* t = out ? plan_.find(out->name()) : nullptr;
    if (!t) return;
    if (n.op_type == "Relu") {
      t->relu_like = true;
      return;
    }
    float lo = n.attr_float("min", -1.0f);
    const ir::Value* min = n.input(1);
    if (min && is_constant(min) && min->initializer().size() == 1 && min->initializer().dtype() == DataType::Float)
      lo = min->initializer().values<float>()[0];
    t->relu_like = lo == 0.0f;
  }

  const ir::Model& model_;
  const ir::Graph& graph_;
  const QuantConfig& config_;
  const std::map<std::string, DataType>& types_;
  Plan plan_;
  const NodePrecision* precision_ = nullptr;  // of the node being marked
  size_t fold_relu_kept_ = 0;  // Relu/Clip FoldRelu leaves because activations are symmetric
};

}  // namespace

std::set<std::string> excluded_nodes(const ir::Model& model, const QuantConfig& config) {
  const std::map<std::string, DataType> no_types;
  return Planner(model, config, no_types).excluded_nodes();
}

Plan make_plan(const ir::Model& model, const QuantConfig& config, const std::map<std::string, DataType>& types) {
  return Planner(model, config, types).run();
}

}  // namespace onnxptq::quant
