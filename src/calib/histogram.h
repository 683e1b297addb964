// A histogram on equal bins over a known range: what the histogram methods read (rebinned from
// a GridHistogram), with numpy's binning. Counts only, so merging two is a sum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnxptq::calib {

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

}  // namespace onnxptq::calib
