// The extrema calibration keeps of a tensor: mergeable in any order (a minimum and a maximum),
// with each sample's own by sample index for the moving average.
#pragma once

#include <cstddef>
#include <limits>
#include <map>

#include "calib/range.h"
#include "engine/extrema.h"

namespace onnxptq::calib {

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

}  // namespace onnxptq::calib
