#include "engine/extrema.h"

#include <cmath>
#include <cstring>

namespace onnxptq::engine {
namespace {

// The finite extrema of a block, scanned again without its non-finite values (rare) when an
// extremum came out infinite.
Extrema finite_only(const float* data, size_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Extrema e;
  e.non_finite = true;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(data[i]) < kInf) {  // false for NaN too
      e.lo = std::min(e.lo, data[i]);
      e.hi = std::max(e.hi, data[i]);
    }
  return e;
}

}  // namespace

Extrema finite_extrema(const float* data, size_t n) {
  // Running extrema in vector registers: four accumulators of 16 lanes each way, so that a
  // minimum does not wait for the previous one (plain arrays of lanes were kept in memory by the
  // compiler, a store and a reload per step). `x < lo ? x : lo` is false for a NaN x, so NaN is
  // skipped, and it is what vminps computes (vmaxps likewise); min and max are exact, so the
  // lane split changes nothing. x - x is 0 for a finite x and NaN otherwise: summed, it tells
  // whether there was a NaN (an infinity makes an extremum infinite, and is seen there too).
  using Lanes = float __attribute__((vector_size(64)));
  constexpr size_t kLanes = sizeof(Lanes) / sizeof(float), kStep = 4 * kLanes;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const Lanes inf = Lanes{} + kInf;  // in every lane
  Lanes lo0 = inf, lo1 = inf, lo2 = inf, lo3 = inf, hi0 = -inf, hi1 = -inf, hi2 = -inf, hi3 = -inf;
  Lanes nan0 = Lanes{}, nan1 = Lanes{};
  auto load = [](const float* p) {
    Lanes x;
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    Lanes x0 = load(data + i), x1 = load(data + i + kLanes), x2 = load(data + i + 2 * kLanes),
          x3 = load(data + i + 3 * kLanes);
    lo0 = x0 < lo0 ? x0 : lo0;
    lo1 = x1 < lo1 ? x1 : lo1;
    lo2 = x2 < lo2 ? x2 : lo2;
    lo3 = x3 < lo3 ? x3 : lo3;
    hi0 = x0 > hi0 ? x0 : hi0;
    hi1 = x1 > hi1 ? x1 : hi1;
    hi2 = x2 > hi2 ? x2 : hi2;
    hi3 = x3 > hi3 ? x3 : hi3;
    nan0 += (x0 - x0) + (x1 - x1);
    nan1 += (x2 - x2) + (x3 - x3);
  }
  Extrema e;
  float nan = 0;
  for (size_t l = 0; l < kLanes; ++l) {
    e.add({std::min({lo0[l], lo1[l], lo2[l], lo3[l]}), std::max({hi0[l], hi1[l], hi2[l], hi3[l]})});
    nan += nan0[l] + nan1[l];
  }
  for (; i < n; ++i) {
    float x = data[i];
    e.lo = x < e.lo ? x : e.lo;
    e.hi = x > e.hi ? x : e.hi;
    nan += x - x;
  }
  if (e.lo == -kInf || e.hi == kInf) return finite_only(data, n);
  e.non_finite = nan != 0;  // NaN != 0 is true
  return e;
}

Extrema finite_extrema(const float* data, size_t n, int threads) {
  ExtremaSink sink;
  parallel_for(threads, static_cast<int64_t>(n), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    sink.add(finite_extrema(data + begin, static_cast<size_t>(end - begin)));
  });
  return sink.extrema();
}

}  // namespace onnxptq::engine
