// What calibration keeps of a tensor: running extrema, histograms (counts only, on bins that
// depend on neither the order nor the number of samples, so merging them is a sum), and squared
// errors per candidate power-of-two position. Each is mergeable, so samples can be split over
// workers and merged at the end.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "engine/extrema.h"
#include "engine/parallel.h"

namespace onnxptq::calib {

struct Range {
  double lo = 0;
  double hi = 0;
};

// Reductions of one tensor are split over threads in blocks of a fixed size, whatever the
// thread count, and per-block results are combined in block order: a floating-point sum comes
// out the same with any number of threads.
inline constexpr size_t kReduceBlock = size_t{1} << 15;

// fn(values, count) on each block of `data`, on up to `threads` threads; the results in block order.
template <class T, class F>
std::vector<T> reduce_blocks(int threads, const float* data, size_t n, F&& fn) {
  std::vector<T> out((n + kReduceBlock - 1) / kReduceBlock);
  engine::parallel_for(threads, static_cast<int64_t>(out.size()), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      size_t start = static_cast<size_t>(b) * kReduceBlock;
      out[static_cast<size_t>(b)] = fn(data + start, std::min(kReduceBlock, n - start));
    }
  });
  return out;
}

// Extrema of one tensor over every sample, and each sample's own extrema (by sample index, for
// the moving average, which must come out the same whatever the number of workers).
struct MinMaxStats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double max_abs = 0;
  std::map<size_t, Range> per_sample;  // filled when keep_per_sample

  // The finite extrema of a sample's values (engine/extrema.h: NaN and infinities are the
  // caller's to report).
  void add(size_t sample, engine::Extrema extrema, bool keep_per_sample);
  void merge(const MinMaxStats& other);
  bool empty() const { return min > max; }
  // The exponential moving average of the per-sample extrema in sample order, starting from the
  // first sample: r <- r + constant * (sample - r).
  Range moving_average(double constant) const;
};

// Counts of values in `bins` equal bins over [lo, hi]; values outside land in the end bins.
class Histogram {
 public:
  Histogram() = default;
  Histogram(double lo, double hi, size_t bins);
  // `count` more values equal to `value`, in numpy's bin (x - lo) * bins / (hi - lo) (clamped;
  // a constant histogram, hi <= lo: the middle bin). Not NaN or infinities.
  void add_count(double value, uint64_t count);
  void merge(const Histogram& other);

  double lo() const { return lo_; }
  double hi() const { return hi_; }
  size_t bins() const { return counts_.size(); }
  double edge(size_t i) const { return lo_ + (hi_ - lo_) * static_cast<double>(i) / static_cast<double>(bins()); }
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t total() const;

 private:
  double lo_ = 0, hi_ = 0;
  std::vector<uint64_t> counts_;
};

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

 private:
  void widen(int k);  // to bins 2^k wide
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

// A sum of non-negative doubles held exactly, as an integer number of 2^-1074 (the smallest
// double's step): adding is then associative, so the sum is the same in any order and however the
// terms are split over workers and passes. A NaN or infinite term makes the sum NaN or infinite.
class ExactSum {
 public:
  void add(double v);
  void merge(const ExactSum& other);
  double value() const;  // the sum, rounded to nearest

 private:
  void carry();
  // 32-bit digits in 64-bit words, digit i worth 2^(32 i - 1074): 1024 + 1074 bits of doubles
  // and 64 of headroom. A word takes less than 2^33 an addition: carried every 2^30 additions.
  static constexpr size_t kDigits = 68;
  std::vector<uint64_t> digits_;  // empty while the sum is 0
  uint32_t uncarried_ = 0;
  bool nan_ = false, infinite_ = false;
};

// The KL-divergence threshold search (TensorRT's algorithm): `h` is a histogram over [-t, t]
// with an even number of bins; candidate windows [-edge, edge] from `quantized_bins` bins up to
// the whole histogram; the one whose `quantized_bins`-level quantization diverges least from
// the data wins (the first on ties). Clamped to the observed [min, max].
Range entropy_range(const Histogram& h, size_t quantized_bins, double observed_min, double observed_max);
// The divergence of each candidate window, from quantized_bins / 2 bins each side of the middle
// (at least 1) to the whole histogram (infinite where smoothing cannot make q a distribution):
// what entropy_range takes the least of.
std::vector<double> entropy_divergences(const Histogram& h, size_t quantized_bins);

// The value below which `percentile` % of |x| lies, from a histogram of |x| over [0, max|x|]:
// (-v, v) clamped to the observed [min, max]. The right edge of the bin where the cumulative
// share reaches the percentile, so at least that share is inside.
Range percentile_range_symmetric(const Histogram& abs_hist, double percentile, double observed_min,
                                 double observed_max);
// The same on each side, from a histogram of x over [min, max]: (100 - percentile) / 2 % cut
// from each end.
Range percentile_range(const Histogram& h, double percentile);

// Mean and standard deviation from the bin centres (the Distribution method; "p3" maps each
// centre v to sign(v)|v|^(1/3) first).
std::pair<double, double> histogram_mean_std(const Histogram& h, bool cube_root);

}  // namespace onnxptq::calib
