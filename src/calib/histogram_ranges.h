// What the Percentile and Distribution methods read off a histogram: a percentile range, and the
// mean and standard deviation.
#pragma once

#include <utility>

#include "calib/histogram.h"
#include "calib/range.h"

namespace onnxptq::calib {

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
