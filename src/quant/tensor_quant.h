// Quantization arithmetic on tensors: the scale and zero point of a range for every quant type,
// quantize / dequantize / fake quantize per tensor or per channel, weights (MinMax, power of two,
// MinMSE) and int32 biases. Where ONNX Runtime, vai_q_onnx and Quark differ, an option selects
// the rule and `*_of(Tool)` gives each tool's choice. Functions named are in each tool's
// quant_utils.py unless said: ONNX Runtime's onnxruntime/python/tools/quantization (ORT),
// vai_q_onnx 1.16 (vai) and Quark for ONNX's quark/onnx/quantization (Quark).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ir/tensor.h"
#include "qmath/params.h"

namespace onnxptq::quant {

enum class Tool { ort, vai, quark };

// int8, uint8, int16, uint16, int32, uint32.
bool quant_type_is_integer(ir::DataType type);
// float16 and bfloat16: a cast, scaled or not (compute_scale_zp_fp of vai and Quark).
bool quant_type_is_float(ir::DataType type);

// Quark's block formats as quant types (its ExtendedQuantType.QBFP and QMX, which its enum sets
// beside the integer and float types): codes outside ONNX's element types, for no tensor holds
// them. A tensor of a block type stays float through one fake-quantization node, com.amd.quark
// BFPQuantizeDequantize or MXQuantizeDequantize (quant/block_format.h): no scale, no zero point,
// no calibrated range.
inline constexpr ir::DataType kQBfp = static_cast<ir::DataType>(1011);
inline constexpr ir::DataType kQMx = static_cast<ir::DataType>(1012);
bool quant_type_is_block(ir::DataType type);

// The "range" Quark's compute_scale_zp_fp maps a float16/bfloat16 range onto (its get_qmin_qmax_for_qType):
// float16 [-65504, 65504]; bfloat16 [-3.38953139e38, 3.38953139e38], or [-2, 2] when `scaled`.
struct FloatRange {
  double min = 0;
  double max = 0;
};
FloatRange float_quant_range(ir::DataType type, bool scaled);
// The largest finite bfloat16 (0x7F7F), the bound of Quark's bfloat16 range and of its BF16WithClip
// Clip (get_qmin_qmax_for_qType, insert_clip_bfloat16_qdq).
constexpr float kBfloat16Max = 3.38953139e38f;

// ---------------------------------------------------------------------------------------------
// Scale and zero point of a range

enum class ScaleKind {
  float_scale,   // (rmax - rmin) / (qmax - qmin)
  power_of_two,  // 2^-pos (vai compute_scale_zp_pof2s; Quark's PowerOfTwoMethod)
  int16_scale,   // M / 2^N, M 16-bit, N in [0, 16] (extra option Int16Scale of vai and Quark)
};

// How a power-of-two position is chosen from the float scale.
enum class Pof2Position {
  nearest,       // rint(-log2(s)): vai 1.16 and Quark; may clip max|x| by up to sqrt(2) (vai compute_scale_zp_pof2s)
  non_overflow,  // the finest position whose range holds [rmin, rmax] (vai 1.14; onnxptq's calibration)
};

// The zero point of a symmetric range.
enum class SymmetricZeroPoint {
  formula,   // rne(qmin - rmin / scale), as for asymmetric ranges (vai compute_scale_zp_pof2s, Quark compute_scale_zp)
  midpoint,  // rne((qmin + qmax) / 2), independent of the scale (ORT compute_scale_zp)
};

// What an infinite bound (or, when clamping, any |r| > FLT_MAX / 2) does. vai_q_onnx replaces it
// by DBL_MAX / 2, whose scale is infinite in float32, and ORT does nothing (an infinite scale):
// onnxptq refuses both. Quark clamps to FLT_MAX / 2 (its compute_scale_zp).
enum class InfiniteRange { error, clamp_float_max_half };

// The zero point of an asymmetric float16/bfloat16 target.
enum class FloatZeroPoint {
  vai_midpoint,  // -(rmin + rmax) / 2 / scale (vai compute_scale_zp_fp)
  quark_offset,  // rne(qmin - rmin / scale), qmin of float_quant_range (Quark's compute_scale_zp_fp)
};

struct ScaleOptions {
  bool symmetric = false;
  bool reduce_range = false;
  qmath::RangeTable table = qmath::RangeTable::vai;
  ScaleKind kind = ScaleKind::float_scale;
  Pof2Position pof2_position = Pof2Position::nearest;
  SymmetricZeroPoint symmetric_zero_point = SymmetricZeroPoint::formula;
  // A symmetric uint8 zero point of 127 becomes 128 (vai compute_scale_zp_pof2s, for power-of-two scales
  // only; Quark compute_scale_zp, for float scales of ORT methods, power-of-two and Int16 scales).
  bool uint8_symmetric_zp_128 = false;
  // ORT's MinimumRealRange (compute_scale_zp): rmax >= rmin + min_real_range, before symmetrising. 0: off.
  double min_real_range = 0;
  InfiniteRange infinite_range = InfiniteRange::error;
  // The type scales are stored in: Float, or Float16 for ORT on float16 models, whose ranges and
  // scales are float16 and whose tiny-scale threshold is 6.1e-5 (ORT compute_scale_zp).
  ir::DataType scale_type = ir::DataType::Float;
  // float16/bfloat16 targets: Quark's extra options ActivationScaled/WeightScaled, and the zero point.
  bool float_scaled = false;
  FloatZeroPoint float_zero_point_rule = FloatZeroPoint::vai_midpoint;
};

// Each tool's rules for a kind of scale (symmetric and reduce_range are left to the caller):
// ort: ORT table, midpoint zero point, no 127->128; vai: vai table, formula, 127->128 for power
// of two only, midpoint float zero point; quark: vai table, formula, 127->128, clamped infinities,
// Quark's float zero point.
ScaleOptions scale_options_of(Tool tool, ScaleKind kind = ScaleKind::float_scale);

// The scale and zero point of [rmin, rmax] for `type` (compute_scale_zp; vai: compute_scale_zp_pof2s): the
// range widened to hold 0, rounded to the scale type, symmetrised when asked; the width rmax - rmin
// in the scale type (as the seeds subtract float32 ranges), the scale in double, rounded to the
// scale type when returned; a scale below the scale type's smallest normal gives (1, 0). Power of
// two and Int16 scales then recompute the zero point as rne(qmin - min((qmin - zp) s', 0) / s').
// float16/bfloat16: compute_scale_zp_fp (scale 1 unless float_scaled; zero point 0 when symmetric).
// Error for NaN, an infinite range (unless clamped), a non-quant type.
qmath::ScaleZeroPoint compute_scale_zp(double rmin, double rmax, ir::DataType type, const ScaleOptions& o);
// The same with the integer range given (ORT's test_quant_util.py vectors give qmin and qmax directly).
qmath::ScaleZeroPoint compute_scale_zp(double rmin, double rmax, qmath::QRange q, ir::DataType type,
                                       const ScaleOptions& o);

// The M / 2^N nearest to `scale` (find_int16_scale of vai and Quark): for N = 0..16, m = scale 2^N within
// [-32768, 32767], floor(m) then ceil(m); the first strictly nearer wins. scale 0 gives (0, 0).
struct Int16Scale {
  int64_t m = 0;
  int n = 0;
};
Int16Scale int16_scale_find(double scale);
// M / 2^N, or 2^-14 when that is below FLT_MIN (vai compute_scale_zp_pof2s, Int16Method).
double int16_scale_value(double scale);

// ---------------------------------------------------------------------------------------------
// Quantize, dequantize, fake quantize

// Where integer values saturate.
enum class Saturation {
  // The type's range: QuantizeLinear and the custom ops at run time, ORT's quantize_nparray.
  full,
  // Signed types to +-(2^(b-1) - 1), unsigned ones full: vai/Quark quantize_nparray.
  symmetric,
};

// How float16/bfloat16 "quantize": bfloat16 is always bf16(x / s + zp) and (float(q) - zp) s
// (but see QuantizeOptions::bfloat16_cast_form), rounded to nearest even as ONNX Runtime's Cast does.
enum class FloatCast {
  quantizer,  // float16 the same (vai quantize_nparray, dequantize_data); overflow gives inf
  vitis_op,   // VitisQuantizeLinear: float16(clip(x, +-65504)), scale and zero point ignored both ways (vai C++ op)
  quark_op,   // ExtendedQuantizeLinear: float16(x / s), dequantized float(q) s; zero point ignored (Quark custom op)
};

struct QuantizeOptions {
  Saturation saturation = Saturation::full;
  FloatCast float_cast = FloatCast::quantizer;
  // bfloat16 as the Cast form of ExtendedQuantFormat.QDQ computes it (export_qdq.cc): the zero point
  // is added only when it is not 0, as no Add is written then, so -0 stays -0 (Quark's op adds +0).
  bool bfloat16_cast_form = false;
};

// x (float, float16 or bfloat16) quantized to `type`, per tensor (no axis, one parameter) or per
// channel along `axis` (negative counts from the end; one parameter per index of that dimension):
// q = saturate(rne(float32(x) / float32(s)) + zp), a float32 division and NaN giving the lowest
// value, exactly as the engine's QuantizeLinear (qmath/quantize.h). The result has
// x's shape; float16/bfloat16 results hold the raw 16-bit values.
ir::Tensor quantize_tensor(const ir::Tensor& x, ir::DataType type, std::span<const qmath::ScaleZeroPoint> params,
                           std::optional<int64_t> axis, const QuantizeOptions& o = {});
// float32((q - zp) * s) with q - zp exact (DequantizeLinear); float types by `o.float_cast`.
ir::Tensor dequantize_tensor(const ir::Tensor& q, std::span<const qmath::ScaleZeroPoint> params,
                             std::optional<int64_t> axis, const QuantizeOptions& o = {});
// dequantize(quantize(x)) in float32, as a Q/DQ pair computes it at run time (for simulation).
ir::Tensor fake_quantize_tensor(const ir::Tensor& x, ir::DataType type, std::span<const qmath::ScaleZeroPoint> params,
                                std::optional<int64_t> axis, const QuantizeOptions& o = {});
// The same on n contiguous values with one parameter (Error for a scale that is not positive and finite).
void fake_quantize_values(const float* x, size_t n, ir::DataType type, const qmath::ScaleZeroPoint& p,
                          const QuantizeOptions& o, float* y);

// ---------------------------------------------------------------------------------------------
// Weights

enum class WeightMethod {
  min_max,        // [min, max] of the values through compute_scale_zp (NonOverflow with power_of_two)
  pof2_min_mse,   // vai quantize_data_pof2s MinMSE: positions p0-1 .. p0+3 around the nearest p0
                  // (whatever pof2_position says), zero point kept; least squared error, coarsest on ties
  float_min_mse,  // Quark compute_minmse (WeightCalibrateMethod MinMSE): float-scale candidates (a repeated
                  // scale skipped, no 127 -> 128), the first least mean squared error
};

// Quark's extra option MinMSEModeFloatScale (compute_minmse's minmse_mode).
enum class FloatMinMseMode {
  percentile,   // ranges of the two-sided percentiles 99.9, 99.99, 99.999, 99.9999 (numpy's linear percentile)
  hist_center,  // a min(2048, n)-bin histogram; windows of bin centres from 50 % to 100 % of the bins; MSE of the
                // centres weighted by their counts
  all,          // the same windows, MSE over all the values
};

struct WeightOptions {
  ScaleOptions scale;
  QuantizeOptions quantize;
  WeightMethod method = WeightMethod::min_max;
  FloatMinMseMode min_mse_mode = FloatMinMseMode::percentile;
  std::optional<int64_t> axis;  // per channel along this axis (quantize_static's per_channel)
};

// Each tool's weight options for a kind of scale: scale_options_of(tool, kind) and its array
// saturation (ort: full; vai, quark: symmetric).
WeightOptions weight_options_of(Tool tool, ScaleKind kind = ScaleKind::float_scale);

struct QuantizedTensor {
  ir::Tensor data;                     // the quantized values, the weight's shape
  std::vector<qmath::ScaleZeroPoint> params;  // one, or one per channel
  std::optional<int64_t> axis;         // normalised to [0, rank)
};

// The parameters of a weight (float, float16 or bfloat16), per tensor or per channel, by
// `o.method`; an empty tensor or channel gets (1, 0) (vai quantize_data_pof2s). Errors name the tensor.
std::vector<qmath::ScaleZeroPoint> weight_params(const ir::Tensor& w, ir::DataType type, const WeightOptions& o);
// weight_params, then quantize_tensor with `o.quantize`.
QuantizedTensor quantize_weight(const ir::Tensor& w, ir::DataType type, const WeightOptions& o);

// ---------------------------------------------------------------------------------------------
// Bias (int32, zero point 0, scale s_in * s_w * beta)

struct BiasOptions {
  double beta = 1;  // Gemm's beta
  // q = rne(b / s_b) in double (current ORT, base_quantizer.py), or in float32 as the float32 arrays of
  // vai_q_onnx (ORT 1.16's quantize_bias_static) divide.
  bool divide_in_double = true;
  // Values beyond int32 are clipped (ORT, with a warning; Quark, whose own tests expect saturated
  // int32 biases) or an Error (vai casts without clipping, which wraps: onnxptq refuses).
  bool clip_to_int32 = true;
  ir::DataType scale_type = ir::DataType::Float;  // s_b = scale_type(scale_type(s_in s_w) beta)
};

// ort and quark: double, clipped; vai: float32, an Error beyond int32.
BiasOptions bias_options_of(Tool tool);

struct QuantizedBias {
  ir::Tensor data;             // int32, the bias's shape
  std::vector<double> scales;  // s_b: one, or one per channel
  bool clipped = false;        // a value was outside int32 and was clipped
};

// The int32 bias of a node whose input has scale `input_scale` and whose weight has `weight`
// parameters (one: per tensor; one per bias value: per channel), as ORT's quantize_bias_static_impl.
QuantizedBias quantize_bias(const ir::Tensor& bias, double input_scale, std::span<const qmath::ScaleZeroPoint> weight,
                            const BiasOptions& o = {});

// ORT's int32 guard (onnxruntime PR #22020), run before the weight is quantized: for an int8 or
// int16 weight whose zero points are all 0, a weight scale whose s_in s_w is below
// 1.0001 * 2a / (2^32 - 2) (a = max|b| per tensor, |b_i| per channel) is raised to just that, so
// the bias fits int32. Other weights are left as they are. The scales come back in `scale_type`.
// (Quark offers the same through its opt-in AdjustWeightScaleForInt32Bias; vai_q_onnx has none.)
struct WeightScaleAdjustment {
  std::vector<double> weight_scales;
  bool adjusted = false;  // the guard raised at least one scale
};
WeightScaleAdjustment adjust_weight_scale_for_int32_bias(const ir::Tensor& bias, double input_scale,
                                                         std::span<const qmath::ScaleZeroPoint> weight,
                                                         ir::DataType weight_type,
                                                         ir::DataType scale_type = ir::DataType::Float);

}  // namespace onnxptq::quant
