#include "calib/min_max_stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace onnxptq::calib {

void MinMaxStats::add(size_t sample, engine::Extrema extrema, bool keep_per_sample) {
  if (extrema.empty()) return;  // nothing finite
  const double lo = extrema.lo, hi = extrema.hi;
  min = std::min(min, lo);
  max = std::max(max, hi);
  max_abs = std::max(max_abs, std::max(std::fabs(min), std::fabs(max)));
  if (keep_per_sample) {
    Range& r = per_sample.try_emplace(sample, Range{lo, hi}).first->second;
    r.lo = std::min(r.lo, lo);  // a sample seen in parts (several runs)
    r.hi = std::max(r.hi, hi);
  }
}

void MinMaxStats::merge(const MinMaxStats& other) {
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  max_abs = std::max(max_abs, other.max_abs);
  for (const auto& [sample, r] : other.per_sample) {
    auto [it, fresh] = per_sample.try_emplace(sample, r);
    if (!fresh) {
      it->second.lo = std::min(it->second.lo, r.lo);
      it->second.hi = std::max(it->second.hi, r.hi);
    }
  }
}

Range MinMaxStats::moving_average(double constant) const {
  if (per_sample.empty()) return {min, max};
  Range r = per_sample.begin()->second;
  for (auto it = std::next(per_sample.begin()); it != per_sample.end(); ++it) {
    r.lo += constant * (it->second.lo - r.lo);
    r.hi += constant * (it->second.hi - r.hi);
  }
  return r;
}

}  // namespace onnxptq::calib
