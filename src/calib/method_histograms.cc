#include <algorithm>

#include "calib/grid_histogram.h"
#include "calib/method_histograms_detail.h"
#include "calib/min_max_stats.h"

namespace onnxptq::calib {

namespace {

// How many times the share of values above the lowest percentile a grid keeps exact.
constexpr double kTailMargin = 100;

}  // namespace

bool abs_histograms(const MethodSettings& settings) {
  return settings.symmetric &&
         (settings.options.method == Method::Percentile || settings.options.method == Method::LayerWisePercentile);
}

double lowest_percentile(const MethodSettings& settings) {
  if (!abs_histograms(settings)) return 0;
  if (settings.options.method == Method::Percentile) return settings.options.percentile;
  return *std::min_element(settings.options.percentile_candidates.begin(),
                           settings.options.percentile_candidates.end());
}

// Percentiles of |x| need only the tail of each grid exact: 100 times the share of values
// above the lowest percentile (GridHistogram's floor), when a second pass can count in full
// should the percentile fall below it.
double tail_share(const MethodSettings& settings, bool can_rewind) {
  if (lowest_percentile(settings) == 0 || !can_rewind) return 1;
  const double share = (100 - lowest_percentile(settings)) / 100 * kTailMargin;
  return share > 0 && share < 1 ? share : 1;
}

void rebin_histograms(std::vector<TensorStats>& merged, const MethodSettings& settings) {
  const bool percentile =
      settings.options.method == Method::Percentile || settings.options.method == Method::LayerWisePercentile;
  for (TensorStats& t : merged) {
    const MinMaxStats& m = t.minmax;
    if (m.empty()) continue;
    if (abs_histograms(settings)) {
      t.histogram = t.grid.rebin(0, m.max_abs, settings.bins);
      t.below_floor = t.grid.below_floor();
    } else if (percentile)
      t.histogram = t.grid.rebin(m.min, m.max, settings.bins);
    else
      t.histogram = t.grid.rebin(-m.max_abs, m.max_abs, settings.bins);
    t.grid = GridHistogram();
  }
}

void recount_histograms(SamplePasses& passes, std::vector<TensorStats>& merged, const std::vector<size_t>& which,
                        const MethodSettings& settings) {
  std::vector<char> wanted(merged.size(), 0);
  for (size_t i : which) wanted[i] = 1;
  const GridHistogram full(settings.bins, true);
  passes.run(false, [&](TensorStats& s, size_t i, size_t, const float* x, size_t n, engine::Extrema) {
    if (!wanted[i]) return;
    if (s.grid.empty()) s.grid = full;
    s.grid.add(x, n, merged[i].minmax.max_abs, settings.threads);
  });
  for (size_t i : which) {
    GridHistogram grid;
    for (auto& w : passes.workers()) grid.merge(w[i].grid);
    merged[i].histogram = grid.rebin(0, merged[i].minmax.max_abs, settings.bins);
    merged[i].below_floor = 0;
  }
}

}  // namespace onnxptq::calib
