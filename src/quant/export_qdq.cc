// QuantFormat.QDQ: QuantizeLinear/DequantizeLinear pairs around the float graph, with ORT's
// names (shared/spec/ort_quantization.md §4.4-4.8, §4.12).
#include <algorithm>
#include <cstdint>

#include "engine/kernels/quantize.h"
#include "onnxptq/error.h"
#include "quant/export.h"

namespace onnxptq::quant {

namespace {

using ir::DataType;

// A tensor of an integer quant type holding `values`.
ir::Tensor integer_tensor(DataType type, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  ir::Tensor t(type, std::move(dims));
  engine::visit_integer_quant_type(type, "QDQ export: a zero point", [&](auto tag) {
    using T = decltype(tag);
    std::span<T> out = t.mutable_values<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values[i]);
  });
  return t;
}

class QdqExporter {
 public:
  QdqExporter(const ir::Model& model, const Plan& plan, const QuantConfig& config)
      : model_(ir::clone_model(model)), g_(*model_.graph), plan_(plan), config_(config) {}

  ir::Model run() {
    int64_t opset = model_.opset("");
    if (opset < 10) throw Error("QDQ needs opset 10 or later; the model has opset " + std::to_string(opset));
    bool wide = false, per_channel = false;
    for (const TensorPlan& t : plan_.tensors) {
      wide = wide || (t.role != Role::Bias && ir::data_type_bits(t.type) == 16);
      per_channel = per_channel || (t.axis && t.role == Role::Weight);
    }
    if (per_channel && opset < 13)
      throw Error("per-channel quantization needs opset 13 or later; the model has opset " + std::to_string(opset) +
                  " (upgrade it first)");
    if (wide && opset < 21) {  // as ORT does: 16-bit Q/DQ from com.microsoft below opset 21
      domain_ = "com.microsoft";
      model_.set_opset(domain_, 1);
    }

    for (const std::string& out : plan_.removed_activations) remove_activation(out);
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
    for (const auto& node : g_.nodes())  // the bias scale already holds beta
      if (node->op_type == "Gemm" && node->input(2) && plan_.find(node->input(2)->name()))
        node->set_attribute(ir::Attribute::of_float("beta", 1.0f));
    g_.sort_nodes();
    model_.producer_name = "onnxptq";
    return std::move(model_);
  }

 private:
  // Relu/Clip whose producer now writes its output (ORT §4.9).
  void remove_activation(const std::string& out_name) {
    ir::Value* out = g_.find_value(out_name);
    ir::Node* act = out ? out->producer() : nullptr;
    ir::Value* in = act ? act->input(0) : nullptr;
    ir::Node* producer = in ? in->producer() : nullptr;
    if (!producer) throw Error("QDQ export: the activation writing '" + out_name + "' has no producer to fuse into");
    size_t index = in->producer_output();
    g_.remove_node(act);
    g_.set_node_output(producer, index, out);
    if (in->uses().empty() && !g_.is_output(in)) g_.remove_value(in);
  }

  ir::Value* new_initializer(const std::string& name, ir::Tensor tensor) {
    ir::Value* v = g_.add_unique_value(name);
    g_.set_initializer(v, std::move(tensor));
    return v;
  }

  // The scale and zero point initializers of a plan entry (shared ones are made once), each a
  // scalar or a 1-D tensor.
  std::pair<ir::Value*, ir::Value*> scale_and_zero_point(const TensorPlan& t, const std::string& scale_name,
                                                         const std::string& zp_name, bool scale_vector,
                                                         bool zp_vector) {
    std::vector<float> scales;
    std::vector<int64_t> zps;
    for (const ScaleZeroPoint& p : t.params) {
      scales.push_back(static_cast<float>(p.scale));
      zps.push_back(p.zero_point);
    }
    auto dims = [&](bool vector) {
      return vector ? std::vector<int64_t>{static_cast<int64_t>(scales.size())} : std::vector<int64_t>{};
    };
    ir::Value* s = new_initializer(scale_name, ir::Tensor::from_values<float>(dims(scale_vector), scales));
    ir::Value* z = new_initializer(zp_name, integer_tensor(t.type, dims(zp_vector), zps));
    return {s, z};
  }

  ir::Node* dq(ir::Value* q, std::pair<ir::Value*, ir::Value*> sz, ir::Value* out, const std::string& name,
               std::optional<int64_t> axis) {
    ir::Node* n = g_.add_node("DequantizeLinear", {q, sz.first, sz.second}, {out}, g_.fresh_name(name), domain_);
    if (axis) n->set_attribute(ir::Attribute::of_int("axis", *axis));
    return n;
  }

  ir::Node* q(ir::Value* x, std::pair<ir::Value*, ir::Value*> sz, ir::Value* out, const std::string& name,
              std::optional<int64_t> axis) {
    ir::Node* n = g_.add_node("QuantizeLinear", {x, sz.first, sz.second}, {out}, g_.fresh_name(name), domain_);
    if (axis) n->set_attribute(ir::Attribute::of_int("axis", *axis));
    return n;
  }

  void weight(const TensorPlan& t) {
    ir::Value* w = g_.find_value(t.name);
    if (!w || !t.data) throw Error("QDQ export: weight '" + t.name + "' has no quantized values");
    auto sz =
        scale_and_zero_point(t, t.name + "_scale", t.name + "_zero_point", t.axis.has_value(), t.axis.has_value());
    ir::Value* out = g_.add_unique_value(t.name + "_DequantizeLinear_Output");
    g_.replace_uses(w, out);
    if (config_.add_qdq_pair_to_weight) {
      ir::Value* qv = g_.add_unique_value(t.name + "_QuantizeLinear_Output");
      q(w, sz, qv, t.name + "_QuantizeLinear", t.axis);
      dq(qv, sz, out, t.name + "_DequantizeLinear", t.axis);
      return;
    }
    ir::Value* quantized = new_initializer(t.name + "_quantized", *t.data);
    dq(quantized, sz, out, t.name + "_DequantizeLinear", t.axis);
    if (w->uses().empty() && !g_.is_input(w) && !g_.is_output(w)) g_.remove_value(w);
  }

  // The int32 bias: a DequantizeLinear writes the bias's own name (ORT §4.7).
  void bias(const TensorPlan& t) {
    ir::Value* b = g_.find_value(t.name);
    if (!b || !t.data) throw Error("QDQ export: bias '" + t.name + "' has no quantized values");
    ir::Value* quantized = new_initializer(t.name + "_quantized", *t.data);
    // ORT: the scale always 1-D; the zero point a scalar for one scale.
    auto sz = scale_and_zero_point(t, t.name + "_quantized_scale", t.name + "_quantized_zero_point", true,
                                   t.params.size() > 1);
    g_.remove_initializer(b);
    dq(quantized, sz, b, t.name + "_DequantizeLinear", t.params.size() > 1 ? std::optional<int64_t>(0) : std::nullopt);
  }

  void activation(const TensorPlan& t) {
    ir::Value* v = g_.find_value(t.name);
    if (!v) throw Error("QDQ export: the model has no tensor '" + t.name + "'");
    const TensorPlan& provider = plan_.provider(t.name);
    std::pair<ir::Value*, ir::Value*> sz;
    auto known = params_of_.find(provider.name);
    if (known != params_of_.end()) {
      sz = known->second;
    } else {
      sz = scale_and_zero_point(provider, provider.name + "_scale", provider.name + "_zero_point", false, false);
      params_of_[provider.name] = sz;
    }

    if (g_.is_output(v)) {  // the graph output keeps its name: the DequantizeLinear writes it
      ir::Node* producer = v->producer();
      if (!producer) return;  // a graph input passed straight through: nothing to quantize
      ir::Value* input = g_.add_unique_value(t.name + "_QuantizeLinear_Input");
      g_.set_node_output(producer, v->producer_output(), input);  // readers of v read the DequantizeLinear
      ir::Value* qv = g_.add_unique_value(t.name + "_QuantizeLinear_Output");
      q(input, sz, qv, t.name + "_QuantizeLinear", std::nullopt);
      dq(qv, sz, v, t.name + "_DequantizeLinear", std::nullopt);
      return;
    }
    std::vector<ir::Use> uses = v->uses();
    if (uses.empty()) return;
    if (config_.dedicated_qdq_pair && uses.size() > 1) {
      for (size_t i = 0; i < uses.size(); ++i) {
        std::string suffix = "_" + std::to_string(i + 1);
        ir::Value* qv = g_.add_unique_value(t.name + "_QuantizeLinear_Output" + suffix);
        ir::Value* out = g_.add_unique_value(t.name + "_DequantizeLinear_Output" + suffix);
        g_.set_node_input(uses[i].node, uses[i].input, out);
        q(v, sz, qv, t.name + "_QuantizeLinear" + suffix, std::nullopt);
        dq(qv, sz, out, t.name + "_DequantizeLinear" + suffix, std::nullopt);
      }
      return;
    }
    ir::Value* out = g_.add_unique_value(t.name + "_DequantizeLinear_Output");
    g_.replace_uses(v, out);
    ir::Value* qv = g_.add_unique_value(t.name + "_QuantizeLinear_Output");
    q(v, sz, qv, t.name + "_QuantizeLinear", std::nullopt);
    dq(qv, sz, out, t.name + "_DequantizeLinear", std::nullopt);
  }

  ir::Model model_;
  ir::Graph& g_;
  const Plan& plan_;
  const QuantConfig& config_;
  std::string domain_;                                                  // of the Q/DQ ops: "" or com.microsoft
  std::map<std::string, std::pair<ir::Value*, ir::Value*>> params_of_;  // provider -> its scale and zero point
};

}  // namespace

ir::Model export_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  return QdqExporter(model, plan, config).run();
}

ir::Model export_model(const ir::Model& model, const Plan& plan, const QuantConfig& config) {
  switch (config.format) {
    case QuantFormat::QDQ:
      return export_qdq(model, plan, config);
    default:
      throw Error(std::string("quant format ") + quant_format_name(config.format) +
                  " cannot be written yet (onnxptq writes QuantFormat.QDQ)");
  }
}

}  // namespace onnxptq::quant
