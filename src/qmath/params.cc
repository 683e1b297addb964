#include "qmath/params.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "onnxptq/error.h"

namespace onnxptq::qmath {

QRange quant_range(ir::DataType type, bool symmetric, bool reduce_range) {
  using ir::DataType;
  switch (type) {
    case DataType::UInt8: return reduce_range ? QRange{0, 127} : QRange{0, 255};
    case DataType::Int8:
      return reduce_range ? QRange{-64, 64} : symmetric ? QRange{-127, 127} : QRange{-128, 127};
    case DataType::UInt16: return reduce_range ? QRange{0, 32767} : QRange{0, 65535};
    case DataType::Int16:
      return reduce_range ? QRange{-16384, 16384} : symmetric ? QRange{-32767, 32767} : QRange{-32768, 32767};
    // 4-bit: no symmetric entry in the seeds' tables (Quark's and ONNX Runtime's get_qmin_qmax_for_qType).
    case DataType::UInt4: return reduce_range ? QRange{0, 7} : QRange{0, 15};
    case DataType::Int4: return reduce_range ? QRange{-4, 3} : QRange{-8, 7};
    case DataType::UInt32: return reduce_range ? QRange{0, 2147483647} : QRange{0, 4294967295};
    case DataType::Int32:
      return reduce_range ? QRange{-1073741824, 1073741824}
             : symmetric  ? QRange{-2147483647, 2147483647}
                          : QRange{-2147483648LL, 2147483647};
    default:
      throw Error("no integer range for " + std::string(ir::data_type_name(type)) +
                  ": quantized types are int4, uint4, int8, uint8, int16, uint16, int32, uint32");
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

template <ErrorMetric kMetric>
inline float accumulate(float sum, float r) {
  return kMetric == ErrorMetric::Squared ? std::fma(r, r, sum) : sum + std::fabs(r);
}

// Sixteen lanes of float sums over a block of 16 values each (count values; the rest add nothing)
// of r^2 (one fused multiply-add) or |r|, r = residual(x), added to the double lanes: a float sum
// of 16 terms is within 1e-6 of the exact one.
template <ErrorMetric kMetric, bool kPartial, class Residual>
void add_float_block(double (&lanes)[16], const float* block, size_t count, const Residual& residual) {
  constexpr size_t kLanes = 16, kRows = 16;
  // The lanes are the vector's: each lane's sum stays in a register over the rows.
#pragma omp simd simdlen(16)
  for (size_t l = 0; l < kLanes; ++l) {
    float sum = 0;
    for (size_t row = 0; row < kRows; ++row) {
      float r = residual(block[row * kLanes + l]);
      if (kPartial) r = row * kLanes + l < count ? r : 0.0f;
      sum = accumulate<kMetric>(sum, r);
    }
    lanes[l] += sum;
  }
}

// Four whole blocks in one loop, as four calls of add_float_block would sum them (each block's
// sums added to the lanes in block order), but in four independent chains of additions: one
// chain waits on each addition's latency.
template <ErrorMetric kMetric, class Residual>
void add_four_float_blocks(double (&lanes)[16], const float* blocks, const Residual& residual) {
  constexpr size_t kLanes = 16, kRows = 16, kBlock = kLanes * kRows;
#pragma omp simd simdlen(16)
  for (size_t l = 0; l < kLanes; ++l) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t row = 0; row < kRows; ++row) {
      const float* at = blocks + row * kLanes + l;
      s0 = accumulate<kMetric>(s0, residual(at[0]));
      s1 = accumulate<kMetric>(s1, residual(at[kBlock]));
      s2 = accumulate<kMetric>(s2, residual(at[2 * kBlock]));
      s3 = accumulate<kMetric>(s3, residual(at[3 * kBlock]));
    }
    lanes[l] += s0;
    lanes[l] += s1;
    lanes[l] += s2;
    lanes[l] += s3;
  }
}

// Any scale: the seeds' arithmetic, q = clip(rne(x / s) + zp), e = float32((q - zp) s) - x, in
// float: e = float32(clip(k, lo - zp, hi - zp) s) - x with k = rne(x / s) (the same integers,
// exact below 2^24), exact where x is not clipped (Sterbenz: x within half a step of k s) and
// rounded once where it is. A division costs several times a multiplication, so k comes from
// t = x * (1 / s): t is within 3.1 ulp of float(x / s), so rne(t) is its rounding too unless a
// half-integer lies closer to t than 2^-22 |t| (as one does for every |t| from 2^21 up). A block
// with such a value divides instead. (NaN and infinity give the same e either way.)
struct AnyScale {
  float s = 1, inverse = 1, low = 0, high = 0;
};

// Sixteen lanes' sums of |e| or e^2 over one block of 256 values (count of them; the rest add
// nothing), as add_float_block sums, with k from the reciprocal; false if the block must divide
// (and then sums is not set).
template <ErrorMetric kMetric, bool kPartial>
bool any_scale_block(float (&sums)[16], const float* block, int count, const AnyScale& a) {
  constexpr int kLanes = 16, kRows = 16;
  const float s = a.s, inverse = a.inverse, low = a.low, high = a.high;  // in registers, not re-read
  float farthest[kLanes];                                                // each lane's largest |t - k| + 2^-22 |t|
#pragma omp simd simdlen(16)
  for (int l = 0; l < kLanes; ++l) {
    float sum = 0, far = 0;
#pragma GCC unroll 16
    for (int row = 0; row < kRows; ++row) {
      const float v = block[row * kLanes + l];
      const float t = v * inverse;
      float k = std::nearbyint(t);
      const float d = std::fma(std::fabs(t), 0x1p-22f, std::fabs(t - k));
      far = d > far ? d : far;
      // Ternaries, not std::min/max: GCC leaves the loop scalar with those.
      k = k < low ? low : k;
      k = k > high ? high : k;
      float e = k * s - v;
      if (kPartial) e = row * kLanes + l < count ? e : 0.0f;
      sum = accumulate<kMetric>(sum, e);
    }
    sums[l] = sum;
    farthest[l] = far;
  }
  bool fine = true;
  for (float far : farthest) fine &= far < 0.5f;
  return fine;
}

template <ErrorMetric kMetric, bool kPartial>
void add_any_scale_block(double (&lanes)[16], const float* block, int count, const AnyScale& a, bool reciprocal) {
  float sums[16];
  if (reciprocal && any_scale_block<kMetric, kPartial>(sums, block, count, a)) {
    for (int l = 0; l < 16; ++l) lanes[l] += sums[l];
    return;
  }
  const float s = a.s, low = a.low, high = a.high;
  add_float_block<kMetric, kPartial>(lanes, block, static_cast<size_t>(count), [=](float v) {
    float k = std::nearbyint(v / s);
    k = k < low ? low : k;
    k = k > high ? high : k;
    return k * s - v;
  });
}

template <ErrorMetric kMetric>
double summed_error(const float* x, size_t n, float s, float zp, float lo, float hi) {
  constexpr size_t kBlock = 256;
  const AnyScale a{s, 1.0f / s, lo - zp, hi - zp};
  // A scale or inverse that is no normal float puts t further from x / s: every block divides.
  const bool reciprocal = std::isnormal(a.s) && std::isnormal(a.inverse);
  double lanes[16] = {};
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) add_any_scale_block<kMetric, false>(lanes, x + i, kBlock, a, reciprocal);
  if (i < n) {
    float rest[kBlock] = {};
    std::copy(x + i, x + n, rest);
    add_any_scale_block<kMetric, true>(lanes, rest, static_cast<int>(n - i), a, reciprocal);
  }
  double sum = 0;
  for (double v : lanes) sum += v;
  return sum;
}

// A power-of-two scale s: t = x * (1 / s) is x / s exactly (and several times cheaper), and
// e = s (q - zp - t) with r = q - zp - t = clip(rne(t), lo - zp, hi - zp) - t (the zero point
// moves the clip range rather than each value: the same integers, exact below 2^24), exact in
// float where x is not clipped (|r| <= 1/2, Sterbenz) and rounded once where it is. r^2 or |r|
// is summed in float over blocks of 256 values (sixteen lanes), the blocks in double: within
// 1e-6 of the exact sum, at twice the values a vector holds and with no conversion in the inner
// loop. Times s^2 or s, which commutes with every rounding.
struct Pof2Sum {
  // What the clip does to values within the data's extrema: nothing where even the extremes
  // round inside the range (and there, within 2^22 steps, rne takes two additions instead of a
  // rounding instruction), and where they round to 0, r = -t. The same r either way, in fewer
  // operations.
  enum Kind { kClipped, kUnclipped, kAllZero };
  float s = 1, inverse = 1, low = 0, high = 0;
  Kind kind = kClipped;
  double lanes[16] = {};
};

constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23: float's integers within 2^22 of it

bool float_power_of_two(float s) {
  int exponent = 0;
  return std::frexp(s, &exponent) == 0.5f && std::isnormal(1.0f / s);
}

// Adds each position's errors on x to its lanes, block by block of 256 values (four at a time
// where four are whole): every position on a block while it is in the L1 cache.
template <ErrorMetric kMetric>
void add_pof2_errors(const float* x, size_t n, Pof2Sum* sums, size_t positions) {
  constexpr size_t kBlock = 256;
  auto each_position = [&](const float* block, size_t count) {
    for (size_t k = 0; k < positions; ++k) {
      Pof2Sum& p = sums[k];
      auto add = [&](auto residual) {
        if (count == 4 * kBlock)
          add_four_float_blocks<kMetric>(p.lanes, block, residual);
        else if (count == kBlock)
          add_float_block<kMetric, false>(p.lanes, block, kBlock, residual);
        else
          add_float_block<kMetric, true>(p.lanes, block, count, residual);
      };
      const float inverse = p.inverse, low = p.low, high = p.high;
      if (p.kind == Pof2Sum::kAllZero)
        add([=](float v) { return -(v * inverse); });
      else if (p.kind == Pof2Sum::kUnclipped)
        add([=](float v) {
          // rne(t) as (t + 1.5 * 2^23) - 1.5 * 2^23 for |t| < 2^22, with t = v * inverse exact;
          // and r = rne(t) - t in one rounding, as the subtraction would give it.
          const float rounded = std::fma(v, inverse, kRoundingShift) - kRoundingShift;
          return std::fma(-v, inverse, rounded);
        });
      else
        add([=](float v) {
          float t = v * inverse;
          return std::min(std::max(std::nearbyint(t), low), high) - t;
        });
    }
  };
  size_t i = 0;
  for (; i + 4 * kBlock <= n; i += 4 * kBlock) each_position(x + i, 4 * kBlock);
  for (; i + kBlock <= n; i += kBlock) each_position(x + i, kBlock);
  if (i < n) {
    float rest[kBlock] = {};
    std::copy(x + i, x + n, rest);
    each_position(rest, n - i);
  }
}

template <ErrorMetric kMetric>
double pof2_total(const Pof2Sum& p) {
  double sum = 0;
  for (double v : p.lanes) sum += v;
  return kMetric == ErrorMetric::Squared ? sum * (static_cast<double>(p.s) * p.s) : sum * p.s;
}

}  // namespace

double quantization_error(const float* x, size_t n, double scale, int64_t zero_point, QRange clip, ErrorMetric metric) {
  auto s = static_cast<float>(scale), zp = static_cast<float>(zero_point);
  auto lo = static_cast<float>(clip.min), hi = static_cast<float>(clip.max);
  if (!float_power_of_two(s))
    return metric == ErrorMetric::Squared ? summed_error<ErrorMetric::Squared>(x, n, s, zp, lo, hi)
                                          : summed_error<ErrorMetric::Absolute>(x, n, s, zp, lo, hi);
  Pof2Sum p;
  p.s = s;
  p.inverse = 1.0f / s;
  p.low = lo - zp;
  p.high = hi - zp;
  if (metric == ErrorMetric::Squared) {
    add_pof2_errors<ErrorMetric::Squared>(x, n, &p, 1);
    return pof2_total<ErrorMetric::Squared>(p);
  }
  add_pof2_errors<ErrorMetric::Absolute>(x, n, &p, 1);
  return pof2_total<ErrorMetric::Absolute>(p);
}

std::vector<double> pof2_squared_errors(const float* x, size_t n, float lo, float hi, std::span<const int> positions,
                                        int64_t zero_point, QRange clip) {
  const auto zp = static_cast<float>(zero_point);
  std::vector<Pof2Sum> sums;
  for (int pos : positions) {
    Pof2Sum p;
    p.s = static_cast<float>(pos_to_scale(pos));
    if (!float_power_of_two(p.s)) continue;  // quantization_error's general case, below
    p.inverse = 1.0f / p.s;
    p.low = static_cast<float>(clip.min) - zp;
    p.high = static_cast<float>(clip.max) - zp;
    // rne is monotonic: every value rounds within [rne(lo / s), rne(hi / s)].
    const float top = std::nearbyint(hi * p.inverse), bottom = std::nearbyint(lo * p.inverse);
    if (top == 0 && bottom == 0 && p.low <= 0 && p.high >= 0)
      p.kind = Pof2Sum::kAllZero;
    else if (top <= p.high && bottom >= p.low && std::fabs(top) < 0x1p22f && std::fabs(bottom) < 0x1p22f)
      p.kind = Pof2Sum::kUnclipped;
    sums.push_back(p);
  }
  add_pof2_errors<ErrorMetric::Squared>(x, n, sums.data(), sums.size());
  std::vector<double> out;
  size_t next = 0;
  for (int pos : positions)
    out.push_back(float_power_of_two(static_cast<float>(pos_to_scale(pos)))
                      ? pof2_total<ErrorMetric::Squared>(sums[next++])
                      : quantization_error(x, n, pos_to_scale(pos), zero_point, clip, ErrorMetric::Squared));
  return out;
}

}  // namespace onnxptq::qmath
