// What calibration keeps of each calibrated tensor on each worker, and the options its methods
// read it with: shared by the passes (calibrate.cc, sample_passes.cc), the candidate search of
// MinMSE and LayerWisePercentile (candidate_search.cc) and the ranges (tensor_ranges.cc).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "calib/calibrate.h"
#include "calib/exact_sum.h"
#include "calib/grid_histogram.h"
#include "calib/histogram.h"
#include "calib/min_max_stats.h"
#include "calib/range.h"
#include "qmath/quantize.h"

namespace onnxptq::calib {

// One quantization to try: scale, zero point, and the integer range values are clipped to.
struct Candidate {
  double scale = 1;
  int64_t zero_point = 0;
  qmath::QRange clip;
};

// What one worker keeps of one tensor. Everything summed across samples is exact (extrema,
// integer counts, ExactSum) or kept per sample and combined in sample order at the end, so the
// result is the same for any number of workers.
struct TensorStats {
  bool seen = false;  // computed at all (minmax stays empty when every value is NaN or infinite)
  MinMaxStats minmax;
  GridHistogram grid;        // histogram methods: counts of the first pass
  Histogram histogram;       // the same counts over the range the method reads them on
  uint64_t below_floor = 0;  // of those counts, how many are below the grid's floor (counted together)
  // MinMSE "All" and LayerWisePercentile: the candidates, the sum of each one's error (squared
  // errors of the power-of-two positions, or the metric of each percentile's range) over every
  // sample, exact so that it comes out the same in any order, and the samples the last pass must
  // still add (candidate c: those before missing_before[c]).
  std::vector<Candidate> candidates;
  std::vector<ExactSum> error_sums;
  std::vector<size_t> missing_before;
  std::map<size_t, int> best_pos;        // MinMSE "MostCommon": each sample's own best position
  int chosen_pos = 0;                    // MinMSE "All": the best position over every sample
  std::vector<Range> percentile_ranges;  // LayerWisePercentile: one per candidate percentile
  size_t chosen = 0;                     // LayerWisePercentile: the candidate with the least error
  // MinMSE "All" in the first pass (one worker, symmetric ranges): each sample's squared errors
  // at its own zero position and around the candidates of the range seen so far, summed per
  // position (early_minmse_errors).
  struct {
    bool usable = true;
    size_t samples = 0, last_sample = SIZE_MAX;
    int64_t zero_point = 0;
    std::map<int, ExactSum> total;         // by position
    std::map<int, size_t> missing_before;  // by position: the first sample that tried it, if not the first
    // At a position where all of a sample's values round to 0, its error is its sum of squares,
    // whatever the position: their sum, and the finest position where that holds for every
    // sample so far, fill in the positions no sample tried.
    ExactSum zero_total;
    int zero_pos = INT_MAX;
    int finest_zero_pos = INT_MIN;  // of the samples with a value other than 0: their spread
  } early;
};

class StatsReader;
class StatsWriter;

// Adds what a worker kept of one tensor to what `into` holds: the merge of the threads' statistics,
// and of the ranks' (each rank one more worker). Exact, so the order does not matter; `from`'s
// grid is moved.
void merge_worker_stats(TensorStats& into, TensorStats& from);

// The first pass's statistics of every worker, merged (each tensor's workers in order).
std::vector<TensorStats> merge_workers(std::vector<std::vector<TensorStats>>& workers, size_t tensors);

// What a rank (or a shard) ran of one pass: how many samples it read, those it skipped (NaN or
// Inf) and its workers' statistics merged. As bytes (stats_bytes.h), only what a pass fills in
// (seen, extrema, per-sample extrema and MinMSE positions, grid histograms, error sums); the rest
// is derived from these after the merge, on every rank alike.
struct ShareStats {
  size_t samples = 0;
  std::vector<size_t> skipped;
  std::vector<TensorStats> stats;
};
void write_share_stats(const ShareStats& share, StatsWriter& out);
// Error naming `in`'s bytes when they do not hold `tensors` tensors' statistics.
ShareStats read_share_stats(StatsReader& in, size_t tensors);

// The options of one calibration as its methods read them.
struct MethodSettings {
  const CalibOptions& options;
  bool symmetric = false;  // ranges_symmetric(options)
  size_t bins = 0;         // calib_histogram_bins(options)
  qmath::QRange qrange;    // the power-of-two methods' integer range
  int threads = 1;         // engine threads of each worker, also used to reduce a tensor
};

}  // namespace onnxptq::calib
