// Marking: which tensors each selected node quantizes, by the per-op rules of ORT's QDQ
// quantizer (registry.py, qdq_quantizer.py) and vai_q_onnx (its registry.py, qdq_quantizer.py).
#include <algorithm>
#include <cmath>
#include <string>

#include "onnxptq/error.h"
#include "quant/block_format.h"
#include "quant/extended_lstm.h"
#include "quant/node_selection.h"
#include "quant/overrides.h"
#include "quant/plan.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

using ir::DataType;

namespace {

bool is_float(DataType t) { return t == DataType::Float || t == DataType::Float16; }

class Planner {
 public:
  Planner(const ir::Model& model, const QuantConfig& config, const std::map<std::string, DataType>& types)
      : model_(model), graph_(*model.graph), config_(config), types_(types) {}

  Plan run() {
    const bool bodies = quantizes_subgraphs(config_);
    std::vector<ir::Node*> order = bodies ? graph_.topological_order_with_bodies() : graph_.topological_order();
    if (!bodies) warn_float_bodies();
    std::set<std::string> names;
    for (const ir::Node* n : order) names.insert(n->name);
    // Quark matches its patterns in nodes_to_exclude only; nodes_to_quantize takes names.
    for (const std::string& name : config_.nodes_to_quantize)
      if (!names.count(name)) throw Error("the model has no node named '" + name + "' (in nodes_to_quantize)");
    std::set<std::string> excluded = named_exclusions(graph_, config_, &plan_.warnings);
    exclude_outside_input_output_nodes(order, excluded);
    std::set<std::string> selected(config_.nodes_to_quantize.begin(), config_.nodes_to_quantize.end());
    const std::set<std::string> op_types = quantized_op_types(config_, graph_);
    const std::set<std::string> registry_op_types = quantized_op_types(config_);
    std::set<std::string> present;
    for (const ir::Node* n : order) present.insert(n->op_type);
    for (const std::string& op : config_.extra_op_types_to_quantize)
      if (!present.count(op)) plan_.warnings.push_back("extra_op_types_to_quantize: the model has no " + op + " node");

    for (const std::string& name : config_.nodes_to_exclude_output_quantization)
      if (!names.count(name))
        throw Error("the model has no node named '" + name + "' (in NodesToExcludeOutputQuantization)");
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
    assign_block_axes(plan_, graph_, config_);
    if (fold_relu_kept_ > 0)
      plan_.warnings.push_back("FoldRelu: " + std::to_string(fold_relu_kept_) +
                               " Relu/Clip kept: with symmetric activations (ActivationSymmetric) their producer's "
                               "quantized output would not clip at 0 (Quark keeps them too)");
    return std::move(plan_);
  }

  // nodes_to_exclude with the nodes input_nodes / output_nodes exclude (for the DPU rewrites' filter).
  std::set<std::string> excluded_nodes() {
    std::set<std::string> excluded = named_exclusions(graph_, config_);
    exclude_outside_input_output_nodes(graph_.topological_order(), excluded);
    return excluded;
  }

 private:
  // Bodies left float: said when they hold nodes of op types the config quantizes.
  void warn_float_bodies() {
    const std::set<std::string> op_types = quantized_op_types(config_, graph_);
    size_t count = 0;
    for (const ir::Graph* sub : graph_.nested_graphs())
      for (const auto& n : sub->nodes())
        count += (n->domain.empty() || n->domain == "ai.onnx") && op_types.count(n->op_type);
    if (count == 0) return;
    const char* why = !config_.enable_subgraph ? "EnableSubgraph is false"
                                               : "this format writes no subgraphs (only the Q/DQ formats do)";
    plan_.warnings.push_back("EnableSubgraph: " + std::to_string(count) +
                             " nodes inside If/Loop/Scan bodies stay float: " + why);
  }

  // vai_q_onnx's get_exclude_nodes: nodes before an input node, and after an output node, in topological order.
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
    return t == DataType::Int4 || t == DataType::Int8 || t == DataType::Int16 || t == DataType::Int32 ||
           quant_type_is_float(t);
  }

  DataType type_of(const ir::Value* v) const {
    if (!v) return DataType::Undefined;
    if (v->has_initializer()) return v->initializer().dtype();
    if (v->type.is_tensor() && v->type.elem_type != DataType::Undefined) return v->type.elem_type;
    auto it = types_.find(v->name());
    return it == types_.end() ? DataType::Undefined : it->second;
  }
  bool quantizable(const ir::Value* v) const { return v && is_float(type_of(v)); }
  bool is_constant(const ir::Value* v) const { return v && v->has_initializer() && !v->graph()->is_input(v); }
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
    if (!quantizable(v) || planned(v) || (config_.weights_only && !is_constant(v))) return;
    TensorPlan& t = add(v, is_constant(v) ? Role::Weight : Role::Activation);
    t.type = activation_type();
    t.symmetric = config_.activation_symmetric;
    if (config_.enable_dpu && t.role == Role::Weight) {  // vai_q_onnx: the dpu quantizer's initializers are weights
      t.type = weight_type();
      t.symmetric = weights_symmetric();
    }
    if (config_.format == QuantFormat::ExtendedQDQ && t.role == Role::Weight) extended_initializer(v, t);
  }

  // Quark's ExtendedQDQQuantizer quantizes every initializer with the weight type and symmetry;
  // AlignEltwiseQuantType gives the initializer inputs of Mul, Div, Add, Sub, Min and Max the
  // activation type instead (its get_eltwise_op override, symmetry still the weights').
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
    if (config_.per_channel && !quant_type_is_block(t.type)) {  // a block format's exponents are per block
      auto it = config_.per_channel_axis.find(op_type);
      t.axis = it != config_.per_channel_axis.end() ? it->second : default_axis;
    }
  }

  void bias(const ir::Value* b, const ir::Value* input, const ir::Value* w, double beta) {
    if (!config_.quantize_bias || !b || !is_constant(b) || !quantizable(b) || planned(b)) return;
    if (!planned(input) || !planned(w)) return;
    DataType wt = plan_.find(w->name())->type, it = plan_.provider(input->name()).type;
    if (config_.enable_dpu && config_.power_of_two()) {
      // The dpu quantizer's bias is an ordinary weight (vai_q_onnx): weight_type, its own power-of-two
      // position from its values (WeightSymmetric, calibrate_method), later held by AdjustShiftBias.
      TensorPlan& t = add(b, Role::Weight);
      t.type = weight_type();
      t.symmetric = weights_symmetric();
      return;
    }
    if (quant_type_is_float(wt) || quant_type_is_block(wt) || quant_type_is_block(it) || ir::data_type_bits(wt) == 32 ||
        ir::data_type_bits(it) == 32 ||
        !(config_.int32_bias.value_or(config_.use_qdq_vitis_custom_ops) ||
          config_.int16_bias)) {  // Quark: Int16Bias sets Int32Bias
      // An int32 bias with scale s_in * s_w cannot hold float16/bfloat16 or 32-bit products, nor
      // products with a block format (no scale): the bias is quantized like a weight, as vai_q_onnx
      // does for its Vitis formats, and as Quark does with Int32Bias false (which it sets for BFP/MX).
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
    if (config_.op_types_to_exclude_output_quantization.count(n.op_type) ||
        config_.nodes_to_exclude_output_quantization.count(n.name))
      return;
    activation(v);
  }

  void share(const ir::Value* out, const ir::Value* in) {
    if (!quantizable(out) || planned(out) || config_.weights_only) return;
    // Copies of the provider's fields: adding a tensor may move the plan's tensors.
    const TensorPlan& source = plan_.provider(in->name());
    const DataType type = source.type;
    const bool symmetric = source.symmetric;
    TensorPlan& t = add(out, Role::Activation);
    t.type = type;
    t.symmetric = symmetric;
    t.shared_from = in->name();
  }

  // A rule marks the tensors of a node of its op types and returns why the node stays float, or
  // nothing when it is quantized.
  using Rule = std::string (Planner::*)(const ir::Node&);
  struct OpRule {
    Rule rule;
    int64_t since_opset = 0;  // of the default domain: older models keep the op float
  };

  // The rules of ORT's QDQRegistry (registry.py) by op type, and the recurrent ops'; an op type
  // not here is marked by mark_generic (every float input and output its own parameters).
  static const std::map<std::string, OpRule>& op_rules() {
    static const std::map<std::string, OpRule> rules = {
        {"Conv", {&Planner::mark_conv}},
        {"ConvTranspose", {&Planner::mark_conv}},
        {"Gemm", {&Planner::mark_gemm}},
        {"MatMul", {&Planner::mark_matmul}},
        {"Relu", {&Planner::removable_activation}},
        {"Clip", {&Planner::removable_activation}},
        {"Reshape", {&Planner::mark_data_movement}},
        {"Transpose", {&Planner::mark_data_movement}},
        {"Squeeze", {&Planner::mark_data_movement}},
        {"Unsqueeze", {&Planner::mark_data_movement}},
        {"AveragePool", {&Planner::mark_data_movement}},
        {"Slice", {&Planner::mark_data_movement}},
        {"Resize", {&Planner::mark_data_movement, 11}},
        {"MaxPool", {&Planner::mark_data_movement, 12}},
        {"Split", {&Planner::mark_split}},
        {"Gather", {&Planner::mark_gather}},
        {"GatherElements", {&Planner::mark_gather}},
        {"Pad", {&Planner::mark_pad}},
        {"Where", {&Planner::mark_where}},
        {"InstanceNormalization", {&Planner::mark_normalization}},
        {"LayerNormalization", {&Planner::mark_normalization}},
        {"BatchNormalization", {&Planner::mark_normalization}},
        {"Softmax", {&Planner::mark_softmax}},
        {"LSTM", {&Planner::mark_recurrent}},
        {"GRU", {&Planner::mark_recurrent}},
        {"RNN", {&Planner::mark_recurrent}},
    };
    return rules;
  }

  // With enable_dpu, vai_q_onnx's DPU registry, which takes precedence: QDQHardSigmoid (only the
  // DPU's 1/6 slope), QDQLayerNorm (the bias a plain weight), QDQPRelu (the slope a weight), and
  // Slice as a generic op (ORT's registry of vai_q_onnx 1.16 has no Slice, so the DPU registry's
  // QDQOperatorBase gives it its own range).
  static const std::map<std::string, OpRule>& dpu_op_rules() {
    static const std::map<std::string, OpRule> rules = {
        {"HardSigmoid", {&Planner::mark_dpu_hard_sigmoid}},
        {"LayerNormalization", {&Planner::mark_dpu_layer_norm}},
        {"PRelu", {&Planner::mark_dpu_prelu}},
        {"Slice", {&Planner::mark_generic}},
    };
    return rules;
  }

  // Marks the tensors of `n` by the rule of its op type; returns why it stays float, or nothing
  // when it is quantized.
  std::string mark(const ir::Node& n) {
    const std::string& op = n.op_type;
    const OpRule* rule = nullptr;
    if (auto it = dpu_op_rules().find(op); config_.enable_dpu && it != dpu_op_rules().end())
      rule = &it->second;
    else if (auto it = op_rules().find(op); it != op_rules().end())
      rule = &it->second;
    if (!rule) return mark_generic(n);
    if (int64_t opset = model_.opset(""); opset < rule->since_opset)
      return "opset " + std::to_string(opset) + " is too old to quantize " + op;
    return (this->*rule->rule)(n);
  }

  // Conv (weight axis 0) and ConvTranspose (1): input, weight per channel, int32 bias, output.
  std::string mark_conv(const ir::Node& n) {
    const std::string& op = n.op_type;
    activation(n.input(0));
    weight(n.input(1), op, op == "Conv" ? 0 : 1);
    bias(n.input(2), n.input(0), n.input(1), 1.0);
    output(n, n.output(0));
    return "";
  }

  // Gemm: B's output axis by transB, the bias scaled by beta.
  std::string mark_gemm(const ir::Node& n) {
    activation(n.input(0));
    weight(n.input(1), n.op_type, n.attr_int("transB", 0) ? 0 : 1);
    bias(n.input(2), n.input(0), n.input(1), n.attr_float("beta", 1.0f));
    output(n, n.output(0));
    return "";
  }

  // MatMul: a constant input is a weight, the others activations.
  std::string mark_matmul(const ir::Node& n) {
    if (config_.matmul_const_b_only_on() && !is_constant(n.input(1))) return "MatMulConstBOnly and B is not a constant";
    for (const ir::Value* v : n.inputs()) is_constant(v) ? weight(v, n.op_type, 1) : activation(v);
    output(n, n.output(0));
    return "";
  }

  // Ops that move data without changing it: the output shares the parameters of the input, which
  // must be quantized already (or is here, with ForceQuantizeNoInputCheck).
  std::string mark_data_movement(const ir::Node& n) {
    if (config_.force_quantize_no_input_check) activation(n.input(0));
    if (!planned(n.input(0))) return "its input is not quantized";
    share(n.output(0), n.input(0));
    return "";
  }

  // Split: every output shares the parameters of the input.
  std::string mark_split(const ir::Node& n) {
    activation(n.input(0));
    if (!planned(n.input(0))) return "its input is not a float tensor";
    for (const ir::Value* v : n.outputs()) share(v, n.input(0));
    return "";
  }

  // Gather and GatherElements: the output shares the parameters of the data, quantized here when
  // it is a constant (or with ForceQuantizeNoInputCheck).
  std::string mark_gather(const ir::Node& n) {
    const ir::Value* data = n.input(0);
    if ((is_constant(data) && quantizable(data)) || config_.force_quantize_no_input_check) activation(data);
    if (!planned(data)) return "its data input is not quantized";
    share(n.output(0), data);
    return "";
  }

  // Pad: the output shares the input's parameters, but for a constant pad value not known to be 0
  // (which the input's range may not hold): then it has its own.
  std::string mark_pad(const ir::Node& n) {
    for (size_t i = 0; i < n.inputs().size(); ++i)
      if (i != 1) activation(n.input(i));  // pads (and axes) are integers anyway
    if (!planned(n.input(0))) return "its input is not a float tensor";
    std::string mode = n.attr_string("mode", "constant");
    if (mode != "constant" || pads_with_zero(n))
      share(n.output(0), n.input(0));
    else
      output(n, n.output(0));
    return "";
  }

  // Where: the output shares the parameters of the first value input; both must be quantized.
  std::string mark_where(const ir::Node& n) {
    if (config_.force_quantize_no_input_check) {
      activation(n.input(1));
      activation(n.input(2));
    }
    if (!planned(n.input(1)) || !planned(n.input(2))) return "its value inputs are not quantized";
    share(n.output(0), n.input(1));
    return "";
  }

  // InstanceNormalization, LayerNormalization, BatchNormalization: the scale a weight (per
  // channel along axis 1 when it has one), the bias an int32 bias.
  std::string mark_normalization(const ir::Node& n) {
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
      weight(scale, n.op_type, 1);
    }
    bias(n.input(2), n.input(0), scale, 1.0);
    for (const ir::Value* v : n.outputs()) output(n, v);
    return "";
  }

  // Softmax: a generic op whose output has fixed parameters (softmax_output).
  std::string mark_softmax(const ir::Node& n) {
    mark_generic(n);
    softmax_output(n);
    return "";
  }

  // LSTM, GRU and RNN, in no seed's QDQ registry (quantized when extra_op_types_to_quantize names
  // them): X an activation, W and R weights (per channel along the gate rows, axis 1), the outputs
  // activations. B stays float as in ONNX Runtime's DynamicQuantizeLSTM: it adds to products of W
  // and of R, whose scales differ, so no int32 bias fits; initial states and peepholes stay float.
  std::string mark_recurrent(const ir::Node& n) {
    // ConvertLSTMToCustomLSTM converts the main graph's LSTMs (make_plan); a body's keep the rule below.
    if (config_.convert_lstm_to_custom_lstm && n.op_type == "LSTM" && n.graph() == &graph_)
      return mark_extended_lstm(n);
    activation(n.input(0));
    weight(n.input(1), n.op_type, 1);
    weight(n.input(2), n.op_type, 1);
    for (const ir::Value* v : n.outputs()) output(n, v);
    return "";
  }

  // ConvertLSTMToCustomLSTM: what Quark's ExtendedLSTM quantizes, X, W, R, B and Y, one scale each,
  // uint16 (make_plan gives the LSTM that NodePrecision); initial states, Y_h and Y_c stay float.
  std::string mark_extended_lstm(const ir::Node& n) {
    check_extended_lstm_convertible(n);
    activation(n.input(0));
    for (size_t i : {1, 2, 3}) {
      const ir::Value* v = n.input(i);
      if (!quantizable(v) || planned(v)) continue;
      if (!is_constant(v)) {
        activation(v);
        continue;
      }
      TensorPlan& t = add(v, Role::Weight);
      t.type = weight_type();
      t.symmetric = weights_symmetric();
    }
    output(n, n.output(0));
    if (!planned(n.output(0)))
      throw Error(
          "LSTM '" + n.name +
          "' output Y is not quantized (OpTypesToExcludeOutputQuantization or "
          "NodesToExcludeOutputQuantization): ConvertLSTMToCustomLSTM writes it as ExtendedLSTM, which quantizes Y");
    // Y's range is h's bound, [-1, 1] (h = o tanh(c)), not the calibrated one: Quark's kernel wraps
    // an h beyond Y's grid around to the other end (recurrent_extended.cc), which an h a little
    // past the calibrated range of other data would do.
    TensorPlan& y = plan_.tensors[plan_.index.at(n.output(0)->name())];
    if (y.shared_from.empty() && y.fixed.empty()) y.range = std::pair{-1.0, 1.0};
    return "";
  }

  // Every other op: each float input and output with parameters of its own.
  std::string mark_generic(const ir::Node& n) {
    for (const ir::Value* v : n.inputs()) activation(v);
    for (const ir::Value* v : n.outputs()) output(n, v);
    return "";
  }

  // QDQHardSigmoid quantizes only the DPU's slope, alpha 1/6 and beta 0.5.
  std::string mark_dpu_hard_sigmoid(const ir::Node& n) {
    bool dpu_slope = n.find_attribute("alpha") && std::fabs(n.attr_float("alpha", 0.2f) - 1.0 / 6.0) < 1e-6 &&
                     (!n.find_attribute("beta") || std::fabs(n.attr_float("beta", 0.5f) - 0.5) < 1e-6);
    if (!dpu_slope) return "HardSigmoid without alpha 1/6 and beta 0.5 is not quantized by the dpu quantizer";
    activation(n.input(0));
    output(n, n.output(0));
    return "";
  }

  // QDQLayerNorm: the scale a weight along axis 1, the bias a plain weight.
  std::string mark_dpu_layer_norm(const ir::Node& n) {
    activation(n.input(0));
    weight(n.input(1), n.op_type, 1);
    const ir::Value* b = n.input(2);
    if (b && is_constant(b) && quantizable(b) && !planned(b)) {
      TensorPlan& t = add(b, Role::Weight);
      t.type = weight_type();
      t.symmetric = weights_symmetric();
    }
    output(n, n.output(0));
    return "";
  }

  // QDQPRelu: the slope a weight along axis 0.
  std::string mark_dpu_prelu(const ir::Node& n) {
    activation(n.input(0));
    weight(n.input(1), n.op_type, 0);
    output(n, n.output(0));
    return "";
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

  // Softmax outputs lie in [0, 1]: ORT sets that range (adjust_tensor_ranges); vai_q_onnx fixes the parameters
  // for power-of-two scales (its QDQSoftmax).
  void softmax_output(const ir::Node& n) {
    TensorPlan* t = plan_.find(n.output(0) ? n.output(0)->name() : "");
    // A block format has no parameters to fix.
    if (!t || t->role != Role::Activation || !t->shared_from.empty() || quant_type_is_block(t->type)) return;
    t->fixed = {softmax_params(t->type, t->symmetric, config_.power_of_two())};
  }

  static qmath::ScaleZeroPoint softmax_params(DataType type, bool symmetric, bool power_of_two) {
    if (power_of_two) {
      // vai_q_onnx's QDQSoftmax: symmetric 2^-(b-1) with the midpoint (unsigned) or 0; asymmetric 2^-b.
      int bits = ir::data_type_bits(type);
      bool is_signed =
          type == DataType::Int4 || type == DataType::Int8 || type == DataType::Int16 || type == DataType::Int32;
      double half = std::ldexp(1.0, bits - 1);
      if (symmetric) return {1.0 / half, is_signed ? 0 : static_cast<int64_t>(half)};
      return {1.0 / (2 * half), is_signed ? -static_cast<int64_t>(half) : 0};
    }
    ScaleOptions o = scale_options_of(Tool::ort);
    o.symmetric = symmetric;
    return compute_scale_zp(0.0, 1.0, type, o);  // ORT: the range [0, 1]
  }

  // Relu and Clip (ORT's QDQRemovableActivation): only after a quantized tensor. With asymmetric activations the node
  // goes away and its producer writes its output, whose range clips; otherwise both are
  // quantized and the input takes the output's range (ORT's adjust_tensor_ranges).
  std::string removable_activation(const ir::Node& n) {
    ir::Value* in = n.input(0);
    const ir::Value* out = n.output(0);
    if (!planned(in)) return "its input is not quantized";
    // Within one graph: the producer then writes the activation's output in the same body.
    bool single_use = in->uses().size() == 1 && in->producer() && in->producer()->graph() == n.graph() &&
                      !in->graph()->is_input(in) && !in->graph()->is_output(in);
    TensorPlan* in_plan = plan_.find(in->name());
    bool own_input = in_plan->role == Role::Activation && in_plan->shared_from.empty();
    // vai_q_onnx's VitisExtendedQuantizer never removes them.
    bool vitis = config_.format == QuantFormat::VitisQDQ || config_.format == QuantFormat::FixNeuron;
    // Quark's ExtendedQDQQuantizer removes them only with FoldRelu (its try_replacing_upstream_output),
    // under ORT's conditions (QDQRemovableActivation): never with symmetric activations.
    bool extended_keeps = config_.format == QuantFormat::ExtendedQDQ && !config_.fold_relu;
    if (config_.format == QuantFormat::ExtendedQDQ && config_.fold_relu && config_.activation_symmetric && single_use &&
        own_input)
      ++fold_relu_kept_;
    // Removing the node is exact only when quantizing its output clips where it does, at 0: not
    // with a symmetric calibrated range (-m, m), where ORT and vai_q_onnx remove it anyway and
    // the negative values pass (docs/options.md).
    calib::CalibOptions calib = config_.calibration_options();
    // ConvertLSTMToCustomLSTM: an LSTM's Y stays its own (the ExtendedLSTM's uint16 output over [-1, 1]).
    const bool extended_lstm_output =
        config_.convert_lstm_to_custom_lstm && in->producer() && in->producer()->op_type == "LSTM";
    if (!config_.activation_symmetric && !calib::ranges_symmetric(calib) && !config_.keep_removable_activations &&
        !extended_lstm_output && !vitis && !extended_keeps && single_use && own_input && in_plan->range_from.empty() &&
        quantizable(out) && !planned(out)) {
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
  size_t fold_relu_kept_ = 0;                 // Relu/Clip FoldRelu leaves because activations are symmetric
};

}  // namespace

std::set<std::string> excluded_nodes(const ir::Model& model, const QuantConfig& config) {
  const std::map<std::string, DataType> no_types;
  return Planner(model, config, no_types).excluded_nodes();
}

Plan make_plan(const ir::Model& model, const QuantConfig& config, const std::map<std::string, DataType>& types) {
  if (!config.convert_lstm_to_custom_lstm) return Planner(model, config, types).run();
  // ConvertLSTMToCustomLSTM: every LSTM of the main graph quantized, in uint16 (conversions where it
  // meets other precisions: settle_precisions).
  QuantConfig lstm_config = config;
  bool any = false;
  for (const auto& n : model.graph->nodes()) {
    if (n->op_type != "LSTM" || !(n->domain.empty() || n->domain == "ai.onnx")) continue;
    any = true;
    NodePrecision& p = lstm_config.node_precision[n->name];
    if ((p.activation && *p.activation != DataType::UInt16) || (p.weight && *p.weight != DataType::UInt16))
      throw Error("NodePrecision of LSTM '" + n->name +
                  "': ConvertLSTMToCustomLSTM quantizes it to uint16 (Quark's ExtendedLSTM)");
    p.activation = p.weight = DataType::UInt16;
  }
  if (!any) throw Error("ConvertLSTMToCustomLSTM: the model has no LSTM node (in its main graph)");
  if (std::find(lstm_config.extra_op_types_to_quantize.begin(), lstm_config.extra_op_types_to_quantize.end(), "LSTM") ==
      lstm_config.extra_op_types_to_quantize.end())
    lstm_config.extra_op_types_to_quantize.push_back("LSTM");
  return Planner(model, lstm_config, types).run();
}

}  // namespace onnxptq::quant
