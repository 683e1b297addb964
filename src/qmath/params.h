// Quantization parameters from a range: the integer range of each type, float scales and
// zero points, and power-of-two scales, with the exact rounding rules of vai_q_onnx 1.16's
// quant_utils.py (get_qmin_qmax_for_qType, compute_scale_zp_pof2s, quantize_nparray).
// Calibration and the quantizer both use them.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "ir/data_type.h"
#include "qmath/quantize.h"

namespace onnxptq::qmath {

// The integer range of a 4/8/16/32-bit integer type: the reduced range when `reduce_range`, else
// the symmetric one (signed types only: [-127, 127]) when `symmetric`, else the full range.
// Error for other types.
QRange quant_range(ir::DataType type, bool symmetric, bool reduce_range = false);

// Whose qmin/qmax table (get_qmin_qmax_for_qType): vai_q_onnx and Quark (the one above, unsigned
// types have no symmetric entry, 32-bit types included) or ONNX Runtime's quant_utils.py
// (symmetric uint8 is [0, 254] and uint16 [0, 65534]; no 32-bit types, an Error).
enum class RangeTable { vai, ort };
QRange quant_range(ir::DataType type, bool symmetric, bool reduce_range, RangeTable table);

// The range quantized values are clipped to when arrays are quantized (weights, MinMSE): the
// symmetric range for signed types, the full range for unsigned ones.
QRange clip_range(ir::DataType type);

struct ScaleZeroPoint {
  double scale = 1;
  int64_t zero_point = 0;
  // float16 / bfloat16 targets only (their zero point is a value of that type; zero_point is 0).
  double float_zero_point = 0;
};

// Float scale and zero point for [rmin, rmax] (widened to include 0; made symmetric when asked).
// A scale below FLT_MIN gives (1, 0).
ScaleZeroPoint float_scale(double rmin, double rmax, QRange q, bool symmetric);

// The position p of a power-of-two scale 2^-p nearest to `scale` (rint of -log2, ties to even),
// the scale clamped to [2^-127, 2^127] first.
int scale_to_pos(double scale);
inline double pos_to_scale(int pos) { return std::ldexp(1.0, -pos); }

// The power-of-two scale for [rmin, rmax] and its zero point (recomputed from the snapped scale;
// uint8 symmetric keeps 128).
ScaleZeroPoint pof2_scale(double rmin, double rmax, QRange q, ir::DataType type, bool symmetric);
// The zero point pof2_scale gives [rmin, rmax] when the scale is 2^-pos.
int64_t pof2_zero_point(double rmin, double rmax, QRange q, ir::DataType type, bool symmetric, int pos);
// The largest position (the finest scale) whose representable range [(q.min - zp) s, (q.max - zp) s]
// holds [rmin, rmax]: no value overflows. (vai_q_onnx 1.16 rounds -log2 to nearest instead,
// which may clip the extremes by up to a factor sqrt(2); 1.14 did this.)
int pof2_non_overflow_pos(double rmin, double rmax, QRange q, ir::DataType type, bool symmetric);

enum class ErrorMetric { Absolute, Squared };

// The summed error (|e| or e^2) of quantizing x (n values) with `scale` and `zero_point`, clipped
// to `clip`: q = clip(rne(x / s) + zp), e = float32((q - zp) * s) - x, as the seeds and the
// runtime ops compute it (e in float, as numpy does: exact unless x is clipped), summed over
// fixed lanes (the same on every run), in float over blocks of 16 terms a lane and the blocks in
// double: within 1e-6 of the exact sum.
double quantization_error(const float* x, size_t n, double scale, int64_t zero_point, QRange clip, ErrorMetric metric);
// The squared errors at the power-of-two `positions` (scale 2^-pos) with one zero point and clip
// range, in that order, each as quantization_error gives it, bit for bit, in one read of the
// data. x: finite values whose extrema are [lo, hi] (positions that clip none of them, or round
// them all to 0, cost fewer operations).
std::vector<double> pof2_squared_errors(const float* x, size_t n, float lo, float hi, std::span<const int> positions,
                                        int64_t zero_point, QRange clip);

// The MinMSE candidates around the NonOverflow position p0: p0 - 1 ... p0 + 3, coarsest first.
inline constexpr int kMinMseCandidates = 5;
inline int minmse_candidate(int p0, int i) { return p0 + i - 1; }

}  // namespace onnxptq::qmath
