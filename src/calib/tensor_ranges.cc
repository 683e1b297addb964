#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "calib/entropy_search.h"
#include "calib/histogram_ranges.h"
#include "calib/tensor_ranges_detail.h"
#include "qmath/params.h"

namespace onnxptq::calib {

namespace {

TensorRange bounds(double lo, double hi) {
  TensorRange r;
  r.lo = lo;
  r.hi = hi;
  return r;
}

// The range a power-of-two position and its zero point represent (the quant_range table).
TensorRange pof2_range(int pos, double rmin, double rmax, const MethodSettings& settings) {
  int64_t zp =
      qmath::pof2_zero_point(rmin, rmax, settings.qrange, settings.options.activation_type, settings.symmetric, pos);
  double s = qmath::pos_to_scale(pos);
  TensorRange r;
  r.lo = static_cast<double>(settings.qrange.min - zp) * s;
  r.hi = static_cast<double>(settings.qrange.max - zp) * s;
  r.pos = pos;
  return r;
}

}  // namespace

Range percentile_range_of(const TensorStats& s, double percentile, bool symmetric) {
  return symmetric ? percentile_range_symmetric(s.histogram, percentile, s.minmax.min, s.minmax.max)
                   : percentile_range(s.histogram, percentile);
}

TensorRange range_of(const TensorStats& s, const MethodSettings& settings) {
  const MinMaxStats& m = s.minmax;
  TensorRange r;
  switch (settings.options.method) {
    case Method::MinMax:
    case Method::NonOverflow: {
      Range x =
          settings.options.moving_average ? m.moving_average(settings.options.averaging_constant) : Range{m.min, m.max};
      if (settings.symmetric) {
        double a = std::max(std::fabs(x.lo), std::fabs(x.hi));
        x = {-a, a};
      }
      if (settings.options.method == Method::MinMax) return bounds(x.lo, x.hi);
      return pof2_range(qmath::pof2_non_overflow_pos(x.lo, x.hi, settings.qrange, settings.options.activation_type,
                                                     settings.symmetric),
                        x.lo, x.hi, settings);
    }
    case Method::MinMSE: {
      if (settings.options.minmse_mode == "All") return pof2_range(s.chosen_pos, m.min, m.max, settings);
      // The most frequent position; ties go to the largest (the finest scale).
      std::map<int, size_t> counts;
      for (const auto& [sample, pos] : s.best_pos) ++counts[pos];
      auto best = counts.begin();
      for (auto it = counts.begin(); it != counts.end(); ++it)
        if (it->second >= best->second) best = it;
      return pof2_range(best->first, m.min, m.max, settings);
    }
    case Method::Entropy: {
      if (m.max_abs == 0) return bounds(0, 0);
      Range x = entropy_range(s.histogram, settings.options.num_quantized_bins, m.min, m.max);
      return bounds(x.lo, x.hi);
    }
    case Method::Percentile: {
      if (m.max_abs == 0 || m.min == m.max) return bounds(m.min, m.max);
      Range x = percentile_range_of(s, settings.options.percentile, settings.symmetric);
      return bounds(x.lo, x.hi);
    }
    case Method::LayerWisePercentile: {
      if (m.max_abs == 0 || m.min == m.max) return bounds(m.min, m.max);
      Range x = s.percentile_ranges.at(s.chosen);
      return bounds(x.lo, x.hi);
    }
    case Method::Distribution: {
      if (m.max_abs == 0) return bounds(0, 0);
      auto [mean, std] = histogram_mean_std(s.histogram, settings.options.scenario == "p3");
      r.lo = s.histogram.lo();
      r.hi = s.histogram.hi();
      r.mean = mean;
      r.std = std;
      return r;
    }
  }
  return r;
}

}  // namespace onnxptq::calib
