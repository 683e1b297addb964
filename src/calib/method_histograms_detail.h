// The histograms of the histogram methods (Entropy, Percentile, Distribution,
// LayerWisePercentile): of x or of |x|, how much of a grid's tail is kept exact, the counts over
// the range each method reads them on, and a count in full where the tail was not enough.
#pragma once

#include <cstddef>
#include <vector>

#include "calib/sample_passes_detail.h"
#include "calib/tensor_stats_detail.h"

namespace onnxptq::calib {

// Whether the histogram methods count |x| (symmetric percentiles) rather than x.
bool abs_histograms(const MethodSettings& settings);

// The lowest percentile read from the histograms of |x| (symmetric Percentile's, or
// LayerWisePercentile's smallest candidate); 0 for the other methods.
double lowest_percentile(const MethodSettings& settings);

// The share of values a grid keeps exact (GridHistogram's tail_share); `can_rewind`: whether a
// second pass may count in full should the percentile fall below the floor.
double tail_share(const MethodSettings& settings, bool can_rewind);

// Each tensor's grid counts on num_bins bins over the range its method reads them on.
void rebin_histograms(std::vector<TensorStats>& merged, const MethodSettings& settings);

// Counts the values of the tensors `which` again over every sample, every value this time.
void recount_histograms(SamplePasses& passes, std::vector<TensorStats>& merged, const std::vector<size_t>& which,
                        const MethodSettings& settings);

}  // namespace onnxptq::calib
