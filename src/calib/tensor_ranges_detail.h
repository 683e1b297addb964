// From a tensor's statistics to its range, by each calibration method.
#pragma once

#include "calib/calibrate.h"
#include "calib/range.h"
#include "calib/tensor_stats_detail.h"

namespace onnxptq::calib {

// The range of `percentile` in the tensor's histogram: of |x| when `symmetric`, of x on each side
// otherwise.
Range percentile_range_of(const TensorStats& s, double percentile, bool symmetric);

// The tensor's range by the method of `settings`, from the statistics of every sample merged (and,
// for MinMSE "All" and LayerWisePercentile, the candidate chosen). Not for a tensor without a
// finite value.
TensorRange range_of(const TensorStats& s, const MethodSettings& settings);

}  // namespace onnxptq::calib
