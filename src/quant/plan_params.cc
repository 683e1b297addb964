// Parameters of a plan: activations from calibrated ranges (ORT's rules for float scales,
// vai_q_onnx's for power-of-two ones), weights from their values, int32 biases from their
// input and weight scales (after ORT's guard on the weight scale), shared tensors last.
#include <algorithm>
#include <cmath>

#include "onnxptq/error.h"
#include "quant/plan.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"
#include "quant/tensor_quant_detail.h"

namespace onnxptq::quant {

namespace {

const ir::Tensor& initializer_of(const ir::Model& model, const std::string& name) {
  const ir::Value* v = model.graph->find_value_nested(name);
  if (!v || !v->has_initializer()) throw Error("quantization plan: '" + name + "' is not an initializer of the model");
  return v->initializer();
}

// A power-of-two activation: the scale calibration chose (its range is exactly what 2^-pos and
// the zero point represent), or, for a Relu-like output under UseUnsignedReLU, the range from 0.
qmath::ScaleZeroPoint pof2_activation(const TensorPlan& t, const calib::TensorRange& r, const QuantConfig& config) {
  if (t.relu_like && config.use_unsigned_relu && t.symmetric) {
    ScaleOptions o = scale_options_of(Tool::vai, ScaleKind::power_of_two);
    o.symmetric = false;
    o.pof2_position = Pof2Position::non_overflow;
    return compute_scale_zp(0.0, r.hi, t.type, o);
  }
  if (!r.pos) throw Error("calibrated range of '" + t.name + "' has no power-of-two position");
  double s = qmath::pos_to_scale(*r.pos);
  qmath::QRange full = qmath::quant_range(t.type, false);
  auto zp = static_cast<int64_t>(std::nearbyint(static_cast<double>(full.min) - r.lo / s));
  return {s, std::clamp(zp, full.min, full.max)};
}

// Quark's ActivationScaled / WeightScaled for a float16/bfloat16 target: the range mapped onto the
// type's scaled range with Quark's zero point (its compute_scale_zp_fp). Quark's float16 op ignores
// the zero point, so an asymmetric scaled float16 range would overflow: refused, naming the tensor.
void scale_float_target(ScaleOptions& o, ir::DataType type, bool scaled, const std::string& tensor) {
  if (!scaled || !quant_type_is_float(type)) return;
  if (type == ir::DataType::Float16 && !o.symmetric)
    throw Error("'" + tensor +
                "': a scaled float16 range must be symmetric (Quark's float16 quantize op ignores the zero point)");
  o.float_scaled = true;
  o.float_zero_point_rule = FloatZeroPoint::quark_offset;
}

qmath::ScaleZeroPoint float_activation(const TensorPlan& t, const calib::TensorRange& r, const QuantConfig& config) {
  ScaleOptions o = scale_options_of(scale_tool(config), scale_kind(config));
  o.symmetric = t.symmetric;
  if (ir::data_type_bits(t.type) == 32) o.table = qmath::RangeTable::vai;  // ORT's table stops at 16 bits
  scale_float_target(o, t.type, config.activation_scaled, t.name);
  return compute_scale_zp(r.lo, r.hi, t.type, o);
}

// The power-of-two position that holds [lo, hi] (vai_q_onnx's NonOverflow rule).
int pof2_position(double lo, double hi, ir::DataType type, bool symmetric) {
  ScaleOptions o = scale_options_of(Tool::vai, ScaleKind::power_of_two);
  o.symmetric = symmetric;
  o.pof2_position = Pof2Position::non_overflow;
  return qmath::scale_to_pos(compute_scale_zp(lo, hi, type, o).scale);
}

// The calibrated range of activation `t` (its own or the one it takes). Error naming the tensor
// when calibration gave none.
const calib::TensorRange& calibrated_range(const calib::CalibrationResult& ranges, const TensorPlan& t) {
  const std::string& source = t.range_from.empty() ? t.name : t.range_from;
  auto it = ranges.ranges.find(source);
  if (it == ranges.ranges.end()) {
    bool overflows = std::find(ranges.non_finite.begin(), ranges.non_finite.end(), source) != ranges.non_finite.end();
    throw Error("calibration gave no range for '" + source + "'" +
                (source != t.name ? " (whose range '" + t.name + "' takes)" : "") +
                (overflows ? ": every value of it was NaN or infinite (the float model overflows on this data)"
                           : ": it was never computed as a float tensor"));
  }
  return it->second;
}

// A conversion's parameters: fixed, or from its range (by default the range the tensor's own
// parameters represent, so the second quantization holds every value the first can give).
qmath::ScaleZeroPoint conversion_params(const TensorPlan& t, const TensorPlan::Conversion& c,
                                        const QuantConfig& config) {
  const bool pof2 = config.power_of_two();
  if (c.fixed) return *c.fixed;
  std::pair<double, double> range;
  if (c.range) {
    range = *c.range;
  } else {
    const qmath::ScaleZeroPoint& p = t.params.at(0);
    qmath::QRange q = qmath::quant_range(t.type, t.symmetric);
    range = {static_cast<double>(q.min - p.zero_point) * p.scale, static_cast<double>(q.max - p.zero_point) * p.scale};
  }
  ScaleOptions o = scale_options_of(scale_tool(config), scale_kind(config));
  o.symmetric = c.symmetric;
  if (pof2) o.pof2_position = Pof2Position::non_overflow;
  scale_float_target(o, c.type, config.activation_scaled, t.name + " (its conversion)");
  return compute_scale_zp(range.first, range.second, c.type, o);
}

// MinMSEModeFloatScale, whose values the key checked.
FloatMinMseMode float_min_mse_mode(const QuantConfig& config) {
  const std::string mode = config.weight_min_mse_mode.value_or("Percentile");
  if (mode == "HistCenter") return FloatMinMseMode::hist_center;
  if (mode == "All") return FloatMinMseMode::all;
  return FloatMinMseMode::percentile;
}

// Whose rules weights follow: Quark's float-scale MinMSE searches with Quark's scales and its
// symmetric saturation (quantize_data, compute_minmse, quantize_nparray); else those of the scales.
Tool weight_tool(const QuantConfig& config) { return config.weight_min_mse ? Tool::quark : scale_tool(config); }

}  // namespace

void assign_parameters(Plan& plan, const ir::Model& model, const QuantConfig& config,
                       const calib::CalibrationResult& ranges) {
  const bool pof2 = config.power_of_two();
  const Tool tool = scale_tool(config);
  const ScaleKind kind = scale_kind(config);

  for (TensorPlan& t : plan.tensors) {
    // Block formats have no parameters: their node shares an exponent per block.
    if (t.role != Role::Activation || !t.shared_from.empty() || quant_type_is_block(t.type)) continue;
    if (!t.fixed.empty()) {
      t.params = t.fixed;
      continue;
    }
    if (t.range) {  // TensorQuantOverrides' rmin and rmax
      calib::TensorRange r;
      r.lo = t.range->first;
      r.hi = t.range->second;
      if (pof2) r.pos = pof2_position(r.lo, r.hi, t.type, t.symmetric);
      t.params = {pof2 ? pof2_activation(t, r, config) : float_activation(t, r, config)};
      if (pof2) t.pos = qmath::scale_to_pos(t.params[0].scale);
      continue;
    }
    const calib::TensorRange& r = calibrated_range(ranges, t);
    if (pof2) {
      t.params = {pof2_activation(t, r, config)};
      t.pos = qmath::scale_to_pos(t.params[0].scale);
    } else {
      t.params = {float_activation(t, r, config)};
    }
  }

  auto weight_options = [&](const TensorPlan& t) {
    WeightOptions o = weight_options_of(weight_tool(config), kind);
    if (config.weight_min_mse) {
      o.method = WeightMethod::float_min_mse;
      o.min_mse_mode = float_min_mse_mode(config);
    }
    o.scale.symmetric = t.symmetric;
    if (ir::data_type_bits(t.type) == 32) o.scale.table = qmath::RangeTable::vai;  // ORT's table stops at 16 bits
    o.scale.reduce_range = t.reduce_range.value_or(config.reduce_range);
    o.axis = t.axis;
    // vai's MinMSE weights search power-of-two positions even with UsePowerOf2Scale false.
    if (tool == Tool::vai && config.calibration_method() == calib::Method::MinMSE) {
      o.method = WeightMethod::pof2_min_mse;
      o.scale.kind = ScaleKind::power_of_two;
    }
    if (pof2 && config.calibrate_method == calib::Method::NonOverflow)
      o.scale.pof2_position = Pof2Position::non_overflow;
    scale_float_target(o.scale, t.type, config.weight_scaled, t.name);
    // float16/bfloat16 values as the format's ops compute them (Quark's float16 op ignores the zero point).
    o.quantize.float_cast = quantize_options_of(config).float_cast;
    return o;
  };
  for (TensorPlan& t : plan.tensors)
    if (t.role == Role::Weight && !quant_type_is_block(t.type))
      t.params = t.fixed.empty() ? weight_params(initializer_of(model, t.name), t.type, weight_options(t)) : t.fixed;

  // ORT's guard raises a weight scale whose bias would overflow int32, before weights are quantized.
  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Bias || tool == Tool::vai) continue;
    TensorPlan* w = plan.find(t.bias_weight);
    const TensorPlan& in = plan.provider(t.bias_input);
    if (!w || w->role != Role::Weight || in.params.empty()) continue;
    WeightScaleAdjustment a =
        adjust_weight_scale_for_int32_bias(initializer_of(model, t.name), in.params[0].scale, w->params, w->type);
    if (!a.adjusted || !w->fixed.empty()) continue;  // fixed parameters stay as given
    for (size_t i = 0; i < a.weight_scales.size(); ++i) w->params[i].scale = a.weight_scales[i];
  }
  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Weight || quant_type_is_block(t.type)) continue;
    t.data = quantize_tensor(initializer_of(model, t.name), t.type, t.params, t.axis, weight_options(t).quantize);
    if (pof2 && t.params.size() == 1) t.pos = qmath::scale_to_pos(t.params[0].scale);
  }

  for (TensorPlan& t : plan.tensors) {
    if (t.role != Role::Bias) continue;
    const TensorPlan& in = plan.provider(t.bias_input);
    const TensorPlan& w = plan.provider(t.bias_weight);
    BiasOptions o = bias_options_of(tool);
    o.beta = t.bias_beta;
    QuantizedBias b = quantize_bias(initializer_of(model, t.name), in.params.at(0).scale, w.params, o);
    t.params.clear();
    for (double s : b.scales) t.params.push_back({s, 0});
    if (b.scales.size() > 1) t.axis = 0;
    t.data = std::move(b.data);
    t.bias_clipped = b.clipped;
    if (b.clipped) plan.warnings.push_back("bias '" + t.name + "' has values beyond int32: clipped");
  }

  for (TensorPlan& t : plan.tensors) {
    if (t.shared_from.empty()) continue;
    const TensorPlan& p = plan.provider(t.name);
    t.params = p.params;
    t.pos = p.pos;
  }
  for (TensorPlan& t : plan.tensors) {
    if (!t.convert || quant_type_is_block(t.convert->type)) continue;
    TensorPlan::Conversion c = *t.convert;
    if (quant_type_is_block(t.type) && !c.fixed && !c.range) {  // a block tensor's copy: its calibrated range
      const calib::TensorRange& r = calibrated_range(ranges, t);
      c.range = std::pair{r.lo, r.hi};
    }
    t.convert->params = conversion_params(t, c, config);
  }
}

qmath::QRange weight_saturation(const TensorPlan& t, const QuantConfig& config) {
  return detail::saturation_range(t.type,
                                  weight_options_of(weight_tool(config), ScaleKind::float_scale).quantize.saturation);
}

Tool scale_tool(const QuantConfig& config) {
  return calib::is_power_of_two(config.calibration_method()) || config.int16_scale ? Tool::vai : Tool::ort;
}

ScaleKind scale_kind(const QuantConfig& config) {
  if (config.power_of_two()) return ScaleKind::power_of_two;
  return config.int16_scale ? ScaleKind::int16_scale : ScaleKind::float_scale;
}

}  // namespace onnxptq::quant
