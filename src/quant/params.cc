#include "quant/params.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include "onnxptq/error.h"

namespace onnxptq::quant {

QRange quant_range(ir::DataType type, bool symmetric, bool reduce_range) {
  using ir::DataType;
  switch (type) {
    case DataType::UInt8: return reduce_range ? QRange{0, 127} : QRange{0, 255};
    case DataType::Int8:
      return reduce_range ? QRange{-64, 64} : symmetric ? QRange{-127, 127} : QRange{-128, 127};
    case DataType::UInt16: return reduce_range ? QRange{0, 32767} : QRange{0, 65535};
    case DataType::Int16:
      return reduce_range ? QRange{-16384, 16384} : symmetric ? QRange{-32767, 32767} : QRange{-32768, 32767};
    case DataType::UInt32: return reduce_range ? QRange{0, 2147483647} : QRange{0, 4294967295};
    case DataType::Int32:
      return reduce_range ? QRange{-1073741824, 1073741824}
             : symmetric  ? QRange{-2147483647, 2147483647}
                          : QRange{-2147483648LL, 2147483647};
    default:
      throw Error("no integer range for " + std::string(ir::data_type_name(type)) +
                  ": quantized types are int8, uint8, int16, uint16, int32, uint32");
  }
}

QRange quant_range(ir::DataType type, bool symmetric, bool reduce_range, RangeTable table) {
  using ir::DataType;
  if (table == RangeTable::ort) {
    if (type == DataType::Int32 || type == DataType::UInt32)
      throw Error("ONNX Runtime's quantization ranges have no " + std::string(ir::data_type_name(type)) +
                  ": its types are int8, uint8, int16, uint16");
    if (symmetric && !reduce_range && type == DataType::UInt8) return {0, 254};
    if (symmetric && !reduce_range && type == DataType::UInt16) return {0, 65534};
  }
  return quant_range(type, symmetric, reduce_range);
}

QRange clip_range(ir::DataType type) { return quant_range(type, true, false); }

ScaleZeroPoint float_scale(double rmin, double rmax, QRange q, bool symmetric) {
  rmin = std::min(rmin, 0.0);
  rmax = std::max(rmax, 0.0);
  if (rmin == -HUGE_VAL) rmin = -DBL_MAX / 2;
  if (rmax == HUGE_VAL) rmax = DBL_MAX / 2;
  if (symmetric) {
    double m = std::max(-rmin, rmax);
    rmin = -m;
    rmax = m;
  }
  double scale = (rmax - rmin) / static_cast<double>(q.max - q.min);
  if (!(scale >= FLT_MIN)) return {1.0, 0};
  // Python's round(): half to even, as the seeds compute it.
  return {scale, static_cast<int64_t>(std::nearbyint(static_cast<double>(q.min) - rmin / scale))};
}

int scale_to_pos(double scale) {
  scale = std::clamp(scale, std::ldexp(1.0, -127), std::ldexp(1.0, 127));
  return static_cast<int>(std::nearbyint(-std::log2(scale)));
}

int64_t pof2_zero_point(double rmin, double rmax, QRange q, ir::DataType type, bool symmetric, int pos) {
  ScaleZeroPoint f = float_scale(rmin, rmax, q, symmetric);
  double s = pos_to_scale(pos);
  double rmin2 = std::min(static_cast<double>(q.min - f.zero_point) * s, 0.0);
  auto zp = static_cast<int64_t>(std::nearbyint(static_cast<double>(q.min) - rmin2 / s));
  if (symmetric && type == ir::DataType::UInt8 && zp == 127) zp = 128;
  return zp;
}

ScaleZeroPoint pof2_scale(double rmin, double rmax, QRange q, ir::DataType type, bool symmetric) {
  int pos = scale_to_pos(float_scale(rmin, rmax, q, symmetric).scale);
  return {pos_to_scale(pos), pof2_zero_point(rmin, rmax, q, type, symmetric, pos)};
}

int pof2_non_overflow_pos(double rmin, double rmax, QRange q, ir::DataType type, bool symmetric) {
  if (symmetric) {
    double m = std::max(std::fabs(rmin), std::fabs(rmax));
    rmin = -m;
    rmax = m;
  }
  auto holds = [&](int pos) {
    double s = pos_to_scale(pos);
    int64_t zp = pof2_zero_point(rmin, rmax, q, type, symmetric, pos);
    return static_cast<double>(q.max - zp) * s >= rmax && static_cast<double>(q.min - zp) * s <= rmin;
  };
  // The nearest position is at most one step too fine for the range (a zero point off by one
  // may need one more); a range of zeros holds at any position.
  int pos = scale_to_pos(float_scale(rmin, rmax, q, symmetric).scale);
  for (int tries = 0; tries < 4 && !holds(pos); ++tries) --pos;
  if (!holds(pos)) throw Error("no power-of-two scale holds the range [" + std::to_string(rmin) + ", " + std::to_string(rmax) + "]");
  return pos;
}

namespace {

// The sum of error(x[i]) over sixteen running sums in a fixed order: the compiler vectorises them
// (a single sum would be a serial chain), and every run sums alike.
template <class Error>
double lane_sum(const float* x, size_t n, Error error) {
  constexpr size_t kLanes = 16;
  double lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma GCC unroll 16
    for (size_t l = 0; l < kLanes; ++l) lanes[l] += error(x[i + l]);
  // The tail as one more block, its padding adding nothing: every lane index stays a constant,
  // so the lanes stay in registers instead of memory.
  float tail[kLanes] = {};
  std::copy(x + i, x + n, tail);
  for (size_t l = 0; l < kLanes; ++l) lanes[l] += i + l < n ? error(tail[l]) : 0.0;
  double sum = 0;
  for (double v : lanes) sum += v;
  return sum;
}

// Any scale: the seeds' arithmetic, q = clip(rne(x / s) + zp), e = float32((q - zp) s) - x,
// e^2 or |e| summed in double.
template <ErrorMetric kMetric>
double summed_error(const float* x, size_t n, float s, float zp, float lo, float hi) {
  return lane_sum(x, n, [&](float v) {
    float q = std::min(std::max(std::nearbyint(v / s) + zp, lo), hi);
    double e = static_cast<double>((q - zp) * s) - static_cast<double>(v);
    return kMetric == ErrorMetric::Squared ? e * e : std::fabs(e);
  });
}

// Sixteen lanes of float sums over a block of 16 values each (count values; the rest add nothing)
// of r^2 (one fused multiply-add) or |r|, r = residual(x), added to the double lanes: a float sum
// of 16 terms is within 1e-6 of the exact one.
template <ErrorMetric kMetric, bool kPartial, class Residual>
void add_float_block(double (&lanes)[16], const float* block, size_t count, const Residual& residual) {
  constexpr size_t kLanes = 16, kRows = 16;
  // The lanes are the vector's: each lane's sum stays in a register over the rows (all sixteen
  // at once: two independent chains of additions where a vector holds eight).
#pragma omp simd simdlen(16)
  for (size_t l = 0; l < kLanes; ++l) {
    float sum = 0;
    for (size_t row = 0; row < kRows; ++row) {
      float r = residual(block[row * kLanes + l]);
      if (kPartial) r = row * kLanes + l < count ? r : 0.0f;
      sum = kMetric == ErrorMetric::Squared ? std::fma(r, r, sum) : sum + std::fabs(r);
    }
    lanes[l] += sum;
  }
}

// A power-of-two scale s: t = x * (1 / s) is x / s exactly (and several times cheaper), and
// e = s (q - zp - t) with r = q - zp - t = clip(rne(t), lo - zp, hi - zp) - t (the zero point
// moves the clip range rather than each value: the same integers, exact below 2^24), exact in
// float where x is not clipped (|r| <= 1/2, Sterbenz) and rounded once where it is. r^2 or |r|
// is summed in float over blocks of 256 values (sixteen lanes), the blocks in double: within
// 1e-6 of the exact sum, at twice the values a vector holds and with no conversion in the inner
// loop. Times s^2 or s, which commutes with every rounding.
template <ErrorMetric kMetric>
double summed_pof2_error(const float* x, size_t n, float s, float zp, float lo, float hi) {
  const float inverse = 1.0f / s, low = lo - zp, high = hi - zp;
  auto residual = [=](float v) {
    float t = v * inverse;
    return std::min(std::max(std::nearbyint(t), low), high) - t;
  };
  constexpr size_t kBlock = 256;
  double lanes[16] = {};
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) add_float_block<kMetric, false>(lanes, x + i, kBlock, residual);
  if (i < n) {
    float rest[kBlock] = {};
    std::copy(x + i, x + n, rest);
    add_float_block<kMetric, true>(lanes, rest, n - i, residual);
  }
  double sum = 0;
  for (double v : lanes) sum += v;
  return kMetric == ErrorMetric::Squared ? sum * (static_cast<double>(s) * s) : sum * s;
}

}  // namespace

double quantization_error(const float* x, size_t n, double scale, int64_t zero_point, QRange clip, ErrorMetric metric) {
  auto s = static_cast<float>(scale), zp = static_cast<float>(zero_point);
  auto lo = static_cast<float>(clip.min), hi = static_cast<float>(clip.max);
  int exponent = 0;
  bool power_of_two = std::frexp(s, &exponent) == 0.5f && std::isnormal(1.0f / s);
  if (metric == ErrorMetric::Squared)
    return power_of_two ? summed_pof2_error<ErrorMetric::Squared>(x, n, s, zp, lo, hi)
                        : summed_error<ErrorMetric::Squared>(x, n, s, zp, lo, hi);
  return power_of_two ? summed_pof2_error<ErrorMetric::Absolute>(x, n, s, zp, lo, hi)
                      : summed_error<ErrorMetric::Absolute>(x, n, s, zp, lo, hi);
}

}  // namespace onnxptq::quant
