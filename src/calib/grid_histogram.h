// The histogram the histogram methods count in their first pass, exact whatever the order of the
// samples and however they are split over workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "calib/histogram.h"

namespace onnxptq::calib {

class StatsReader;
class StatsWriter;

// A histogram taken in one pass, before the range it will be read over is known: counts on a
// grid of bins 2^k wide with an edge at 0, at the finest k where the largest |x| seen fits in
// the grid's bins. A larger value doubles the width as often as needed, adding up neighbouring
// bins, which is exact: the counts depend on the values and their largest magnitude, not on the
// order or on how samples are split over workers. The grid has at least 2x `bins` bins over
// [-max|x|, max|x|] (of x) or [0, max|x|] (of |x|), so rebinned to `bins` bins over that range,
// a value moves at most half a grid bin, a quarter of a bin, from where a second pass over the
// final range would count it.
//
// A grid of |x| may keep only the tail exact (`tail_share` < 1, for a high percentile): after
// each add, the bins below a floor are added up into one count, the floor as high as leaves at
// least that share of the values seen above it; values below the floor are then only counted
// together, which skips most of the per-value work. The counts above the floor are exact, so
// whatever is read from them (a percentile above the floor) is what a full grid would give.
class GridHistogram {
 public:
  static constexpr size_t kMaxBins = size_t{1} << 20;  // of the histogram it is rebinned to

  GridHistogram() = default;
  GridHistogram(size_t bins, bool abs, double tail_share = 1);
  // `max_abs`: the largest finite |x| in `data` (the caller has it from the extrema), and
  // `all_finite` when it knows there is no NaN or infinity (a cheaper count).
  void add(const float* data, size_t n, double max_abs, int threads = 1, bool all_finite = false);
  void merge(const GridHistogram& other);
  bool empty() const { return counts_.empty(); }
  double width() const;
  // The counts on `bins` equal bins over [lo, hi]: each grid bin whole in the bin that holds
  // its centre (the end bins beyond the ends).
  Histogram rebin(double lo, double hi, size_t bins) const;
  // How many values are counted only together, below the floor (rebin puts them in the bin of
  // the centre of the grid bin under the floor, below every bin that has a count of its own).
  uint64_t below_floor() const { return below_; }
  // Its bytes (stats_bytes.h): the counts from the first to the last that is not 0. read checks
  // the grid's shape (bins a power of two up to kMaxBins' grid, the floor within it).
  void write(StatsWriter& out) const;
  static GridHistogram read(StatsReader& in);

 private:
  void widen(int k);               // to bins 2^k wide
  void fold_below(int64_t floor);  // raises the floor to `floor`
  void raise_floor();              // as high as tail_share allows

  bool abs_ = false;
  int64_t limit_ = 0;  // grid bins j with -limit <= j < limit (x), 0 <= j < limit (|x|)
  int k_ = 0;
  std::vector<uint64_t> counts_;  // bin j at j + limit (x) or j (|x|); empty before any value
  double tail_share_ = 1;
  int64_t floor_ = 0;  // |x| grids: bins below it are counted in below_ alone
  uint64_t below_ = 0;
};

}  // namespace onnxptq::calib
