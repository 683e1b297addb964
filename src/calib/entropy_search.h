// The Entropy method's threshold: the window of a histogram whose quantization diverges least
// from the data.
#pragma once

#include <cstddef>
#include <vector>

#include "calib/histogram.h"
#include "calib/range.h"

namespace onnxptq::calib {

// The KL-divergence threshold search (TensorRT's algorithm): `h` is a histogram over [-t, t]
// with an even number of bins; candidate windows [-edge, edge] from `quantized_bins` bins up to
// the whole histogram; the one whose `quantized_bins`-level quantization diverges least from
// the data wins (the first on ties). Clamped to the observed [min, max].
Range entropy_range(const Histogram& h, size_t quantized_bins, double observed_min, double observed_max);
// The divergence of each candidate window, from quantized_bins / 2 bins each side of the middle
// (at least 1) to the whole histogram (infinite where smoothing cannot make q a distribution):
// what entropy_range takes the least of.
std::vector<double> entropy_divergences(const Histogram& h, size_t quantized_bins);

}  // namespace onnxptq::calib
