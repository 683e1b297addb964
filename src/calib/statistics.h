// What calibration keeps of a tensor: running extrema, fixed-bin histograms (counts only, so
// merging them is a sum and the result depends neither on the order nor on the number of
// samples), and squared errors per candidate power-of-two position. Each is mergeable, so
// samples can be split over workers and merged at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace onnxptq::calib {

struct Range {
  double lo = 0;
  double hi = 0;
};

// Extrema of one tensor over every sample, and each sample's own extrema (by sample index, for
// the moving average, which must come out the same whatever the number of workers).
struct MinMaxStats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double max_abs = 0;
  std::map<size_t, Range> per_sample;  // filled when keep_per_sample

  // NaN and infinities are the caller's to report; they are skipped here.
  void add(size_t sample, const float* data, size_t n, bool keep_per_sample);
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
  void add(const float* data, size_t n);
  // Histogram of |x| (lo must be 0).
  void add_abs(const float* data, size_t n);
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

// The KL-divergence threshold search (TensorRT's algorithm): `h` is a histogram over [-t, t]
// with an even number of bins; candidate windows [-edge, edge] from `quantized_bins` bins up to
// the whole histogram; the one whose `quantized_bins`-level quantization diverges least from
// the data wins (the first on ties). Clamped to the observed [min, max].
Range entropy_range(const Histogram& h, size_t quantized_bins, double observed_min, double observed_max);

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
