// Weights (MinMax, power-of-two MinMSE, Quark's float-scale MinMSE) and int32 biases: the second
// half of tensor_quant.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "onnxptq/error.h"
#include "quant/tensor_quant.h"
#include "quant/tensor_quant_detail.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;
using namespace detail;

// The values of channel c, gathered.
std::vector<float> channel_values(std::span<const float> x, const Layout& l, int64_t c) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(l.outer * l.inner));
  for (int64_t o = 0; o < l.outer; ++o) {
    auto start = x.begin() + (o * l.channels + c) * l.inner;
    out.insert(out.end(), start, start + l.inner);
  }
  return out;
}

void check_no_nan(std::span<const float> x, const char* what, const ir::Tensor& t) {
  for (size_t i = 0; i < x.size(); ++i)
    if (std::isnan(x[i])) throw Error(tensor_text(t, what) + " has a NaN at index " + std::to_string(i));
}

// ---- MinMSE

// numpy's percentile, method "linear", of sorted float32 values: index (n - 1) (q / 100), the
// neighbours' difference in float32 (its _lerp subtracts the array's values).
double percentile_linear(const std::vector<float>& sorted, double q) {
  double h = (static_cast<double>(sorted.size()) - 1) * (q / 100);
  auto i = static_cast<size_t>(std::floor(h));
  double g = h - static_cast<double>(i);
  float a = sorted[i], b = sorted[std::min(i + 1, sorted.size() - 1)];
  double d = b - a;
  return g < 0.5 ? a + d * g : b - d * (1 - g);
}

double mean_squared_error(const float* x, size_t n, DataType type, const qmath::ScaleZeroPoint& p,
                          const QuantizeOptions& qo, const double* weights = nullptr) {
  std::vector<float> y(n);
  fake_quantize_values(x, n, type, p, qo, y.data());
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = static_cast<double>(y[i]) - x[i];
    sum += e * e * (weights ? weights[i] : 1.0);
  }
  return sum / static_cast<double>(n);
}

// np.histogram(x, bins): float32 edges of numpy's linspace, values on an edge in the bin above
// (the last bin closed); the bin centres (float32) and counts.
void histogram_numpy(const std::vector<float>& x, size_t bins, std::vector<float>& centers,
                     std::vector<double>& counts) {
  auto [mn, mx] = std::minmax_element(x.begin(), x.end());
  double lo = *mn, hi = *mx;
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  std::vector<float> edges(bins + 1);
  double step = (hi - lo) / static_cast<double>(bins);
  for (size_t i = 0; i < bins; ++i) edges[i] = static_cast<float>(lo + static_cast<double>(i) * step);
  edges[bins] = static_cast<float>(hi);
  counts.assign(bins, 0);
  const double norm = static_cast<double>(bins) / (hi - lo);
  for (float v : x) {
    auto i = static_cast<int64_t>((v - lo) * norm);
    i = std::clamp<int64_t>(i, 0, static_cast<int64_t>(bins) - 1);
    if (v < edges[i] && i > 0) --i;
    if (i + 1 < static_cast<int64_t>(bins) && v >= edges[i + 1]) ++i;
    counts[static_cast<size_t>(i)] += 1;
  }
  centers.resize(bins);
  for (size_t i = 0; i < bins; ++i) centers[i] = (edges[i] + edges[i + 1]) / 2.0f;
}

// Quark's compute_minmse (quant_utils.py) on one slice: candidate ranges, float scales (no uint8
// 127 -> 128, as for its ExtendedCalibrationMethod), duplicates of a scale skipped, the first
// least mean squared error wins.
qmath::ScaleZeroPoint float_min_mse(const std::vector<float>& x, DataType type, const WeightOptions& o) {
  ScaleOptions so = o.scale;
  so.kind = ScaleKind::float_scale;
  so.uint8_symmetric_zp_128 = false;
  qmath::QRange q = qmath::quant_range(type, so.symmetric, so.reduce_range, so.table);
  qmath::ScaleZeroPoint best;
  double best_mse = std::numeric_limits<double>::infinity();
  std::vector<double> seen;
  auto consider = [&](double lo, double hi, auto&& mse_of) {
    qmath::ScaleZeroPoint p = compute_scale_zp(lo, hi, q, type, so);
    if (std::find(seen.begin(), seen.end(), p.scale) != seen.end()) return;
    seen.push_back(p.scale);
    double mse = mse_of(p);
    if (mse < best_mse) {
      best_mse = mse;
      best = p;
    }
  };
  auto mse_all = [&](const qmath::ScaleZeroPoint& p) {
    return mean_squared_error(x.data(), x.size(), type, p, o.quantize);
  };
  if (o.min_mse_mode == FloatMinMseMode::percentile) {
    std::vector<float> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    for (double pct : {99.9, 99.99, 99.999, 99.9999})
      consider(percentile_linear(sorted, (100 - pct) / 2), percentile_linear(sorted, 100 - (100 - pct) / 2), mse_all);
    return best;
  }
  const size_t bins = std::min<size_t>(2048, x.size());
  std::vector<float> centers;
  std::vector<double> counts;
  histogram_numpy(x, bins, centers, counts);
  auto mse_centers = [&](const qmath::ScaleZeroPoint& p) {
    return mean_squared_error(centers.data(), bins, type, p, o.quantize, counts.data());
  };
  for (auto ci = static_cast<size_t>(0.5 * static_cast<double>(bins)); ci < bins; ++ci) {
    double half = static_cast<double>(bins - ci) / 2;
    auto left = static_cast<size_t>(half), right = static_cast<size_t>(static_cast<double>(bins) - half);
    if (o.min_mse_mode == FloatMinMseMode::hist_center)
      consider(centers[left], centers[right], mse_centers);
    else
      consider(centers[left], centers[right], mse_all);
  }
  return best;
}

// vai_q_onnx's quantize_data_pof2s MinMSE on one slice.
qmath::ScaleZeroPoint pof2_min_mse(const std::vector<float>& x, double rmin, double rmax, DataType type,
                                   const WeightOptions& o) {
  ScaleOptions so = o.scale;
  so.kind = ScaleKind::power_of_two;
  so.pof2_position = Pof2Position::nearest;
  qmath::ScaleZeroPoint p = compute_scale_zp(rmin, rmax, type, so);
  const int p0 = qmath::scale_to_pos(p.scale);
  const qmath::QRange clip = saturation_range(type, o.quantize.saturation);
  int best = qmath::minmse_candidate(p0, 0);
  double best_error = std::numeric_limits<double>::infinity();
  for (int i = 0; i < qmath::kMinMseCandidates; ++i) {
    double e = qmath::quantization_error(x.data(), x.size(), qmath::pos_to_scale(qmath::minmse_candidate(p0, i)),
                                         p.zero_point, clip, qmath::ErrorMetric::Squared);
    if (e < best_error) {
      best_error = e;
      best = qmath::minmse_candidate(p0, i);
    }
  }
  return {qmath::pos_to_scale(best), p.zero_point};
}

qmath::ScaleZeroPoint slice_params(const std::vector<float>& x, DataType type, const WeightOptions& o) {
  if (x.empty()) return {};
  auto [mn, mx] = std::minmax_element(x.begin(), x.end());
  switch (o.method) {
    case WeightMethod::min_max:
      return compute_scale_zp(*mn, *mx, type, o.scale);
    case WeightMethod::pof2_min_mse:
      return pof2_min_mse(x, *mn, *mx, type, o);
    case WeightMethod::float_min_mse:
      return float_min_mse(x, type, o);
  }
  return {};
}

std::vector<double> checked_scales(std::span<const qmath::ScaleZeroPoint> weight, const ir::Tensor& bias, size_t n) {
  if (weight.empty()) throw Error(tensor_text(bias, "bias") + ": no weight scale given");
  if (weight.size() > 1 && weight.size() != n)
    throw Error(tensor_text(bias, "bias") + " has " + std::to_string(n) + " values but the weight has " +
                std::to_string(weight.size()) + " channel scales: per-channel bias needs one value per channel");
  std::vector<double> s;
  for (const qmath::ScaleZeroPoint& p : weight) {
    if (!(p.scale > 0) || !std::isfinite(p.scale))
      throw Error("weight scale " + number_text(p.scale) + " of " + tensor_text(bias, "bias") +
                  " must be positive and finite");
    s.push_back(p.scale);
  }
  return s;
}

}  // namespace

WeightOptions weight_options_of(Tool tool, ScaleKind kind) {
  WeightOptions o;
  o.scale = scale_options_of(tool, kind);
  o.quantize.saturation = tool == Tool::ort ? Saturation::full : Saturation::symmetric;
  return o;
}

std::vector<qmath::ScaleZeroPoint> weight_params(const ir::Tensor& w, DataType type, const WeightOptions& o) {
  if (!quant_type_is_integer(type) && !quant_type_is_float(type)) throw_not_quant_type(type);
  if (o.method != WeightMethod::min_max && !quant_type_is_integer(type))
    throw Error("MinMSE for " + tensor_text(w, "weight") + " needs an integer type, not " + type_name(type));
  FloatValues xs = float_values(w, "weight");
  check_no_nan(xs.values, "weight", w);
  Layout l = layout_of(w, o.axis, "weight");
  std::vector<qmath::ScaleZeroPoint> params;
  try {
    if (!l.axis) {
      params.push_back(slice_params(std::vector<float>(xs.values.begin(), xs.values.end()), type, o));
    } else {
      for (int64_t c = 0; c < l.channels; ++c) params.push_back(slice_params(channel_values(xs.values, l, c), type, o));
    }
  } catch (const Error& e) {
    throw Error(tensor_text(w, "weight") + ": " + e.what(), e.kind());
  }
  return params;
}

QuantizedTensor quantize_weight(const ir::Tensor& w, DataType type, const WeightOptions& o) {
  QuantizedTensor q;
  q.params = weight_params(w, type, o);
  q.data = quantize_tensor(w, type, q.params, o.axis, o.quantize);
  if (o.axis) q.axis = layout_of(w, o.axis, "weight").axis;
  return q;
}

BiasOptions bias_options_of(Tool tool) {
  BiasOptions o;
  if (tool == Tool::vai) {
    o.divide_in_double = false;
    o.clip_to_int32 = false;
  }
  return o;
}

QuantizedBias quantize_bias(const ir::Tensor& bias, double input_scale, std::span<const qmath::ScaleZeroPoint> weight,
                            const BiasOptions& o) {
  FloatValues b = float_values(bias, "bias");
  std::vector<double> ws = checked_scales(weight, bias, b.values.size());
  if (!(input_scale > 0) || !std::isfinite(input_scale))
    throw Error("input scale " + number_text(input_scale) + " of " + tensor_text(bias, "bias") +
                " must be positive and finite");
  for (size_t i = 0; i < b.values.size(); ++i)
    if (!std::isfinite(b.values[i]))
      throw Error(tensor_text(bias, "bias") + " has " + number_text(b.values[i]) + " at index " + std::to_string(i));
  QuantizedBias r;
  const DataType st = o.scale_type;
  for (double s : ws) {
    double sb = round_to(st, round_to(st, round_to(st, input_scale) * round_to(st, s)) * round_to(st, o.beta));
    if (!(sb > 0) || !std::isfinite(sb))
      throw Error("the scale of " + tensor_text(bias, "bias") + " is " + number_text(sb) + " (input " +
                  number_text(input_scale) + " x weight " + number_text(s) + " x beta " + number_text(o.beta) +
                  "): it must be positive and finite");
    r.scales.push_back(sb);
  }
  r.data = ir::Tensor::uninitialized(DataType::Int32, bias.dims());
  auto y = r.data.mutable_values<int32_t>();
  constexpr double kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < b.values.size(); ++i) {
    double sb = r.scales[r.scales.size() == 1 ? 0 : i];
    double q = o.divide_in_double ? std::nearbyint(static_cast<double>(b.values[i]) / sb)
                                  : std::nearbyint(b.values[i] / static_cast<float>(sb));
    if (q < kMin || q > kMax) {
      if (!o.clip_to_int32)
        throw Error(tensor_text(bias, "bias") + " value " + number_text(b.values[i]) + " at index " +
                    std::to_string(i) + " is " + number_text(q) + " times its scale " + number_text(sb) +
                    ", beyond int32: the weight scale is too small");
      q = std::clamp(q, kMin, kMax);
      r.clipped = true;
    }
    y[i] = static_cast<int32_t>(q);
  }
  return r;
}

WeightScaleAdjustment adjust_weight_scale_for_int32_bias(const ir::Tensor& bias, double input_scale,
                                                         std::span<const qmath::ScaleZeroPoint> weight,
                                                         DataType weight_type, DataType scale_type) {
  FloatValues b = float_values(bias, "bias");
  WeightScaleAdjustment r;
  r.weight_scales = checked_scales(weight, bias, b.values.size());
  if (weight_type != DataType::Int8 && weight_type != DataType::Int16) return r;
  for (const qmath::ScaleZeroPoint& p : weight)
    if (p.zero_point != 0) return r;
  for (size_t i = 0; i < b.values.size(); ++i)
    if (std::isnan(b.values[i])) throw Error(tensor_text(bias, "bias") + " has a NaN at index " + std::to_string(i));
  constexpr double kQRange = 2147483647.0 - (-2147483648.0 + 1.0);  // 4294967294
  constexpr double kEpsilon = 1.0001;
  auto raise = [&](size_t c, double a) {
    double smallest = kEpsilon * (2.0 * a) / kQRange;
    double candidate = input_scale * r.weight_scales[c];
    if (candidate < smallest && candidate > 0) {
      r.weight_scales[c] = round_to(scale_type, r.weight_scales[c] * (smallest / candidate));
      r.adjusted = true;
    }
  };
  if (r.weight_scales.size() == 1) {
    double rmin = 0, rmax = 0;
    for (float v : b.values) {
      rmin = std::min<double>(rmin, v);
      rmax = std::max<double>(rmax, v);
    }
    raise(0, std::max(std::fabs(rmin), std::fabs(rmax)));
  } else {
    for (size_t c = 0; c < r.weight_scales.size(); ++c) raise(c, std::fabs(static_cast<double>(b.values[c])));
  }
  return r;
}

}  // namespace onnxptq::quant
