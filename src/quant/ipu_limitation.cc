// IPULimitationCheck on a power-of-two plan: the rules of ipu_rules.h swept in adjust_quantize_info's order over
// the plan's positions, changed through their parameter providers.
#include "quant/ipu_limitation.h"

#include <map>
#include <set>

#include "onnxptq/error.h"
#include "quant/ipu_rules.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

// The plan's positions, found where vai_q_onnx finds them on the QDQ graph: a tensor's slot is the
// provider of its parameters (Q/DQ pairs that share scale initializers).
class PlanPositions : public PositionView {
 public:
  explicit PlanPositions(const Plan& plan) : plan_(plan), fused_(plan.removed_activations) {
    for (const auto& [tensor, activation_output] : plan.fused_activations) fused_.insert(activation_output);
  }
  std::string read_slot(const ir::Value* v) const override { return slot(v); }
  std::string write_slot(const ir::Value* v) const override { return slot(v); }
  std::optional<int> pos(const std::string& slot) const override {
    const TensorPlan* t = plan_.find(slot);
    if (!t || t->params.size() != 1) return std::nullopt;
    return t->pos;
  }
  // A Relu/Clip the plan removed (its producer writes its output), or one whose input lost its
  // Q/DQ to enable_dpu's fusion (dpu_plan.h): the activation's output position is the producer's.
  bool fused_activation(const ir::Node& consumer) const override {
    return consumer.output(0) && fused_.count(consumer.output(0)->name());
  }

 private:
  std::string slot(const ir::Value* v) const {
    if (!v || !plan_.find(v->name())) return "";
    return plan_.provider(v->name()).name;
  }
  const Plan& plan_;
  std::set<std::string> fused_;  // outputs of fused activations
};

const ir::Tensor& float_values(const ir::Model& model, const std::string& name) {
  const ir::Value* v = model.graph->find_value(name);
  if (!v || !v->has_initializer())
    throw Error("IPU limitation check: '" + name + "' is quantized as a weight but is not an initializer");
  return v->initializer();
}

// A slot's new position, in its provider and every tensor sharing its parameters. The zero point
// stays, as vai_q_onnx's set_pos writes only the scale. A weight or bias is quantized again from
// its float values: vai_q_onnx rewrites only the scale initializer and keeps the stored integers,
// which multiplies the dequantized weight by 2^(old - new) (a vai_q_onnx 1.16 bug not copied here).
void set_position(Plan& plan, const ir::Model& model, const std::string& slot, int pos) {
  TensorPlan& t = *plan.find(slot);
  t.pos = pos;
  for (qmath::ScaleZeroPoint& p : t.params) p.scale = qmath::pos_to_scale(pos);
  if (t.role != Role::Activation) {
    QuantizeOptions o = weight_options_of(Tool::vai, ScaleKind::power_of_two).quantize;
    t.data = quantize_tensor(float_values(model, t.name), t.type, t.params, t.axis, o);
  }
  for (TensorPlan& s : plan.tensors)
    if (!s.shared_from.empty() && plan.provider(s.name).name == slot) {
      s.params = t.params;
      s.pos = t.pos;
    }
}

// int32 biases (s_in * s_w) whose input or weight moved are computed again.
void requantize_int32_biases(Plan& plan, const ir::Model& model, const std::set<std::string>& moved) {
  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Bias) continue;
    const TensorPlan& in = plan.provider(t.bias_input);
    const TensorPlan& w = plan.provider(t.bias_weight);
    if (!moved.count(in.name) && !moved.count(w.name)) continue;
    BiasOptions o = bias_options_of(Tool::vai);
    o.beta = t.bias_beta;
    QuantizedBias b = quantize_bias(float_values(model, t.name), in.params.at(0).scale, w.params, o);
    t.params.clear();
    for (double s : b.scales) t.params.push_back({s, 0});
    t.data = std::move(b.data);
    t.bias_clipped = b.clipped;
  }
}

std::vector<IpuRule> enabled_rules(const QuantConfig& config) {
  const QuantConfig::IpuCheck& c = config.ipu;
  std::vector<IpuRule> rules;
  for (IpuRule rule : kIpuRules) {
    bool on = false;
    switch (rule) {
      case IpuRule::AdjustShiftRead:
        on = c.adjust_shift_read;
        break;
      case IpuRule::AdjustShiftWrite:
        on = c.adjust_shift_write;
        break;
      case IpuRule::AdjustShiftCut:
        on = c.adjust_shift_cut;
        break;
      case IpuRule::AdjustShiftBias:
        on = c.adjust_shift_bias;
        break;
      case IpuRule::AdjustHardSigmoid:
        on = c.adjust_hard_sigmoid;
        break;
      case IpuRule::AdjustShiftSwish:
        on = c.adjust_shift_swish;
        break;
      case IpuRule::AlignConcat:
        on = config.align_concat.value_or(true);  // on by default for power-of-two scales (vai_q_onnx's AlignConcat)
        break;
      case IpuRule::AlignPool:
        on = config.align_pool.value_or(true);
        break;
      default:
        break;
    }
    if (on) rules.push_back(rule);
  }
  // Quark's, when set (its power-of-two default; vai_q_onnx has none, and the default is vai's).
  if (config.align_pad.value_or(false)) rules.push_back(IpuRule::AlignPad);
  if (config.align_slice.value_or(false)) rules.push_back(IpuRule::AlignSlice);
  return rules;
}

}  // namespace

std::vector<IpuAdjustment> apply_ipu_limitations(Plan& plan, const ir::Model& model, const QuantConfig& config) {
  if (!config.power_of_two())
    throw Error("IPULimitationCheck constrains power-of-two positions: calibrate_method " +
                std::string(calib::method_name(config.calibrate_method)) + " gives float scales");
  const std::vector<IpuRule> rules = enabled_rules(config);
  const IpuAnnotation annotation{config.remove_qdq_conv_relu,       config.remove_qdq_conv_clip,
                                 config.remove_qdq_conv_leaky_relu, config.remove_qdq_conv_prelu,
                                 config.remove_qdq_conv_gelu,       config.remove_qdq_instance_norm};
  PlanPositions view(plan);
  std::vector<IpuAdjustment> changes;
  std::set<std::string> moved;
  // vai_q_onnx sweeps exactly twice (its change flag is never cleared); a sweep that changes
  // nothing would change nothing again, so stopping there gives the same positions.
  for (int sweep = 0; sweep < config.ipu.max_loops; ++sweep) {
    size_t before = changes.size();
    for (IpuRule rule : rules)
      for (const auto& node : model.graph->nodes()) {
        std::optional<IpuRuleCheck> check = ipu_check_node(rule, *node, view, annotation);
        if (!check) continue;
        for (const IpuPositionChange& c : check->changes) {
          if (view.pos(c.slot) == c.to) continue;
          set_position(plan, model, c.slot, c.to);
          moved.insert(c.slot);
          changes.push_back({ipu_rule_name(rule), node->name, c.slot, c.from, c.to});
        }
      }
    if (changes.size() == before) break;
  }
  requantize_int32_biases(plan, model, moved);
  return changes;
}

std::vector<std::string> ipu_limitation_log(const std::vector<IpuAdjustment>& changes, const QuantConfig& config) {
  std::map<std::string, size_t> counts;
  for (const IpuAdjustment& a : changes) ++counts[a.rule];
  std::vector<std::string> lines;
  for (IpuRule rule : enabled_rules(config)) {
    size_t n = counts[ipu_rule_name(rule)];
    lines.push_back(std::string("IPULimitationCheck ") + ipu_rule_name(rule) + ": " + std::to_string(n) +
                    (n == 1 ? " position changed" : " positions changed"));
  }
  return lines;
}

void check_ipu_config(const QuantConfig& config) {
  const QuantConfig::IpuCheck defaults{};
  const QuantConfig::IpuCheck& c = config.ipu;
  bool changed =
      c.enabled != defaults.enabled || c.adjust_shift_cut != defaults.adjust_shift_cut ||
      c.adjust_shift_bias != defaults.adjust_shift_bias || c.adjust_shift_read != defaults.adjust_shift_read ||
      c.adjust_shift_write != defaults.adjust_shift_write || c.adjust_hard_sigmoid != defaults.adjust_hard_sigmoid ||
      c.adjust_shift_swish != defaults.adjust_shift_swish || c.max_loops != defaults.max_loops;
  if (c.max_loops < 0) throw Error("MaxLoopNum: " + std::to_string(c.max_loops) + " sweeps; expected 0 or more");
  // Quark aligns Transpose and Reshape for float scales only (its align_quantize_info): no position rule.
  if (config.enable_dpu && config.power_of_two())
    for (auto [key, value] :
         {std::pair{"AlignTranspose", config.align_transpose}, std::pair{"AlignReshape", config.align_reshape}})
      if (value.value_or(false))
        throw Error(std::string(key) +
                    " true with enable_dpu: the IPU limitation check aligns power-of-two positions around Concat, "
                    "the pools, Pad and Slice only (vai_q_onnx's IPULimitationCheck, Quark's adjust_quantize_info)");
  if (changed && !(config.enable_dpu && config.power_of_two()))
    throw Error(
        "IPULimitationCheck, AdjustShift*/AdjustHardSigmoid and MaxLoopNum set the NPU limitation check, which runs "
        "only with enable_dpu and a power-of-two calibrate_method (NonOverflow or MinMSE)");
}

}  // namespace onnxptq::quant
