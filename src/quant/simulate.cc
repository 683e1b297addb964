#include "quant/simulate.h"

#include <set>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "onnxptq/error.h"
#include "quant/block_format.h"
#include "quant/export.h"
#include "quant/extended_lstm.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

QuantizeOptions quantize_options_of(const QuantConfig& config) {
  QuantizeOptions o;
  if (config.format == QuantFormat::VitisQDQ || config.format == QuantFormat::FixNeuron)
    o.float_cast = FloatCast::vitis_op;
  // The Cast form computes Quark's float16 arithmetic exactly, and its bfloat16 arithmetic but for
  // the sign of a zero when the zero point is 0 (QuantizeOptions::bfloat16_cast_form).
  if (config.format == QuantFormat::ExtendedQDQ) o.float_cast = FloatCast::quark_op;
  o.bfloat16_cast_form = config.casts_bfloat16();
  return o;
}

namespace {

// What the written model does to an activation: BF16WithClip's Clip (NaN passes, as in ONNX Runtime's
// and the engine's Clip), then its Q/DQ pair, which EnableVaimlBF16 removes for bfloat16.
void fake_quantize_written(ir::Tensor& value, ir::DataType type, const qmath::ScaleZeroPoint& params, bool clip,
                           bool cast, const QuantizeOptions& qo) {
  if (!clip && !cast) return;
  if (value.dtype() != ir::DataType::Float) {
    if (!clip) {
      value = fake_quantize_tensor(value, type, std::span<const qmath::ScaleZeroPoint>(&params, 1), std::nullopt, qo);
      return;
    }
    value = engine::as_float32(value);
  }
  std::span<float> v = value.mutable_values<float>();
  if (clip)
    for (float& x : v) x = x < -kBfloat16Max ? -kBfloat16Max : (x > kBfloat16Max ? kBfloat16Max : x);
  if (cast) fake_quantize_values(v.data(), v.size(), type, params, qo, v.data());
}

// The node a block tensor's fake quantization computes (quant/block_format.h).
std::shared_ptr<const engine::BlockQuantizer> block_quantizer(const std::string& name, ir::DataType type,
                                                              std::optional<int64_t> axis, const QuantConfig& config,
                                                              bool constant) {
  if (!axis) throw Error("simulation: block tensor '" + name + "' has no block axis");
  return std::make_shared<const engine::BlockQuantizer>(block_node(type, config, *axis, constant));
}
std::shared_ptr<const engine::BlockQuantizer> block_quantizer(const TensorPlan& t, const QuantConfig& config,
                                                              bool constant) {
  return block_quantizer(t.name, t.type, t.block_axis, config, constant);
}

// BF16WithClip clips a bfloat16 activation computed at run time (Quark: an ExtendedQuantizeLinear
// whose input is not an initializer).
bool clips(ir::DataType type, const QuantConfig& config) {
  return config.bf16_with_clip && type == ir::DataType::BFloat16;
}
// EnableVaimlBF16 writes no Q/DQ for a bfloat16 activation.
bool casts(ir::DataType type, const QuantConfig& config) {
  return !(config.enable_vaiml_bf16 && type == ir::DataType::BFloat16);
}

}  // namespace

// A conversion (quant/plan.h) as an Identity node whose output, read by the converting readers,
// is fake-quantized again with the conversion's parameters: what Q -> DQ -> Q -> DQ computes.
void Simulation::add_conversions(ir::Graph& g, const Plan& plan, const QuantConfig& config,
                                 engine::SessionOptions& so) {
  bool added = false;
  for (const TensorPlan& t : plan.tensors) {
    if (!t.convert) continue;
    const bool block = quant_type_is_block(t.convert->type);
    if (!block && !t.convert->params)
      throw Error("simulation: the conversion of '" + t.name + "' has no parameters");
    ir::Value* v = g.find_value_nested(t.name);
    std::vector<ir::Use> readers;
    for (const ir::Use& u : v->uses())
      if (t.convert->recv_nodes.empty() || t.convert->recv_nodes.count(u.node->name)) readers.push_back(u);
    if (readers.empty()) continue;
    ir::Graph& owner = *v->graph();  // a body's, for a value of an If/Loop/Scan body
    ir::Value* converted = owner.add_unique_value(t.name + "_convert");
    owner.add_node("Identity", {v}, {converted}, owner.fresh_name(t.name + "_convert"));
    for (const ir::Use& u : readers) u.node->graph()->set_node_input(u.node, u.input, converted);
    if (block) {  // blocks along an axis: the hooks see the tensors in ONNX order
      activations_[converted->name()] = {
          t.convert->type, {}, false, false,
          block_quantizer(t.name + " (its conversion)", t.convert->type, t.convert->block_axis, config, false)};
      so.hooks_ignore_layout = false;
    } else {
      activations_[converted->name()] = {t.convert->type, *t.convert->params,
                                         clips(t.convert->type, config) && !v->has_initializer(),
                                         casts(t.convert->type, config), nullptr};
    }
    so.visible.insert(converted->name());
    added = true;
  }
  if (!added) return;
  g.sort_nodes();  // the Identity nodes go before their readers
  for (ir::Graph* body : g.nested_graphs()) body->sort_nodes();
}

// ConvertLSTMToCustomLSTM: each quantized LSTM as the ExtendedLSTM the writer makes of it, with
// the parameters of its (possibly converted) X, of W, R and B, and of Y. X and Y are still
// fake-quantized with the same parameters, which leaves them unchanged: the op quantizes X again
// to the same codes, and its Y is on Y's grid.
void Simulation::write_extended_lstms(ir::Graph& g, const Plan& plan) {
  std::set<std::string> quantized(plan.quantized_nodes.begin(), plan.quantized_nodes.end());
  std::vector<ir::Node*> lstms;
  for (const auto& n : g.nodes())
    if (n->op_type == "LSTM" && quantized.count(n->name)) lstms.push_back(n.get());
  for (ir::Node* lstm : lstms) {
    auto activation = [&](const ir::Value* v, const char* what) {
      auto it = v ? activations_.find(v->name()) : activations_.end();
      if (it == activations_.end() || it->second.type != ir::DataType::UInt16)
        throw Error("simulation: LSTM '" + lstm->name + "' " + what + " is not a uint16 activation");
      return it->second.params;
    };
    auto weight = [&](const ir::Value* v, const char* what) {
      const TensorPlan* t = v ? plan.find(v->name()) : nullptr;
      if (t && t->role == Role::Activation) return activation(v, what);
      if (!t || t->type != ir::DataType::UInt16 || t->params.size() != 1)
        throw Error("simulation: LSTM '" + lstm->name + "' " + what + " is not a uint16 weight of one scale");
      return t->params[0];
    };
    ExtendedLstmParams p{activation(lstm->input(0), "X"), weight(lstm->input(1), "W"), weight(lstm->input(2), "R"),
                         weight(lstm->input(3), "B"), activation(lstm->output(0), "Y")};
    write_extended_lstm(g, lstm, p);
  }
}

Simulation::Simulation(const ir::Model& model, const Plan& plan, const QuantConfig& config, int threads)
    : threads_(threads > 0 ? threads : engine::hardware_threads()) {
  const QuantizeOptions qo = quantize_options_of(config);
  // Weights and biases: the values the exported DequantizeLinear computes from the stored ones.
  auto constants = std::make_shared<std::map<std::string, ir::Tensor>>();
  engine::SessionOptions so;
  so.threads = threads;
  // Activation parameters are per tensor: the fake quantization treats every element alike. The
  // blocks of a block format run along an axis: they need the tensors in ONNX order.
  so.hooks_ignore_layout = true;
  for (const TensorPlan& t : plan.tensors) {
    const ir::Value* v = model.graph->find_value_nested(t.name);
    if (!v) throw Error("simulation: the planned tensor '" + t.name + "' is not in the model");
    if (quant_type_is_block(plan.provider(t.name).type)) {
      const bool constant = v->has_initializer();
      auto block = block_quantizer(t, config, constant);
      if (t.role != Role::Activation) {  // the weight finetuned, if it was
        constants->emplace(t.name, (*block)(t.data ? *t.data : v->initializer(), threads_));
        continue;
      }
      activations_[t.name] = {t.type, {}, false, false, std::move(block)};
      so.visible.insert(t.name);
      so.hooks_ignore_layout = false;
      continue;
    }
    if (t.role != Role::Activation) {
      if (!t.data || t.params.empty())
        throw Error("simulation: " + std::string(t.role == Role::Weight ? "weight" : "bias") + " '" + t.name +
                    "' has no quantized values (parameters not assigned)");
      constants->emplace(t.name, dequantize_tensor(*t.data, t.params, t.data_axis(), qo));
      continue;
    }
    const TensorPlan& provider = plan.provider(t.name);
    if (provider.params.size() != 1)
      throw Error("simulation: activation '" + t.name + "' has " + std::to_string(provider.params.size()) +
                  " parameters, expected one (parameters not assigned)");
    activations_[t.name] = {provider.type, provider.params[0],
                            clips(provider.type, config) && !model.graph->find_value_nested(t.name)->has_initializer(),
                            casts(provider.type, config), nullptr};
    so.visible.insert(t.name);
  }

  auto fake_quantize = [this, qo](const std::string& name, ir::Tensor& value) {
    auto it = activations_.find(name);
    if (it == activations_.end()) return;
    const Activation& a = it->second;
    if (a.block)
      value = (*a.block)(value, threads_);
    else
      fake_quantize_written(value, a.type, a.params, a.clip, a.cast, qo);
  };
  transform_ = fake_quantize;
  // Constants: weights and biases replaced, initializers quantized as activations fake-quantized.
  so.constant_transform = [constants, fake_quantize](const std::string& name, ir::Tensor& value) {
    auto it = constants->find(name);
    if (it != constants->end())
      value = it->second;
    else
      fake_quantize(name, value);
  };
  // The graph as exported: Relu/Clip nodes the plan removed are gone, and a Gemm whose bias is
  // quantized has beta in the bias scale.
  ir::Model simulated = ir::clone_model(model);
  remove_planned_activations(*simulated.graph, plan);
  add_conversions(*simulated.graph, plan, config, so);
  if (config.convert_lstm_to_custom_lstm) {
    write_extended_lstms(*simulated.graph, plan);
    simulated.set_opset("com.amd.quark", 1);
  }
  std::vector<ir::Graph*> graphs = simulated.graph->nested_graphs();
  graphs.insert(graphs.begin(), simulated.graph.get());
  for (ir::Graph* g : graphs)
    for (const auto& node : g->nodes()) drop_gemm_beta_held_by_bias(*node, plan);
  session_ = std::make_unique<engine::Session>(simulated, so);
}

Simulation::~Simulation() = default;

std::vector<ir::Tensor> Simulation::run(const std::map<std::string, ir::Tensor>& feeds,
                                        const engine::TensorObserver* observe) const {
  engine::RunHooks hooks;
  hooks.transform = &transform_;
  hooks.observe = observe;
  return session_->run(feeds, hooks);
}

Plan plan_within(const Plan& plan, const ir::Graph& part) {
  Plan sub;
  for (const TensorPlan& t : plan.tensors) {
    if (!part.find_value(t.name)) continue;
    TensorPlan copy = t;
    if (t.role == Role::Activation && !t.shared_from.empty()) {
      const TensorPlan& provider = plan.provider(t.name);
      copy.type = provider.type;
      copy.params = provider.params;
      copy.pos = provider.pos;
      copy.shared_from.clear();
    }
    sub.index[t.name] = sub.tensors.size();
    sub.tensors.push_back(std::move(copy));
    // A removed activation the part starts from was removed before it: the value fed is its output.
    if (plan.removed_activations.count(t.name) && part.find_value(t.name)->producer())
      sub.removed_activations.insert(t.name);
  }
  sub.quantized_nodes = plan.quantized_nodes;
  return sub;
}

void fake_quantize_activation(const Plan& plan, const QuantConfig& config, const std::string& name, ir::Tensor& value) {
  const TensorPlan* t = plan.find(name);
  if (!t || t->role != Role::Activation) return;
  const TensorPlan& provider = plan.provider(name);
  if (quant_type_is_block(provider.type)) {
    value = (*block_quantizer(*t, config, false))(value, engine::hardware_threads());
    return;
  }
  if (provider.params.size() != 1)
    throw Error("activation '" + name + "' has " + std::to_string(provider.params.size()) +
                " parameters, expected one (parameters not assigned)");
  // The value of a tensor computed at run time (fed to a part of the model), so clipped when its type is.
  fake_quantize_written(value, provider.type, provider.params[0], clips(provider.type, config),
                        casts(provider.type, config), quantize_options_of(config));
}

}  // namespace onnxptq::quant
