// QuantFormat.QDQ: QuantizeLinear/DequantizeLinear pairs around the float graph, with ORT's
// names (ONNX Runtime's qdq_quantizer.py). The same writer, given another
// QdqStyle, writes the Vitis formats (export_vitis.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "ir/float16.h"
#include "onnxptq/error.h"
#include "qmath/params.h"
#include "qmath/quantize.h"
#include "quant/block_format.h"
#include "quant/export.h"
#include "quant/extended_lstm.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

using ir::DataType;

class QdqExporter {
 public:
  QdqExporter(const ir::Model& model, const Plan& plan, const QuantConfig& config, QdqStyle style)
      : model_(ir::clone_model(model)),
        root_(*model_.graph),
        g_(&root_),
        plan_(plan),
        config_(config),
        style_(std::move(style)) {}

  ir::Model run() {
    if (style_.domain.empty()) {  // the standard ops: their opset rules (as ORT's QDQQuantizer)
      int64_t opset = model_.opset("");
      if (opset < 10) throw Error("QDQ needs opset 10 or later; the model has opset " + std::to_string(opset));
      bool wide = false, per_channel = false;
      for (const TensorPlan& t : plan_.tensors) {
        auto is_wide = [](DataType type) { return ir::data_type_bits(type) == 16 || qmath::is_4bit_type(type); };
        wide = wide || is_wide(t.type) ||  // Int16Bias's biases too
               (t.convert && is_wide(t.convert->type));
        per_channel = per_channel || (t.axis && t.role == Role::Weight);
      }
      if (per_channel && opset < 13)
        throw Error("per-channel quantization needs opset 13 or later; the model has opset " + std::to_string(opset) +
                    " (upgrade it first)");
      // As ONNX Runtime's qdq_quantizer.py does: 16- and 4-bit Q/DQ below opset 21 from com.microsoft.
      if (wide && opset < 21) style_.domain = "com.microsoft";
    }
    if (style_.cast_bfloat16 && model_.opset("") < 13)
      for (const TensorPlan& t : plan_.tensors)
        if (t.type == DataType::BFloat16 || (t.convert && t.convert->type == DataType::BFloat16))
          throw Error(
              "the Cast form of bfloat16 Q/DQ needs opset 13 or later (Cast takes bfloat16 from 13); the "
              "model has opset " +
              std::to_string(model_.opset("")) + " (upgrade it first, or set FloatQDQAsCustomOps)");
    if (!style_.domain.empty()) model_.set_opset(style_.domain, style_.domain_version);

    remove_planned_activations(root_, plan_);
    for (const TensorPlan& t : plan_.tensors) {
      switch (t.role) {
        case Role::Weight:
          weight(t);
          break;
        case Role::Bias:
          bias(t);
          break;
        case Role::Activation:
          activation(t);
          break;
      }
    }
    // Every graph: the main one and the If/Loop/Scan bodies holding quantized nodes.
    std::vector<ir::Graph*> graphs = root_.nested_graphs();
    graphs.insert(graphs.begin(), &root_);
    for (ir::Graph* g : graphs) {
      for (const auto& node : g->nodes()) drop_gemm_beta_held_by_bias(*node, plan_);
      g->sort_nodes();
    }
    model_.producer_name = "onnxptq";
    return std::move(model_);
  }

 private:
  // What the quantize and dequantize of one plan entry read: the scale and zero point initializers
  // of a QuantizeLinear / DequantizeLinear; in the Cast form of a float16/bfloat16 type, the
  // float32 scale of its Div / Mul and zero point of its Add / Sub, each nullptr when it is 1 (0),
  // and no node is written for it.
  struct QParams {
    DataType type = DataType::Int8;
    bool cast = false;
    ir::Value* scale = nullptr;
    ir::Value* zero_point = nullptr;
  };

  // One node of a chain written by write_chain: op, the inputs after the chain's value, its name.
  struct Step {
    std::string op;
    std::vector<ir::Value*> operands;
    std::string name;
    std::function<void(ir::Node&)> attributes;  // sets the node's attributes, if any
  };

  bool cast_form(DataType type) const {
    return (type == DataType::Float16 && style_.cast_float16) || (type == DataType::BFloat16 && style_.cast_bfloat16);
  }
  // BF16WithClip: a bfloat16 quantize of a value computed at run time (Quark's
  // insert_clip_bfloat16_qdq: an ExtendedQuantizeLinear whose input is not an initializer).
  bool clips(DataType type, const ir::Value* x) const {
    return style_.clip_bfloat16 && type == DataType::BFloat16 && !x->has_initializer();
  }
  // EnableVaimlBF16 writes no bfloat16 Q/DQ, only BF16WithClip's Clip.
  bool writes_pair(DataType type, const ir::Value* x) const {
    return !(style_.vaiml_bfloat16 && type == DataType::BFloat16) || clips(type, x);
  }

  // In the main graph, which every body sees (ONNX's scope rule): parameters shared by tensors
  // of several graphs are written once. Names are unique across the model (Graph::fresh_name).
  ir::Value* new_initializer(const std::string& name, ir::Tensor tensor) {
    ir::Value* v = root_.add_unique_value(name);
    root_.set_initializer(v, std::move(tensor));
    return v;
  }

  // x through `steps` in order, the last one writing `out`, each earlier one <its name>_Output.
  void write_chain(ir::Value* x, const std::vector<Step>& steps, ir::Value* out) {
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      ir::Value* y = i + 1 == steps.size() ? out : g_->add_unique_value(s.name + "_Output");
      std::vector<ir::Value*> inputs = {x};
      inputs.insert(inputs.end(), s.operands.begin(), s.operands.end());
      ir::Node* n = g_->add_node(s.op, inputs, {y}, g_->fresh_name(s.name));
      if (s.attributes) s.attributes(*n);
      x = y;
    }
  }

  static Step cast_to(DataType type, const std::string& name) {
    return {"Cast", {}, name, [type](ir::Node& n) {
              n.set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(type)));
            }};
  }

  // Clip(x, -m, m), m the largest bfloat16: bounds as inputs from opset 11, attributes before.
  Step clip_step(const std::string& name) {
    if (model_.opset("") < 11)
      return {"Clip", {}, name, [](ir::Node& n) {
                n.set_attribute(ir::Attribute::of_float("min", -kBfloat16Max));
                n.set_attribute(ir::Attribute::of_float("max", kBfloat16Max));
              }};
    if (!clip_bounds_.first) {
      clip_bounds_.first = new_initializer("bfloat16_clip_min", ir::Tensor::from_values<float>({}, {-kBfloat16Max}));
      clip_bounds_.second = new_initializer("bfloat16_clip_max", ir::Tensor::from_values<float>({}, {kBfloat16Max}));
    }
    return {"Clip", {clip_bounds_.first, clip_bounds_.second}, name, {}};
  }

  // The scale and zero point initializers of a plan entry (shared ones are made once), each a
  // scalar or a 1-D tensor; in the Cast form float32 tensors of `cast_dims` (a scalar when empty:
  // a per-channel weight's take its rank, the channel count on its axis, to broadcast).
  QParams scale_and_zero_point(const TensorPlan& t, const std::string& scale_name, const std::string& zp_name,
                               bool scale_vector, bool zp_vector, const std::vector<int64_t>& cast_dims = {}) {
    return scale_and_zero_point(t.params, t.type, scale_name, zp_name, scale_vector, zp_vector, cast_dims);
  }
  QParams scale_and_zero_point(const std::vector<qmath::ScaleZeroPoint>& params, DataType type,
                               const std::string& scale_name, const std::string& zp_name, bool scale_vector,
                               bool zp_vector, const std::vector<int64_t>& cast_dims = {}) {
    std::vector<float> scales;
    for (const qmath::ScaleZeroPoint& p : params) scales.push_back(static_cast<float>(p.scale));
    QParams out;
    out.type = type;
    if (cast_form(type)) {
      // Quark's op casts x / s (+ zp for bfloat16; its float16 op ignores the zero point).
      std::vector<float> zero_points;
      for (const qmath::ScaleZeroPoint& p : params) zero_points.push_back(static_cast<float>(p.float_zero_point));
      out.cast = true;
      if (std::any_of(scales.begin(), scales.end(), [](float s) { return s != 1; }))
        out.scale = new_initializer(scale_name, ir::Tensor::from_values<float>(cast_dims, scales));
      if (type == DataType::BFloat16 &&
          std::any_of(zero_points.begin(), zero_points.end(), [](float z) { return z != 0; }))
        out.zero_point = new_initializer(zp_name, ir::Tensor::from_values<float>(cast_dims, zero_points));
      return out;
    }
    auto dims = [&](bool vector) {
      return vector ? std::vector<int64_t>{static_cast<int64_t>(scales.size())} : std::vector<int64_t>{};
    };
    out.scale = new_initializer(scale_name, ir::Tensor::from_values<float>(dims(scale_vector), scales));
    // FixNeuron takes an int8 zero point whatever its bit width (vai_q_onnx's FixNeuron op).
    DataType zp_type = style_.fix_neuron ? DataType::Int8 : type;
    out.zero_point = new_initializer(zp_name, zero_point_tensor(zp_type, dims(zp_vector), params));
    return out;
  }

  // A DequantizeLinear q -> out; the Cast form: Cast to float, then Sub the zero point and Mul the
  // scale where they are not 0 and 1 (Quark's replace_bfloat16_qdq_cast: Cast and an optional Mul).
  void dq(ir::Value* q, const QParams& p, ir::Value* out, const std::string& name, std::optional<int64_t> axis) {
    if (p.cast) {
      std::vector<Step> steps = {cast_to(DataType::Float, name)};
      if (p.zero_point) steps.push_back({"Sub", {p.zero_point}, name + "_Sub", {}});
      if (p.scale) steps.push_back({"Mul", {p.scale}, name + "_Mul", {}});
      write_chain(q, steps, out);
      return;
    }
    ir::Node* n =
        g_->add_node(style_.dequantize_op, {q, p.scale, p.zero_point}, {out}, g_->fresh_name(name), style_.domain);
    if (axis) n->set_attribute(ir::Attribute::of_int("axis", *axis));
  }

  // A QuantizeLinear x -> out, after BF16WithClip's Clip; the Cast form: Div by the scale and Add the
  // zero point where they are not 1 and 0, then Cast to the type. A Div, not Quark's Mul by the
  // reciprocal: it computes Quark's op's x / s exactly.
  void q(ir::Value* x, const QParams& p, ir::Value* out, const std::string& name, std::optional<int64_t> axis) {
    std::vector<Step> steps;
    if (clips(p.type, x)) steps.push_back(clip_step(name + "_Clip"));
    if (p.cast) {
      if (p.scale) steps.push_back({"Div", {p.scale}, name + "_Div", {}});
      if (p.zero_point) steps.push_back({"Add", {p.zero_point}, name + "_Add", {}});
      steps.push_back(cast_to(p.type, name));
      write_chain(x, steps, out);
      return;
    }
    if (!steps.empty()) {
      ir::Value* clipped = g_->add_unique_value(name + "_Clip_Output");
      write_chain(x, steps, clipped);
      x = clipped;
    }
    ir::Node* n =
        g_->add_node(style_.quantize_op, {x, p.scale, p.zero_point}, {out}, g_->fresh_name(name), style_.domain);
    if (axis) n->set_attribute(ir::Attribute::of_int("axis", *axis));
  }

  // x -> <t>_QuantizeLinear -> <t>_QuantizeLinear_Output<suffix> -> <t>_DequantizeLinear -> out;
  // under EnableVaimlBF16 a bfloat16 pair is only its Clip (callers skip it when there is none).
  void write_pair(ir::Value* x, const QParams& p, ir::Value* out, const std::string& base, const std::string& suffix,
                  std::optional<int64_t> axis) {
    if (style_.vaiml_bfloat16 && p.type == DataType::BFloat16) {
      write_chain(x, {clip_step(base + "_QuantizeLinear" + suffix + "_Clip")}, out);
      return;
    }
    ir::Value* qv = g_->add_unique_value(base + "_QuantizeLinear_Output" + suffix);
    q(x, p, qv, base + "_QuantizeLinear" + suffix, axis);
    dq(qv, p, out, base + "_DequantizeLinear" + suffix, axis);
  }

  // A block type's one node x -> out named <t>_DequantizeLinear<suffix> (Quark's _create_fn_nodes).
  void block_node_of(ir::Value* x, ir::Value* out, const TensorPlan& t, const std::string& suffix) {
    block_node_of(x, out, t.name, plan_.provider(t.name).type, t.block_axis, suffix);
  }
  void block_node_of(ir::Value* x, ir::Value* out, const std::string& name, DataType type,
                     std::optional<int64_t> axis, const std::string& suffix) {
    if (!axis) throw Error("QDQ export: block tensor '" + name + "' has no block axis");
    ir::Node proto = block_node(type, config_, *axis, x->has_initializer());
    ir::Node* n =
        g_->add_node(proto.op_type, {x}, {out}, g_->fresh_name(name + "_DequantizeLinear" + suffix), proto.domain);
    for (ir::Attribute& a : proto.attributes) n->set_attribute(std::move(a));
  }

  // The pair of plan entry t, or one FixNeuron x -> out named <t>_DequantizeLinear<suffix>
  // (vai_q_onnx's _create_fn_nodes) with its string attributes, or a block type's node.
  void pair(ir::Value* x, const QParams& p, ir::Value* out, const TensorPlan& t, const std::string& suffix,
            std::optional<int64_t> axis) {
    if (quant_type_is_block(plan_.provider(t.name).type)) {
      block_node_of(x, out, t, suffix);
      return;
    }
    if (style_.fix_neuron) {
      ir::Node* n = g_->add_node("FixNeuron", {x, p.scale, p.zero_point}, {out},
                                 g_->fresh_name(t.name + "_DequantizeLinear" + suffix), style_.domain);
      const TensorPlan& provider = plan_.provider(t.name);
      n->set_attribute(ir::Attribute::of_string("bit_width", std::to_string(ir::data_type_bits(provider.type))));
      n->set_attribute(ir::Attribute::of_string("pos", std::to_string(vitis_pos(static_cast<float>(provider.params.at(0).scale)))));
      return;
    }
    write_pair(x, p, out, t.name, suffix, axis);
  }

  void weight(const TensorPlan& t) {
    ir::Value* w = root_.find_value_nested(t.name);
    if (w) g_ = w->graph();                  // nodes go into the graph of the value (a body's, for a body's)
    if (w && quant_type_is_block(t.type)) {  // the float weight (finetuned, if it was) through its block node
      if (t.data) g_->set_initializer(w, *t.data);
      ir::Value* out = g_->add_unique_value(t.name + "_DequantizeLinear_Output");
      g_->replace_uses(w, out);
      block_node_of(w, out, t, "");
      return;
    }
    if (!w || !t.data) throw Error("QDQ export: weight '" + t.name + "' has no quantized values");
    if (style_.vaiml_bfloat16 && t.type == DataType::BFloat16) {
      // EnableVaimlBF16 (Quark's remove_bf16_cast): the weight's bfloat16 values stored as float32, no nodes.
      g_->set_initializer(w, dequantize_tensor(*t.data, t.params, t.data_axis(), quantize_options_of(config_)));
      return;
    }
    std::vector<int64_t> cast_dims;  // a per-channel scale broadcast along the weight's axis
    if (t.axis && cast_form(t.type)) {
      const std::vector<int64_t>& d = t.data->dims();
      int64_t axis = *t.axis < 0 ? *t.axis + static_cast<int64_t>(d.size()) : *t.axis;
      cast_dims.assign(d.size(), 1);
      cast_dims.at(static_cast<size_t>(axis)) = static_cast<int64_t>(t.params.size());
    }
    QParams sz = scale_and_zero_point(t, t.name + "_scale", t.name + "_zero_point", t.axis.has_value(),
                                      t.axis.has_value(), cast_dims);
    ir::Value* out = g_->add_unique_value(t.name + "_DequantizeLinear_Output");
    g_->replace_uses(w, out);
    // Float16/bfloat16 weights of custom ops stay float with a pair (Quark's default); the Cast form
    // stores them as 16-bit values with a Cast, as integer weights are stored.
    bool float_pair = style_.float_weights_as_pair && quant_type_is_float(t.type) && !sz.cast;
    if (config_.add_qdq_pair_to_weight || style_.weights_as_pair || style_.fix_neuron || float_pair) {
      pair(w, sz, out, t, "", t.axis);
      return;
    }
    ir::Value* quantized = new_initializer(t.name + "_quantized", *t.data);
    dq(quantized, sz, out, t.name + "_DequantizeLinear", t.axis);
    if (w->uses().empty() && !g_->is_input(w) && !g_->is_output(w)) g_->remove_value(w);
  }

  // The int32 bias: a DequantizeLinear writes the bias's own name (as ORT's QDQQuantizer).
  void bias(const TensorPlan& t) {
    ir::Value* b = root_.find_value_nested(t.name);
    if (b) g_ = b->graph();
    if (!b || !t.data) throw Error("QDQ export: bias '" + t.name + "' has no quantized values");
    if (style_.fix_neuron) {  // FixNeuron takes the float bias: bit_width 32 with the int32 bias's scale
      QParams sz = scale_and_zero_point(t, t.name + "_scale", t.name + "_zero_point", false, false);
      ir::Value* out = g_->add_unique_value(t.name + "_DequantizeLinear_Output");
      g_->replace_uses(b, out);
      pair(b, sz, out, t, "", std::nullopt);
      return;
    }
    ir::Value* quantized = new_initializer(t.name + "_quantized", *t.data);
    // ORT: the scale always 1-D; the zero point a scalar for one scale.
    QParams sz = scale_and_zero_point(t, t.name + "_quantized_scale", t.name + "_quantized_zero_point", true,
                                      t.params.size() > 1);
    g_->remove_initializer(b);
    dq(quantized, sz, b, t.name + "_DequantizeLinear", t.data_axis());
  }

  void activation(const TensorPlan& t) {
    // The readers a conversion is for, and which of their inputs read the tensor.
    std::vector<ir::Use> converted;
    if (ir::Value* v = root_.find_value_nested(t.name); v && t.convert)
      for (const ir::Use& u : v->uses())
        if (t.convert->recv_nodes.empty() || t.convert->recv_nodes.count(u.node->name)) converted.push_back(u);
    quantize_activation(t);
    if (t.convert) convert(t, converted);
  }

  // ORT's "convert": each reader in `readers` reads what it reads now quantized again with the
  // conversion's type and parameters (Q -> DQ -> Q -> DQ), one chain per value read.
  // A conversion to a block type is the type's one node.
  void convert(const TensorPlan& t, const std::vector<ir::Use>& readers) {
    const bool block = quant_type_is_block(t.convert->type);
    if (!block && !t.convert->params) throw Error("QDQ export: the conversion of '" + t.name + "' has no parameters");
    std::optional<QParams> sz;
    std::map<ir::Value*, ir::Value*> chain;  // value read -> its converted copy
    for (const ir::Use& u : readers) {
      ir::Value* read = u.node->input(u.input);
      if (block) {
        auto [it, added] = chain.try_emplace(read, nullptr);
        if (added) {
          it->second = g_->add_unique_value(t.name + "_DequantizeLinear_Output_convert");
          block_node_of(read, it->second, t.name, t.convert->type, t.convert->block_axis, "_convert");
        }
        g_->set_node_input(u.node, u.input, it->second);
        continue;
      }
      if (!writes_pair(t.convert->type, read)) continue;
      if (!sz)
        sz = scale_and_zero_point({*t.convert->params}, t.convert->type, t.name + "_scale_convert",
                                  t.name + "_zero_point_convert", false, false);
      auto [it, added] = chain.try_emplace(read, nullptr);
      if (added) {
        it->second = g_->add_unique_value(t.name + "_DequantizeLinear_Output_convert");
        write_pair(read, *sz, it->second, t.name, "_convert", std::nullopt);
      }
      g_->set_node_input(u.node, u.input, it->second);
    }
  }

  void quantize_activation(const TensorPlan& t) {
    ir::Value* v = root_.find_value_nested(t.name);
    if (!v) throw Error("QDQ export: the model has no tensor '" + t.name + "'");
    g_ = v->graph();
    const TensorPlan& provider = plan_.provider(t.name);
    if (!writes_pair(provider.type, v)) return;  // EnableVaimlBF16: the activation is left as it is
    QParams sz;
    auto known = params_of_.find(provider.name);
    if (quant_type_is_block(provider.type)) {
      // no scale or zero point: pair() writes the block node
    } else if (known != params_of_.end()) {
      sz = known->second;
    } else {
      sz = scale_and_zero_point(provider, provider.name + "_scale", provider.name + "_zero_point", false, false);
      params_of_[provider.name] = sz;
    }

    if (g_->is_output(v)) {  // the graph output keeps its name: the DequantizeLinear writes it
      ir::Node* producer = v->producer();
      if (!producer) return;  // a graph input passed straight through: nothing to quantize
      ir::Value* input = g_->add_unique_value(t.name + "_QuantizeLinear_Input");
      g_->set_node_output(producer, v->producer_output(), input);  // readers of v read the DequantizeLinear
      pair(input, sz, v, t, "", std::nullopt);
      return;
    }
    std::vector<ir::Use> uses = v->uses();
    if (uses.empty()) return;
    if (config_.dedicated_qdq_pair && uses.size() > 1) {
      for (size_t i = 0; i < uses.size(); ++i) {
        std::string suffix = "_" + std::to_string(i + 1);
        ir::Value* out = g_->add_unique_value(t.name + "_DequantizeLinear_Output" + suffix);
        g_->set_node_input(uses[i].node, uses[i].input, out);
        pair(v, sz, out, t, suffix, std::nullopt);
      }
      return;
    }
    ir::Value* out = g_->add_unique_value(t.name + "_DequantizeLinear_Output");
    g_->replace_uses(v, out);
    pair(v, sz, out, t, "", std::nullopt);
  }

  ir::Model model_;
  ir::Graph& root_;
  ir::Graph* g_;  // the graph of the tensor being written
  const Plan& plan_;
  const QuantConfig& config_;
  QdqStyle style_;
  std::map<std::string, QParams> params_of_;                         // provider -> its scale and zero point
  std::pair<ir::Value*, ir::Value*> clip_bounds_{nullptr, nullptr};  // BF16WithClip's, made once
};

}  // namespace

void remove_planned_activations(ir::Graph& g, const Plan& plan) {
  for (const std::string& out_name : plan.removed_activations) {
    ir::Value* out = g.find_value_nested(out_name);
    ir::Node* act = out ? out->producer() : nullptr;
    ir::Value* in = act ? act->input(0) : nullptr;
    ir::Node* producer = in ? in->producer() : nullptr;
    if (!producer || producer->graph() != act->graph())
      throw Error("export: the activation writing '" + out_name + "' has no producer to fuse into");
    ir::Graph& owner = *act->graph();  // a body's, for an activation inside an If/Loop/Scan body
    size_t index = in->producer_output();
    owner.remove_node(act);
    owner.set_node_output(producer, index, out);
    if (in->uses().empty() && !owner.is_output(in)) owner.remove_value(in);
  }
}

void drop_gemm_beta_held_by_bias(ir::Node& node, const Plan& plan) {
  const TensorPlan* bias = node.input(2) ? plan.find(node.input(2)->name()) : nullptr;
  if (node.op_type == "Gemm" && bias && bias->role == Role::Bias)
    node.set_attribute(ir::Attribute::of_float("beta", 1.0f));
}

ir::Tensor zero_point_tensor(DataType type, std::vector<int64_t> dims,
                             const std::vector<qmath::ScaleZeroPoint>& params) {
  ir::Tensor t(type, std::move(dims));
  if (type == DataType::Float16 || type == DataType::BFloat16) {  // a value of that type (vai_q_onnx)
    std::span<uint16_t> out = t.mutable_values<uint16_t>();
    for (size_t i = 0; i < params.size(); ++i) {
      auto z = static_cast<float>(params[i].float_zero_point);
      out[i] = type == DataType::Float16 ? ir::float_to_half(z) : ir::float_to_bfloat16(z);
    }
    return t;
  }
  if (qmath::is_4bit_type(type)) {
    std::vector<int8_t> held;
    for (const qmath::ScaleZeroPoint& p : params) held.push_back(static_cast<int8_t>(p.zero_point));
    qmath::pack_4bit(held.data(), static_cast<int64_t>(held.size()), t.mutable_bytes());
    return t;
  }
  qmath::visit_integer_quant_type(type, "a zero point", [&](auto tag) {
    using T = decltype(tag);
    std::span<T> out = t.mutable_values<T>();
    for (size_t i = 0; i < params.size(); ++i) out[i] = static_cast<T>(params[i].zero_point);
  });
  return t;
}

ir::Model export_qdq_styled(const ir::Model& model, const Plan& plan, const QuantConfig& config,
                            const QdqStyle& style) {
  return QdqExporter(model, plan, config, style).run();
}

ir::Model export_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  return export_qdq_styled(model, plan, config, QdqStyle{});
}

namespace {

ir::Model export_format(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  switch (config.format) {
    case QuantFormat::QDQ:
      return export_qdq(model, plan, config);
    case QuantFormat::VitisQDQ:
      return export_vitis_qdq(model, plan, config);
    case QuantFormat::FixNeuron:
      return export_fix_neuron(model, plan, config);
    case QuantFormat::QOperator:
      return export_qoperator(model, plan, config);
    case QuantFormat::ExtendedQDQ:
      return export_extended_qdq(model, plan, config);
  }
  throw Error("unknown quant format");
}

}  // namespace

ir::Model export_model(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  ir::Model out = export_format(model, plan, config);
  if (config.convert_lstm_to_custom_lstm) {
    // The quantized LSTMs, now between their uint16 Q/DQ nodes, as Quark's ExtendedLSTM.
    std::set<std::string> lstms;
    for (const auto& n : model.graph->nodes())
      if (n->op_type == "LSTM" && std::count(plan.quantized_nodes.begin(), plan.quantized_nodes.end(), n->name))
        lstms.insert(n->name);
    std::vector<std::string> log;
    if (!lstms.empty()) convert_lstms_to_extended(out, log, &lstms);
  }
  return out;
}

}  // namespace onnxptq::quant
