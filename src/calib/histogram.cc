#include "calib/histogram.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "onnxptq/error.h"

namespace onnxptq::calib {

Histogram::Histogram(double lo, double hi, size_t bins) : lo_(lo), hi_(hi), counts_(bins, 0) {
  if (bins == 0) throw Error("a histogram needs at least one bin");
  if (!(hi >= lo)) throw Error("histogram range is empty");
}

void Histogram::merge(const Histogram& other) {
  if (other.counts_.size() != counts_.size() || other.lo_ != lo_ || other.hi_ != hi_)
    throw Error("histograms over different bins cannot be merged");
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

void Histogram::add_count(double value, uint64_t count) {
  if (!std::isfinite(value)) return;
  const size_t bins = counts_.size();
  double position =
      hi_ <= lo_ ? static_cast<double>(bins / 2) : (value - lo_) * static_cast<double>(bins) / (hi_ - lo_);
  position = std::clamp(position, 0.0, static_cast<double>(bins - 1));
  counts_[static_cast<size_t>(position)] += count;
}

uint64_t Histogram::total() const { return std::accumulate(counts_.begin(), counts_.end(), uint64_t{0}); }

}  // namespace onnxptq::calib
