// QuantFormat.QOperator: quantized nodes become ONNX Runtime's QLinear ops on 8-bit tensors,
// data movement ops run on the quantized tensors, and every other node stays float between a
// DequantizeLinear and a QuantizeLinear (ORT's ONNXQuantizer). Each planned tensor
// is quantized once, and every reader sees its quantized value, as in the QDQ export of the same
// plan: the two differ only by the QLinear kernels' own rounding.
//
// Names as ORT's ONNXQuantizer writes them: the quantized tensor <t>_quantized (from the
// QuantizeLinear <t>_QuantizeLinear, or written by the QLinear node <node>_quant), parameters
// <t>_scale and <t>_zero_point, and a DequantizeLinear <t>_DequantizeLinear giving float readers
// and graph outputs the tensor's own name back.
#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

using ir::DataType;

enum class Form { Float, QLinear, Movement };

bool is_8bit(DataType t) { return t == DataType::Int8 || t == DataType::UInt8; }

bool present(const ir::Value* v) { return v && !v->name().empty(); }

// Ops with a QLinear form: source op -> (QLinear op, domain).
const std::map<std::string, std::pair<std::string, std::string>>& qlinear_ops() {
  static const std::map<std::string, std::pair<std::string, std::string>> ops = {
      {"Conv", {"QLinearConv", ""}},
      {"MatMul", {"QLinearMatMul", ""}},
      {"Add", {"QLinearAdd", "com.microsoft"}},
      {"Mul", {"QLinearMul", "com.microsoft"}},
      {"Concat", {"QLinearConcat", "com.microsoft"}},
      {"Sigmoid", {"QLinearSigmoid", "com.microsoft"}},
      {"LeakyRelu", {"QLinearLeakyRelu", "com.microsoft"}},
      {"GlobalAveragePool", {"QLinearGlobalAveragePool", "com.microsoft"}},
      {"AveragePool", {"QLinearAveragePool", "com.microsoft"}},
  };
  return ops;
}

// Ops ORT runs on the quantized tensor itself ("Direct8Bit", MaxPool, Split, Gather, Pad), and a
// Clip whose output keeps its input's parameters (exact on the grid). ORT's QOperator quantizer
// leaves such a Clip float; ONNX Runtime then optimises DQ -> Clip -> Q into something that was
// up to 255 steps off on mobilenet_v2 (symmetric power-of-two ranges), while the same model with
// those tensors exposed as outputs agreed with the engine exactly.
const std::set<std::string>& movement_ops() {
  static const std::set<std::string> ops = {"Clip",  "Reshape", "Transpose", "Squeeze",        "Unsqueeze", "MaxPool",
                                            "Split", "Slice",   "Gather",    "GatherElements", "Resize",    "Pad"};
  return ops;
}

class QOperatorExporter {
 public:
  QOperatorExporter(const ir::Model& model, const Plan& plan, bool power_of_two)
      : source_(model), model_(ir::clone_model(model)), g_(*model_.graph), plan_(plan), power_of_two_(power_of_two) {
    quantized_nodes_.insert(plan.quantized_nodes.begin(), plan.quantized_nodes.end());
  }

  ir::Model run() {
    opset_ = model_.opset("");
    if (opset_ < 10)
      throw Error("QOperator needs opset 10 or later (QLinearConv, QuantizeLinear); the model has opset " +
                  std::to_string(opset_));
    for (const TensorPlan& t : plan_.tensors)
      if (t.role != Role::Bias && !is_8bit(t.type))
        throw Error("QOperator export: tensor '" + t.name + "' is planned as " + quant_type_name(t.type) +
                    "; the QLinear ops take 8-bit types");
    remove_planned_activations(g_, plan_);

    std::vector<ir::Node*> order = g_.topological_order();
    std::map<ir::Node*, Form> forms;
    for (ir::Node* n : order) forms[n] = form_of(*n);
    for (ir::Node* n : order) {
      switch (forms[n]) {
        case Form::Float:
          rewrite_float(n);
          break;
        case Form::Movement:
          rewrite_movement(n);
          break;
        case Form::QLinear:
          rewrite_qlinear(n);
          break;
      }
    }
    for (ir::Value* out : g_.outputs()) {  // quantized graph outputs come back as float, by name
      const TensorPlan* t = plan_.find(out->name());
      if (t && t->role == Role::Activation && q_.count(out->name()) && !out->producer() && !g_.is_input(out))
        dequantized(out->name());
    }
    remove_dead_nodes();
    if (uses_contrib_) model_.set_opset("com.microsoft", 1);
    g_.sort_nodes();
    model_.producer_name = "onnxptq";
    return std::move(model_);
  }

 private:
  // ----------------------------------------------------------------------------- the plan's view

  // The plan entry of v when v is an 8-bit tensor quantized per tensor (through its provider).
  const TensorPlan* per_tensor(const ir::Value* v) const {
    if (!present(v)) return nullptr;
    const TensorPlan* t = plan_.find(v->name());
    if (!t || t->role == Role::Bias) return nullptr;
    const TensorPlan& p = plan_.provider(t->name);
    if (p.params.size() != 1 || p.axis || !is_8bit(p.type)) return nullptr;
    if (t->role == Role::Weight && !t->data) return nullptr;
    return &p;
  }

  static bool same_params(const TensorPlan& a, const TensorPlan& b) {
    return a.type == b.type && a.params.size() == 1 && b.params.size() == 1 &&
           static_cast<float>(a.params[0].scale) == static_cast<float>(b.params[0].scale) &&
           a.params[0].zero_point == b.params[0].zero_point;
  }

  // Every input and output of `n` that the op reads as a tensor is quantized per tensor, of one type.
  bool all_per_tensor(std::span<ir::Value* const> values, DataType& type) const {
    for (const ir::Value* v : values) {
      const TensorPlan* p = per_tensor(v);
      if (!p || (type != DataType::Undefined && p->type != type)) return false;
      type = p->type;
    }
    return true;
  }

  Form form_of(const ir::Node& n) const {
    if (!quantized_nodes_.count(n.name) || !(n.domain.empty() || n.domain == "ai.onnx")) return Form::Float;
    if (qlinear_ops().count(n.op_type) && qlinear_ok(n)) return Form::QLinear;
    if (movement_ops().count(n.op_type) && movement_ok(n)) return Form::Movement;
    return Form::Float;
  }

  bool qlinear_ok(const ir::Node& n) const {
    const std::string& op = n.op_type;
    DataType type = DataType::Undefined;
    if (n.outputs().size() != 1 || !per_tensor(n.output(0))) return false;
    if (op == "Conv") {
      std::vector<ir::Value*> io = {n.input(0), n.output(0)};
      if (!all_per_tensor(io, type)) return false;
      const TensorPlan* w = present(n.input(1)) ? plan_.find(n.input(1)->name()) : nullptr;
      if (!w || w->role != Role::Weight || !w->data || !is_8bit(w->type)) return false;
      if (w->axis && *w->axis != 0) return false;
      // ORT's CPU QLinearConv: u8 x u8, u8 x s8, s8 x s8, and one weight zero point for all channels.
      if (type == DataType::Int8 && w->type != DataType::Int8) return false;
      for (const qmath::ScaleZeroPoint& p : w->params)
        if (p.zero_point != w->params[0].zero_point) return false;
      if (present(n.input(2))) {  // an int32 bias in units of this node's s_x * s_w
        const TensorPlan* b = plan_.find(n.input(2)->name());
        if (!b || b->role != Role::Bias || !b->data) return false;
      }
      return true;
    }
    if (op == "MatMul") {
      std::vector<ir::Value*> io = {n.input(0), n.output(0)};
      if (!all_per_tensor(io, type)) return false;
      const TensorPlan* b = present(n.input(1)) ? plan_.find(n.input(1)->name()) : nullptr;
      if (!b || b->role == Role::Bias || (b->role == Role::Weight && !b->data)) return false;
      const TensorPlan& bp = plan_.provider(b->name);
      if (!is_8bit(bp.type) || (type == DataType::Int8 && bp.type != DataType::Int8)) return false;
      if (bp.axis) {  // per column of a 2-D B only (QLinearMatMul's 1-D b_scale)
        if (b->role != Role::Weight || b->data->rank() != 2 || *bp.axis != 1) return false;
      } else if (bp.params.size() != 1) {
        return false;
      }
      return true;
    }
    if (op == "Add" || op == "Mul") {
      std::vector<ir::Value*> io = {n.input(0), n.input(1), n.output(0)};
      return n.inputs().size() == 2 && all_per_tensor(io, type);
    }
    if (op == "Concat") {
      std::vector<ir::Value*> io(n.inputs().begin(), n.inputs().end());
      io.push_back(n.output(0));
      return !n.inputs().empty() && all_per_tensor(io, type);
    }
    // Sigmoid, LeakyRelu, GlobalAveragePool, AveragePool
    std::vector<ir::Value*> io = {n.input(0), n.output(0)};
    return all_per_tensor(io, type);
  }

  bool movement_ok(const ir::Node& n) const {
    const TensorPlan* data = per_tensor(n.input(0));
    if (!data) return false;
    for (size_t i = 0; i < n.outputs().size(); ++i) {
      const ir::Value* out = n.output(i);
      if (!present(out)) continue;
      if (n.op_type == "MaxPool" && i > 0) return false;  // Indices
      const TensorPlan* p = per_tensor(out);
      if (!p || !same_params(*p, *data)) return false;
    }
    if (n.op_type == "Clip") {  // opset 12: integer Clip, with constant float bounds
      if (opset_ < 12) return false;
      for (size_t i = 1; i < n.inputs().size(); ++i) {
        const ir::Value* bound = n.input(i);
        if (present(bound) && (!bound->has_initializer() || bound->initializer().dtype() != DataType::Float ||
                               bound->initializer().size() != 1))
          return false;
      }
      return true;
    }
    if (n.op_type == "Resize") return n.attr_string("mode", "nearest") == "nearest";
    if (n.op_type == "Pad") return opset_ >= 11;  // Pad-2 pads float tensors only
    return true;
  }

  // ----------------------------------------------------------------------------- values

  ir::Value* new_initializer(const std::string& name, ir::Tensor tensor) {
    ir::Value* v = g_.add_unique_value(name);
    g_.set_initializer(v, std::move(tensor));
    return v;
  }

  // The scale and zero point initializers of tensor `name` (its provider's, made once).
  std::pair<ir::Value*, ir::Value*> params(const std::string& name) {
    const TensorPlan& p = plan_.provider(name);
    auto it = params_.find(p.name);
    if (it != params_.end()) return it->second;
    bool vector = p.axis.has_value();
    std::vector<int64_t> dims =
        vector ? std::vector<int64_t>{static_cast<int64_t>(p.params.size())} : std::vector<int64_t>{};
    std::vector<float> scales;
    for (const qmath::ScaleZeroPoint& s : p.params) scales.push_back(static_cast<float>(s.scale));
    std::string scale_name = p.role == Role::Bias ? p.name + "_quantized_scale" : p.name + "_scale";
    std::string zp_name = p.role == Role::Bias ? p.name + "_quantized_zero_point" : p.name + "_zero_point";
    if (p.role == Role::Bias) dims = {static_cast<int64_t>(p.params.size())};  // ORT: a 1-D bias scale
    ir::Value* s = new_initializer(scale_name, ir::Tensor::from_values<float>(dims, scales));
    std::vector<int64_t> zp_dims = p.role == Role::Bias && p.params.size() == 1 ? std::vector<int64_t>{} : dims;
    ir::Value* z = new_initializer(zp_name, zero_point_tensor(p.type, zp_dims, p.params));
    return params_[p.name] = {s, z};
  }

  // The quantized value of planned tensor `name`: written by its producer's QLinear or data
  // movement form, the stored initializer of a weight or bias, or a QuantizeLinear of a graph input.
  ir::Value* quantized(const std::string& name) {
    auto it = q_.find(name);
    if (it != q_.end()) return it->second;
    const TensorPlan* t = plan_.find(name);
    ir::Value* v = g_.find_value(name);
    if (!t || !v) throw Error("QOperator export: no planned tensor '" + name + "'");
    ir::Value* q;
    if (t->role != Role::Activation) {
      if (!t->data) throw Error("QOperator export: '" + name + "' has no quantized values");
      q = new_initializer(name + "_quantized", *t->data);
    } else {
      q = quantize(v, name);
    }
    return q_[name] = q;
  }

  ir::Value* quantize(ir::Value* x, const std::string& name) {
    auto sz = params(name);
    ir::Value* q = g_.add_unique_value(name + "_quantized");
    g_.add_node("QuantizeLinear", {x, sz.first, sz.second}, {q}, g_.fresh_name(name + "_QuantizeLinear"));
    return q;
  }

  // The float value readers of planned tensor `name` see: the DequantizeLinear of its quantized
  // value, writing the tensor's own name when that is free (its producer was rewritten, or a bias).
  ir::Value* dequantized(const std::string& name) {
    auto it = f_.find(name);
    if (it != f_.end()) return it->second;
    const TensorPlan* t = plan_.find(name);
    ir::Value* v = g_.find_value(name);
    ir::Value* q = quantized(name);
    ir::Value* out;
    if (t->role == Role::Bias) {  // as the QDQ export: the DequantizeLinear writes the bias's name
      g_.remove_initializer(v);
      out = v;
    } else if (t->role == Role::Activation && !v->producer() && !g_.is_input(v)) {
      out = v;
    } else {
      out = g_.add_unique_value(name + "_DequantizeLinear_Output");
    }
    const TensorPlan& p = plan_.provider(name);
    if (p.axis && p.params.size() > 1 && opset_ < 13)
      throw Error("QOperator export: the per-channel tensor '" + name + "' is read by a float node (" +
                  "a DequantizeLinear with axis needs opset 13; the model has opset " + std::to_string(opset_) + ")");
    auto sz = params(name);
    ir::Node* dq =
        g_.add_node("DequantizeLinear", {q, sz.first, sz.second}, {out}, g_.fresh_name(name + "_DequantizeLinear"));
    if (p.axis && p.params.size() > 1) dq->set_attribute(ir::Attribute::of_int("axis", *p.axis));
    return f_[name] = out;
  }

  bool planned(const ir::Value* v) const { return present(v) && plan_.find(v->name()); }

  // ----------------------------------------------------------------------------- node forms

  // A float node: planned inputs read their dequantized values, planned outputs are quantized
  // right after (the producer writes <t>_QuantizeLinear_Input; <t> is the dequantized value).
  void rewrite_float(ir::Node* n) {
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (planned(n->input(i))) g_.set_node_input(n, i, dequantized(n->input(i)->name()));
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      ir::Value* v = n->output(i);
      const TensorPlan* t = planned(v) ? plan_.find(v->name()) : nullptr;
      if (!t || t->role != Role::Activation) continue;
      ir::Value* raw = g_.add_unique_value(v->name() + "_QuantizeLinear_Input");
      g_.set_node_output(n, i, raw);
      q_[v->name()] = quantize(raw, v->name());
    }
    drop_gemm_beta_held_by_bias(*n, plan_);
  }

  // The outputs of a quantized form: <t>_quantized; <t> itself is left to a DequantizeLinear.
  ir::Value* quantized_output(ir::Node* n, size_t i) {
    ir::Value* v = n->output(i);
    ir::Value* q = g_.add_unique_value(v->name() + "_quantized");
    q_[v->name()] = q;
    return q;
  }

  void rewrite_movement(ir::Node* n) {
    const std::string data = n->input(0)->name();
    const bool pad = n->op_type == "Pad";
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (planned(n->input(i)) && plan_.find(n->input(i)->name())->role != Role::Bias && !(pad && i == 2))
        g_.set_node_input(n, i, quantized(n->input(i)->name()));
    if (n->op_type == "Clip") {  // the bounds quantized with the data's parameters
      const TensorPlan& p = plan_.provider(data);
      for (size_t i = 1; i < n->inputs().size(); ++i) {
        if (!present(n->input(i))) continue;
        ir::Tensor bound = quantize_tensor(n->input(i)->initializer(), p.type, p.params, std::nullopt);
        g_.set_node_input(n, i, new_initializer(n->input(i)->name() + "_quantized", std::move(bound)));
      }
    }
    if (pad) {  // pads with the zero point: the quantized 0 (ORT's QPad)
      std::string mode = n->attr_string("mode", "constant");
      if (mode == "constant" || present(n->input(2))) g_.set_node_input(n, 2, params(data).second);
    }
    for (size_t i = 0; i < n->outputs().size(); ++i)
      if (present(n->output(i))) g_.set_node_output(n, i, quantized_output(n, i));
  }

  void rewrite_qlinear(ir::Node* n) {
    const auto& [qop, domain] = qlinear_ops().at(n->op_type);
    uses_contrib_ = uses_contrib_ || domain == "com.microsoft";
    auto q_triplet = [&](const ir::Value* v) {
      auto sz = params(v->name());
      return std::vector<ir::Value*>{quantized(v->name()), sz.first, sz.second};
    };
    std::vector<ir::Value*> inputs;
    auto append = [&](std::vector<ir::Value*> more) { inputs.insert(inputs.end(), more.begin(), more.end()); };
    const ir::Value* y = n->output(0);
    auto y_sz = params(y->name());
    const std::string& op = n->op_type;
    if (op == "Conv" || op == "MatMul") {
      append(q_triplet(n->input(0)));
      append(q_triplet(n->input(1)));
      append({y_sz.first, y_sz.second});
      if (op == "Conv" && present(n->input(2))) inputs.push_back(conv_bias(*n));
    } else if (op == "Add" || op == "Mul") {
      append(q_triplet(n->input(0)));
      append(q_triplet(n->input(1)));
      append({y_sz.first, y_sz.second});
    } else if (op == "Concat") {
      append({y_sz.first, y_sz.second});
      for (const ir::Value* x : n->inputs()) append(q_triplet(x));
    } else {  // Sigmoid, LeakyRelu, GlobalAveragePool, AveragePool
      append(q_triplet(n->input(0)));
      append({y_sz.first, y_sz.second});
    }
    ir::Value* out = quantized_output(n, 0);
    std::string name = n->name.empty() ? "" : g_.fresh_name(n->name + "_quant");
    ir::Node* q = g_.add_node(qop, inputs, {out}, name, domain);
    for (ir::Attribute& a : n->attributes) q->set_attribute(std::move(a));  // n goes next
    if (op == "GlobalAveragePool" || op == "AveragePool") q->set_attribute(ir::Attribute::of_int("channels_last", 0));
    g_.remove_node(n);
  }

  // The int32 bias of a QLinearConv, in units of its s_x * s_w. A bias initializer several Convs
  // share (identical zero biases merged, say) is planned for the first one's scales: the others
  // get a copy quantized for theirs, as ORT's quantize_bias_tensor duplicates a shared bias.
  ir::Value* conv_bias(const ir::Node& n) {
    const std::string& name = n.input(2)->name();
    const TensorPlan& b = *plan_.find(name);
    if (b.bias_input == n.input(0)->name() && b.bias_weight == n.input(1)->name()) return quantized(name);
    const ir::Value* source = source_.graph->find_value(name);
    if (!source || !source->has_initializer())
      throw Error("QOperator export: bias '" + name + "' is not an initializer");
    BiasOptions o = bias_options_of(power_of_two_ ? Tool::vai : Tool::ort);
    QuantizedBias q = quantize_bias(source->initializer(), plan_.provider(n.input(0)->name()).params.at(0).scale,
                                    plan_.provider(n.input(1)->name()).params, o);
    return new_initializer(name + "_quantized", std::move(q.data));
  }

  // QuantizeLinear / DequantizeLinear nodes nobody reads (a dequantized value only quantized readers use).
  void remove_dead_nodes() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& node : g_.nodes()) {
        ir::Node* n = node.get();
        if (n->op_type != "QuantizeLinear" && n->op_type != "DequantizeLinear") continue;
        ir::Value* out = n->output(0);
        if (!out->uses().empty() || g_.is_output(out)) continue;
        g_.remove_node(n);
        g_.remove_value(out);
        changed = true;
        break;
      }
    }
    for (const TensorPlan& t : plan_.tensors) {  // names nothing writes or reads any more
      ir::Value* v = g_.find_value(t.name);
      if (v && !v->producer() && v->uses().empty() && !v->has_initializer() && !g_.is_input(v) && !g_.is_output(v))
        g_.remove_value(v);
    }
    std::vector<ir::Value*> unused;  // float weights their quantized values replaced
    for (ir::Value* v : g_.initializers())
      if (plan_.find(v->name()) && v->uses().empty() && !g_.is_input(v) && !g_.is_output(v)) unused.push_back(v);
    for (ir::Value* v : unused) g_.remove_value(v);
  }

  const ir::Model& source_;  // the float model (float values of shared biases)
  ir::Model model_;
  ir::Graph& g_;
  const Plan& plan_;
  bool power_of_two_;  // parameters by vai_q_onnx's rules (its bias arithmetic), else ORT's
  int64_t opset_ = 0;
  std::set<std::string> quantized_nodes_;
  bool uses_contrib_ = false;
  std::map<std::string, ir::Value*> q_, f_;                          // tensor -> quantized / dequantized value
  std::map<std::string, std::pair<ir::Value*, ir::Value*>> params_;  // provider -> scale and zero point
};

}  // namespace

ir::Model export_qoperator(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  return QOperatorExporter(model, plan, config.power_of_two()).run();
}

}  // namespace onnxptq::quant
