#include "quant/tensor_quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "ir/float16.h"
#include "onnxptq/error.h"
#include "qmath/quantize.h"
#include "quant/tensor_quant_detail.h"

namespace onnxptq::quant {

using ir::DataType;

namespace detail {

std::string type_name(DataType t) { return std::string(ir::data_type_name(t)); }

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string tensor_text(const ir::Tensor& t, const char* what) {
  return std::string(what) + (t.name.empty() ? "" : " '" + t.name + "'");
}

void throw_not_quant_type(DataType t) {
  throw Error("no quantization to " + type_name(t) +
              ": quant types are int4, uint4, int8, uint8, int16, uint16, int32, uint32, float16, bfloat16");
}

double round_to(DataType t, double v) {
  switch (t) {
    case DataType::Float: return static_cast<float>(v);
    case DataType::Float16: return ir::half_to_float(ir::float_to_half(static_cast<float>(v)));
    case DataType::BFloat16: return ir::bfloat16_to_float(ir::float_to_bfloat16(static_cast<float>(v)));
    default: throw Error("scales are float or float16, not " + type_name(t));
  }
}

qmath::QRange saturation_range(DataType type, Saturation s) {
  return s == Saturation::symmetric ? qmath::clip_range(type) : qmath::quant_range(type, false, false);
}

FloatValues float_values(const ir::Tensor& x, const char* what) {
  FloatValues f;
  switch (x.dtype()) {
    case DataType::Float: f.values = x.values<float>(); return f;
    case DataType::Float16:
    case DataType::BFloat16: {
      auto h = x.values<uint16_t>();
      f.own.resize(h.size());
      if (x.dtype() == DataType::Float16)
        ir::half_to_float(h.data(), f.own.data(), h.size());
      else
        ir::bfloat16_to_float(h.data(), f.own.data(), h.size());
      f.values = f.own;
      return f;
    }
    default:
      throw Error(tensor_text(x, what) + " is " + type_name(x.dtype()) + ": expected float, float16 or bfloat16");
  }
}

Layout layout_of(const ir::Tensor& x, std::optional<int64_t> axis, const char* what) {
  Layout l;
  if (!axis) {
    l.inner = x.size();
    return l;
  }
  auto rank = static_cast<int64_t>(x.rank());
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank)
    throw Error("axis " + std::to_string(*axis) + " is out of range for " + tensor_text(x, what) + " of rank " +
                std::to_string(rank) + " (shape " + ir::dims_to_string(x.dims()) + ")");
  for (int64_t i = 0; i < a; ++i) l.outer *= x.dims()[i];
  l.channels = x.dims()[a];
  for (int64_t i = a + 1; i < rank; ++i) l.inner *= x.dims()[i];
  l.axis = a;
  return l;
}

}  // namespace detail

namespace {

using namespace detail;

std::string range_text(double lo, double hi) { return "[" + number_text(lo) + ", " + number_text(hi) + "]"; }

int64_t rne(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// numpy's finfo(t).tiny.
double smallest_normal(DataType t) { return t == DataType::Float16 ? std::ldexp(1.0, -14) : FLT_MIN; }

// [rmin, rmax] widened to hold 0, infinities handled, rounded to the scale type, the minimum real
// range applied and symmetrised (compute_scale_zp of ORT and Quark, vai's compute_scale_zp_pof2s).
std::pair<double, double> prepare_range(double rmin, double rmax, const ScaleOptions& o) {
  if (std::isnan(rmin) || std::isnan(rmax)) throw Error("the range " + range_text(rmin, rmax) + " has a NaN bound");
  rmin = std::min(rmin, 0.0);
  rmax = std::max(rmax, 0.0);
  if (o.infinite_range == InfiniteRange::clamp_float_max_half) {
    const double half = static_cast<double>(FLT_MAX) / 2;
    rmin = std::max(rmin, -half);
    rmax = std::min(rmax, half);
  } else if (std::isinf(rmin) || std::isinf(rmax)) {
    throw Error("the range " + range_text(rmin, rmax) + " is infinite: no finite scale represents it");
  }
  double lo = round_to(o.scale_type, rmin), hi = round_to(o.scale_type, rmax);
  if (std::isinf(lo) || std::isinf(hi))
    throw Error("the range " + range_text(rmin, rmax) + " does not fit " + type_name(o.scale_type));
  if (o.min_real_range > 0) hi = std::max(hi, round_to(o.scale_type, lo + o.min_real_range));
  if (o.symmetric) {
    double m = std::max(-lo, hi);
    lo = -m;
    hi = m;
  }
  return {lo, hi};
}

// compute_scale_zp_fp of vai_q_onnx and Quark (quant_utils.py).
qmath::ScaleZeroPoint float_target_scale_zp(double rmin, double rmax, DataType type, const ScaleOptions& o) {
  auto [lo, hi] = prepare_range(rmin, rmax, o);
  FloatRange r = float_quant_range(type, o.float_scaled);
  double scale = 1;
  if (o.float_scaled) {
    scale = (hi - lo) / (r.max - r.min);
    if (!(scale >= smallest_normal(o.scale_type))) return {1.0, 0, 0.0};
    scale = round_to(o.scale_type, scale);
  }
  double zp = 0;
  if (!o.symmetric)
    zp = o.float_zero_point_rule == FloatZeroPoint::vai_midpoint ? -((lo + hi) / 2) / scale
                                                                 : std::nearbyint(r.min - lo / scale);
  return {scale, 0, round_to(type, zp)};
}

// Integer quantization of one slice: the engine's kernels up to 16 bits (bit-exact with ORT's
// QuantizeLinear); 32-bit types the same arithmetic with a 64-bit zero point (uint32 zero points
// exceed int32).
template <class T>
void quantize_integer(const float* x, size_t n, const qmath::ScaleZeroPoint& p, qmath::QRange r, T* y) {
  const auto s = static_cast<float>(p.scale);
  if constexpr (sizeof(T) <= 2) {
    qmath::quantize_values<T>(x, static_cast<int64_t>(n), s, static_cast<int32_t>(p.zero_point), y,
                              {static_cast<int32_t>(r.min), static_cast<int32_t>(r.max)});
  } else {
    const int64_t zp = p.zero_point;
    const double lo = static_cast<double>(r.min - zp), hi = static_cast<double>(r.max - zp);
    for (size_t i = 0; i < n; ++i) {
      double v = x[i] / s;  // float32 division
      v = v > lo ? v : lo;  // NaN -> lo
      v = v < hi ? v : hi;
      y[i] = static_cast<T>(rne(v) + zp);
    }
  }
}

template <class T>
void dequantize_integer(const T* q, size_t n, const qmath::ScaleZeroPoint& p, float* y) {
  const auto s = static_cast<float>(p.scale);
  if constexpr (sizeof(T) <= 2) {
    qmath::dequantize_values<T>(q, static_cast<int64_t>(n), s, static_cast<int32_t>(p.zero_point), y);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int64_t>(q[i]) - p.zero_point) * s;
  }
}

uint16_t quantize_float(float x, DataType type, const qmath::ScaleZeroPoint& p, const QuantizeOptions& o) {
  const auto s = static_cast<float>(p.scale), z = static_cast<float>(p.float_zero_point);
  if (type == DataType::BFloat16) return ir::float_to_bfloat16(o.bfloat16_cast_form && z == 0 ? x / s : x / s + z);
  switch (o.float_cast) {
    case FloatCast::quantizer: return ir::float_to_half(x / s + z);
    case FloatCast::vitis_op: return ir::float_to_half(std::isnan(x) ? x : std::clamp(x, -65504.f, 65504.f));
    case FloatCast::quark_op: return ir::float_to_half(x / s);
  }
  return 0;
}

float dequantize_float(uint16_t q, DataType type, const qmath::ScaleZeroPoint& p, FloatCast c) {
  const auto s = static_cast<float>(p.scale), z = static_cast<float>(p.float_zero_point);
  if (type == DataType::BFloat16) return (ir::bfloat16_to_float(q) - z) * s;
  switch (c) {
    case FloatCast::quantizer: return (ir::half_to_float(q) - z) * s;
    case FloatCast::vitis_op: return ir::half_to_float(q);
    case FloatCast::quark_op: return ir::half_to_float(q) * s;
  }
  return 0;
}

Layout layout_checked(const ir::Tensor& x, DataType type, std::span<const qmath::ScaleZeroPoint> params,
                      std::optional<int64_t> axis, const char* what) {
  Layout l = layout_of(x, axis, what);
  if (static_cast<int64_t>(params.size()) != l.channels)
    throw Error(std::to_string(params.size()) + " scales for " + tensor_text(x, what) + " of shape " +
                ir::dims_to_string(x.dims()) + ": expected " + std::to_string(l.channels) +
                (l.axis ? " (dim " + std::to_string(*l.axis) + ")" : " (per tensor)"));
  const bool integer = quant_type_is_integer(type);
  qmath::QRange full = integer ? qmath::quant_range(type, false, false) : qmath::QRange{};
  for (size_t c = 0; c < params.size(); ++c) {
    const qmath::ScaleZeroPoint& p = params[c];
    std::string where = params.size() > 1 ? " of channel " + std::to_string(c) : "";
    if (!(p.scale > 0) || !std::isfinite(p.scale) || !std::isfinite(static_cast<float>(p.scale)))
      throw Error("scale " + number_text(p.scale) + where + " of " + tensor_text(x, what) +
                  " must be positive and finite");
    if (integer && (p.zero_point < full.min || p.zero_point > full.max))
      throw Error("zero point " + std::to_string(p.zero_point) + where + " of " + tensor_text(x, what) +
                  " is outside " + type_name(type) + " " + range_text(full.min, full.max));
  }
  return l;
}

// fn(offset, count, channel) for each contiguous run of one channel.
template <class F>
void for_each_run(const Layout& l, F&& fn) {
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c)
      fn(static_cast<size_t>((o * l.channels + c) * l.inner), static_cast<size_t>(l.inner), static_cast<size_t>(c));
}

}  // namespace

bool quant_type_is_integer(DataType t) {
  return qmath::is_4bit_type(t) || t == DataType::Int8 || t == DataType::UInt8 || t == DataType::Int16 ||
         t == DataType::UInt16 || t == DataType::Int32 || t == DataType::UInt32;
}

bool quant_type_is_float(DataType t) { return t == DataType::Float16 || t == DataType::BFloat16; }

bool quant_type_is_block(DataType t) { return t == kQBfp || t == kQMx; }

FloatRange float_quant_range(DataType type, bool scaled) {
  if (type == DataType::Float16) return {-65504.0, 65504.0};
  if (type == DataType::BFloat16) {
    const double m = kBfloat16Max;
    return scaled ? FloatRange{-2.0, 2.0} : FloatRange{-m, m};
  }
  throw Error("no float quantization range for " + type_name(type) + ": float quant types are float16, bfloat16");
}

ScaleOptions scale_options_of(Tool tool, ScaleKind kind) {
  ScaleOptions o;
  o.kind = kind;
  switch (tool) {
    case Tool::ort:
      o.table = qmath::RangeTable::ort;
      o.symmetric_zero_point = SymmetricZeroPoint::midpoint;
      break;
    case Tool::vai:
      o.uint8_symmetric_zp_128 = kind == ScaleKind::power_of_two;
      o.float_zero_point_rule = FloatZeroPoint::vai_midpoint;
      break;
    case Tool::quark:
      o.uint8_symmetric_zp_128 = true;
      o.infinite_range = InfiniteRange::clamp_float_max_half;
      o.float_zero_point_rule = FloatZeroPoint::quark_offset;
      break;
  }
  return o;
}

qmath::ScaleZeroPoint compute_scale_zp(double rmin, double rmax, DataType type, const ScaleOptions& o) {
  if (quant_type_is_float(type)) return float_target_scale_zp(rmin, rmax, type, o);
  if (!quant_type_is_integer(type)) throw_not_quant_type(type);
  return compute_scale_zp(rmin, rmax, qmath::quant_range(type, o.symmetric, o.reduce_range, o.table), type, o);
}

qmath::ScaleZeroPoint compute_scale_zp(double rmin, double rmax, qmath::QRange q, DataType type,
                                       const ScaleOptions& o) {
  if (quant_type_is_float(type)) return float_target_scale_zp(rmin, rmax, type, o);
  if (!quant_type_is_integer(type)) throw_not_quant_type(type);
  if (q.min > 0 || q.max < 0 || q.min >= q.max)
    throw Error("the integer range " + range_text(q.min, q.max) + " must hold 0 and more than one value");
  if (o.scale_type != DataType::Float && o.scale_type != DataType::Float16)
    throw Error("scales are float or float16, not " + type_name(o.scale_type));
  auto [lo, hi] = prepare_range(rmin, rmax, o);
  // The width in the scale type: the seeds subtract float32 (ORT: float16) ranges.
  double width = round_to(o.scale_type, hi - lo);
  double scale = width / static_cast<double>(q.max - q.min);
  if (!std::isfinite(scale) || !std::isfinite(round_to(o.scale_type, scale)))
    throw Error("the range " + range_text(rmin, rmax) + " is too wide for a " + type_name(o.scale_type) + " scale");
  if (!(scale >= smallest_normal(o.scale_type))) return {1.0, 0};
  const bool bump = o.symmetric && type == DataType::UInt8 && o.uint8_symmetric_zp_128;
  int64_t zp = o.symmetric && o.symmetric_zero_point == SymmetricZeroPoint::midpoint
                   ? rne(static_cast<double>(q.min + q.max) / 2)
                   : rne(static_cast<double>(q.min) - lo / scale);
  if (o.kind == ScaleKind::float_scale) return {round_to(o.scale_type, scale), bump && zp == 127 ? 128 : zp};
  // The zero point recomputed for the snapped scale s (== zp whenever zp >= qmin).
  auto zp_for = [&](double s) {
    double new_rmin = std::min(static_cast<double>(q.min - zp) * s, 0.0);
    int64_t z = rne(static_cast<double>(q.min) - new_rmin / s);
    return bump && z == 127 ? int64_t{128} : z;
  };
  if (o.kind == ScaleKind::int16_scale) {
    double s = int16_scale_value(scale);
    return {s, zp_for(s)};
  }
  int pos = qmath::scale_to_pos(scale);
  if (o.pof2_position == Pof2Position::non_overflow) {
    auto holds = [&](int p) {
      double s = qmath::pos_to_scale(p);
      int64_t z = zp_for(s);
      return static_cast<double>(q.max - z) * s >= hi && static_cast<double>(q.min - z) * s <= lo;
    };
    // The nearest position is at most one step too fine (a zero point off by one may need one more).
    for (int tries = 0; tries < 4 && !holds(pos); ++tries) --pos;
    if (!holds(pos)) throw Error("no power-of-two scale holds the range " + range_text(rmin, rmax));
  }
  return {qmath::pos_to_scale(pos), zp_for(qmath::pos_to_scale(pos))};
}

Int16Scale int16_scale_find(double scale) {
  Int16Scale best;
  if (scale == 0) return best;
  double best_diff = std::numeric_limits<double>::infinity();
  for (int n = 0; n <= 16; ++n) {
    double m = std::ldexp(scale, n);
    if (m < -32768.0 || m > 32767.0) continue;
    for (double c : {std::floor(m), std::ceil(m)}) {
      double diff = std::fabs(std::ldexp(c, -n) - scale);
      if (diff < best_diff) {
        best = {static_cast<int64_t>(c), n};
        best_diff = diff;
      }
    }
  }
  return best;
}

double int16_scale_value(double scale) {
  Int16Scale f = int16_scale_find(scale);
  double v = std::ldexp(static_cast<double>(f.m), -f.n);
  return v < FLT_MIN ? std::ldexp(1.0, -14) : v;
}

void fake_quantize_values(const float* x, size_t n, DataType type, const qmath::ScaleZeroPoint& p,
                          const QuantizeOptions& o, float* y) {
  if (!(p.scale > 0) || !std::isfinite(static_cast<float>(p.scale)))
    throw Error("scale " + number_text(p.scale) + " must be positive and finite");
  if (quant_type_is_float(type)) {
    for (size_t i = 0; i < n; ++i) y[i] = dequantize_float(quantize_float(x[i], type, p, o), type, p, o.float_cast);
    return;
  }
  const qmath::QRange r = saturation_range(type, o.saturation);
  const DataType held = qmath::is_4bit_type(type) ? qmath::holder_of_4bit(type) : type;
  qmath::visit_integer_quant_type(held, "the quant type", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) <= 2) {
      qmath::fake_quantize_values<T>(x, static_cast<int64_t>(n), static_cast<float>(p.scale),
                                     static_cast<int32_t>(p.zero_point), y,
                                     {static_cast<int32_t>(r.min), static_cast<int32_t>(r.max)});
    } else {
      constexpr size_t kChunk = 512;
      T q[kChunk];
      for (size_t i = 0; i < n; i += kChunk) {
        size_t m = std::min(kChunk, n - i);
        quantize_integer<T>(x + i, m, p, r, q);
        dequantize_integer<T>(q, m, p, y + i);
      }
    }
  });
}

ir::Tensor quantize_tensor(const ir::Tensor& x, DataType type, std::span<const qmath::ScaleZeroPoint> params,
                           std::optional<int64_t> axis, const QuantizeOptions& o) {
  if (!quant_type_is_integer(type) && !quant_type_is_float(type)) throw_not_quant_type(type);
  FloatValues xs = float_values(x, "tensor");
  Layout l = layout_checked(x, type, params, axis, "tensor");
  ir::Tensor out = ir::Tensor::uninitialized(type, x.dims());
  if (quant_type_is_float(type)) {
    auto y = out.mutable_values<uint16_t>();
    for_each_run(l, [&](size_t at, size_t n, size_t c) {
      for (size_t i = at; i < at + n; ++i) y[i] = quantize_float(xs.values[i], type, params[c], o);
    });
    return out;
  }
  const qmath::QRange r = saturation_range(type, o.saturation);
  if (qmath::is_4bit_type(type)) {  // one value a byte, then packed as ONNX stores int4 / uint4
    std::vector<int8_t> held(static_cast<size_t>(x.size()));
    for_each_run(l, [&](size_t at, size_t n, size_t c) {
      if (type == DataType::Int4)
        quantize_integer<int8_t>(&xs.values[at], n, params[c], r, &held[at]);
      else
        quantize_integer<uint8_t>(&xs.values[at], n, params[c], r, reinterpret_cast<uint8_t*>(&held[at]));
    });
    qmath::pack_4bit(held.data(), x.size(), out.mutable_bytes());
    return out;
  }
  qmath::visit_integer_quant_type(type, "the quant type", [&](auto tag) {
    using T = decltype(tag);
    auto y = out.mutable_values<T>();
    for_each_run(l,
                 [&](size_t at, size_t n, size_t c) { quantize_integer<T>(&xs.values[at], n, params[c], r, &y[at]); });
  });
  return out;
}

ir::Tensor dequantize_tensor(const ir::Tensor& q, std::span<const qmath::ScaleZeroPoint> params,
                             std::optional<int64_t> axis, const QuantizeOptions& o) {
  const DataType type = q.dtype();
  if (!quant_type_is_integer(type) && !quant_type_is_float(type)) throw_not_quant_type(type);
  Layout l = layout_checked(q, type, params, axis, "quantized tensor");
  ir::Tensor out = ir::Tensor::uninitialized(DataType::Float, q.dims());
  auto y = out.mutable_values<float>();
  if (quant_type_is_float(type)) {
    auto v = q.values<uint16_t>();
    for_each_run(l, [&](size_t at, size_t n, size_t c) {
      for (size_t i = at; i < at + n; ++i) y[i] = dequantize_float(v[i], type, params[c], o.float_cast);
    });
    return out;
  }
  if (qmath::is_4bit_type(type)) {
    std::vector<int8_t> held(static_cast<size_t>(q.size()));
    qmath::unpack_4bit(q.bytes().data(), q.size(), type == DataType::Int4, held.data());
    for_each_run(l, [&](size_t at, size_t n, size_t c) {
      if (type == DataType::Int4)
        dequantize_integer<int8_t>(&held[at], n, params[c], &y[at]);
      else
        dequantize_integer<uint8_t>(reinterpret_cast<const uint8_t*>(&held[at]), n, params[c], &y[at]);
    });
    return out;
  }
  qmath::visit_integer_quant_type(type, "the quant type", [&](auto tag) {
    using T = decltype(tag);
    auto v = q.values<T>();
    for_each_run(l, [&](size_t at, size_t n, size_t c) { dequantize_integer<T>(&v[at], n, params[c], &y[at]); });
  });
  return out;
}

ir::Tensor fake_quantize_tensor(const ir::Tensor& x, DataType type, std::span<const qmath::ScaleZeroPoint> params,
                                std::optional<int64_t> axis, const QuantizeOptions& o) {
  if (!quant_type_is_integer(type) && !quant_type_is_float(type)) throw_not_quant_type(type);
  FloatValues xs = float_values(x, "tensor");
  Layout l = layout_checked(x, type, params, axis, "tensor");
  ir::Tensor out = ir::Tensor::uninitialized(DataType::Float, x.dims());
  auto y = out.mutable_values<float>();
  for_each_run(
      l, [&](size_t at, size_t n, size_t c) { fake_quantize_values(&xs.values[at], n, type, params[c], o, &y[at]); });
  return out;
}

}  // namespace onnxptq::quant
