// The methods that score candidates on the data: MinMSE (power-of-two positions around the
// NonOverflow one: "All" over every sample, "MostCommon" per sample) and LayerWisePercentile
// (the range of each candidate percentile). Their errors are summed exactly (ExactSum), so they
// come out the same over any split of the samples.
#pragma once

#include <cstddef>
#include <vector>

#include "calib/range.h"
#include "calib/sample_passes_detail.h"
#include "calib/tensor_stats_detail.h"
#include "engine/extrema.h"

namespace onnxptq::calib {

// Why early_minmse_errors leaves a tensor to the second pass.
inline constexpr const char* kSecondPassWhy =
    "a range that outgrew the positions scored on earlier samples, NaN or infinities, a zero point that moved "
    "with the range, or computed twice in a sample";

// MinMSE "All", first pass (one worker, symmetric ranges): adds this sample's squared errors at
// the positions a final candidate may take to s.early. `can_rewind`: whether a second pass may
// score the earlier samples at positions the range outgrows.
void early_minmse_errors(TensorStats& s, size_t sample, const float* x, size_t n, engine::Extrema extrema,
                         const MethodSettings& settings, bool can_rewind);

// MinMSE "MostCommon": one sample's own search, from its own extrema.
int sample_best_pos(const Range& r, const float* x, size_t n, const MethodSettings& settings);

// The candidates of MinMSE "All" (around the final extrema's position) and LayerWisePercentile
// (one per percentile), with what the first pass summed of their errors and the samples it
// did not score, of the `samples` read.
void set_candidates(TensorStats& t, const MethodSettings& settings, size_t samples);

// The last pass of MinMSE "All" and LayerWisePercentile, over the first `limit` samples: each
// tensor's candidates are scored on the samples they miss.
void score_candidates(SamplePasses& passes, std::vector<TensorStats>& merged, size_t limit,
                      const MethodSettings& settings);

// The candidate with the least error sum (the first on ties: for MinMSE the coarsest position),
// of those that do not repeat an earlier one (scored in no pass).
void choose_candidate(TensorStats& t);

}  // namespace onnxptq::calib
