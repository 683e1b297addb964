#include "calib/histogram_ranges.h"

#include <algorithm>
#include <cmath>

#include "onnxptq/error.h"

namespace onnxptq::calib {

Range percentile_range_symmetric(const Histogram& abs_hist, double percentile, double observed_min,
                                 double observed_max) {
  if (!(percentile >= 0 && percentile <= 100)) throw Error("percentile must be within [0, 100]");
  double total = static_cast<double>(abs_hist.total());
  double threshold = abs_hist.hi();
  double cumulative = 0;
  for (size_t i = 0; i < abs_hist.bins() && total > 0; ++i) {
    cumulative += static_cast<double>(abs_hist.counts()[i]);
    if (cumulative / total >= percentile / 100) {
      threshold = abs_hist.edge(i + 1);
      break;
    }
  }
  return {std::max(-threshold, observed_min), std::min(threshold, observed_max)};
}

Range percentile_range(const Histogram& h, double percentile) {
  if (!(percentile >= 0 && percentile <= 100)) throw Error("percentile must be within [0, 100]");
  double total = static_cast<double>(h.total());
  double cut = (100 - percentile) / 200;
  Range r{h.lo(), h.hi()};
  if (total == 0) return r;
  double cumulative = 0;
  bool low_found = false;
  for (size_t i = 0; i < h.bins(); ++i) {
    cumulative += static_cast<double>(h.counts()[i]);
    double share = cumulative / total;
    if (!low_found && share > cut) {
      r.lo = h.edge(i);
      low_found = true;
    }
    if (share >= 1 - cut) {
      r.hi = h.edge(i + 1);
      break;
    }
  }
  return r;
}

std::pair<double, double> histogram_mean_std(const Histogram& h, bool cube_root) {
  double n = 0, sum = 0, sum_sq = 0;
  for (size_t i = 0; i < h.bins(); ++i) {
    double c = static_cast<double>(h.counts()[i]);
    double v = (h.edge(i) + h.edge(i + 1)) / 2;
    if (cube_root) v = std::cbrt(v);
    n += c;
    sum += c * v;
    sum_sq += c * v * v;
  }
  if (n == 0) return {0, 0};
  double mean = sum / n;
  return {mean, std::sqrt(std::max(sum_sq / n - mean * mean, 0.0))};
}

}  // namespace onnxptq::calib
