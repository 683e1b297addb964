// Calibration: runs the float model over calibration samples with the engine, reduces each
// chosen tensor to statistics as soon as it is produced, and turns them into a range per tensor
// with one of the seeds' methods. Memory does not depend on the number of samples (beyond a few
// numbers per sample and tensor), and the ranges do not depend on the number of workers.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "onnxptq/progress.h"
#include "onnxptq/sample_ranks.h"

namespace onnxptq::calib {

enum class Method {
  MinMax,               // extrema (optionally their moving average)
  Entropy,              // KL-divergence threshold on a histogram of x over [-t, t]
  Percentile,           // a percentile of |x| (symmetric) or of x on each side
  Distribution,         // mean and standard deviation of x (float8 scales)
  NonOverflow,          // the finest power-of-two scale whose range holds the extrema
  MinMSE,               // power-of-two scale with the least squared error
  LayerWisePercentile,  // per tensor, the candidate percentile whose range quantizes with least error
};

// "MinMax", "Entropy", "Percentile", "Distribution", "NonOverflow", "MinMSE",
// "LayerWisePercentile" (the seeds' enum member names); Error naming the known ones otherwise.
Method parse_method(const std::string& name);
const char* method_name(Method method);
bool is_power_of_two(Method method);

struct CalibOptions {
  Method method = Method::MinMax;
  // CalibTensorRangeSymmetric. Unset: the method's default (power-of-two methods and
  // Percentile: true; the others: false).
  std::optional<bool> symmetric;
  bool moving_average = false;       // CalibMovingAverage (MinMax, NonOverflow)
  double averaging_constant = 0.01;  // CalibMovingAverageConstant
  // Histogram bins; 0: the method's default, the seeds' (ORT's and Quark's): 128 for Entropy
  // (whose threshold search with 128 quantized bins then has one candidate, the whole range, and
  // gives MinMax's range), 2048 for the others. calib_histogram_bins resolves it.
  size_t num_bins = 0;
  size_t num_quantized_bins = 128;  // Entropy
  double percentile = 99.999;       // CalibPercentile
  // LayerWisePercentile: the percentiles tried (Quark's defaults) and the error compared:
  // "mae" (mean absolute) or "mse" (mean squared) of quantizing with each one's range.
  std::vector<double> percentile_candidates = {99.99, 99.999, 99.99999};
  std::string lwp_metric = "mae";
  std::string scenario = "same";    // Distribution: "same" or "p3"
  std::string minmse_mode = "All";  // MinMSE: "All" or "MostCommon"
  // The activation type the power-of-two methods and LayerWisePercentile quantize to.
  ir::DataType activation_type = ir::DataType::Int8;
  size_t max_samples = 0;  // 0: every sample the reader gives
  int threads = 0;         // engine threads in all (0: every hardware thread)
  // Samples run at once, each on threads / workers threads. 0: as many as there are threads, up
  // to 4 (each worker holds one sample's tensors; one for MinMSE "All" with symmetric ranges,
  // whose first pass scores its positions only on one worker, and for LayerWisePercentile). 1 is
  // CalibWorkerNum's default.
  int workers = 1;
  bool strict = false;  // a sample with NaN or Inf fails the run instead of being skipped
  // Progress and warnings (a pass starting, a sample skipped); default: nothing.
  std::function<void(const std::string&)> log;
  // Items done of the long phases (samples here; layers and trials above, which get it with the
  // rest of these options); default: nothing.
  ProgressFunction progress;
  // Data parallelism (onnxptq/sample_ranks.h): this process runs its contiguous share of the
  // samples, and after each pass the ranks' statistics are merged as the workers' are. Null (or
  // one rank): every sample here.
  std::shared_ptr<SampleRanks> ranks;
  // A shard run apart (calibrate --shard i/N --save-stats): share `shard` of `shards`, whose
  // statistics the result holds (shard_stats) instead of ranges, for merge_shard_stats.
  // 0 shards: not a shard. MinMSE "All" and LayerWisePercentile score their candidates in a
  // second pass over the first merged: a shard runs the first pass, or, given `first_pass`
  // (merge_first_pass_shards of every shard's first pass), its second.
  size_t shard = 0, shards = 0;
  std::string first_pass;
};

// Whether `o` reads the data a second time after merging the first pass (MinMSE "All",
// LayerWisePercentile): shards run apart then run twice.
bool needs_merged_second_pass(const CalibOptions& o);

// The histogram bins `options` asks for, its method's default when num_bins is 0.
size_t calib_histogram_bins(const CalibOptions& options);

// Whether `o` calibrates symmetric ranges (-m, m): CalibTensorRangeSymmetric, or by default the
// power-of-two methods and the percentile ones (as vai_q_onnx and ORT set their calibrators).
bool ranges_symmetric(const CalibOptions& o);

struct TensorRange {
  double lo = 0;
  double hi = 0;
  // Power-of-two methods: the position p of the scale 2^-p; [lo, hi] is then exactly what
  // that scale and its zero point represent.
  std::optional<int> pos;
  // Distribution only: the mean and standard deviation.
  double mean = 0;
  double std = 0;
};

struct CalibrationResult {
  std::map<std::string, TensorRange> ranges;
  size_t samples = 0;                       // samples used
  std::vector<size_t> skipped;              // indices of samples skipped for NaN or Inf
  std::vector<std::string> non_finite;      // tensors computed, but never to a finite value: no range
  std::vector<std::string> never_computed;  // tensors no sample computed (in a body none ran): no range
  int passes = 0;                           // times the data was read
  std::vector<size_t> rank_samples;         // over ranks: the samples each one read, in rank order
  std::string shard_stats;                  // a shard's statistics (CalibOptions::shards)
};

// Calibrates `tensors` of `model`. The reader must rewind for methods that read the data twice
// (LayerWisePercentile and MinMSE "All" score their candidates once the range is known, MinMSE
// "All" with one worker and symmetric ranges only on the samples its first pass could not).
// Error for a tensor the model does not have, a sample that does not fit the model (naming the
// sample), no usable sample.
CalibrationResult calibrate(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
                            const CalibOptions& options);

// The first pass of every shard (CalibrationResult::shard_stats, in shard order, `what` naming
// each in messages) merged, as the bytes of CalibOptions::first_pass, for the shards' second pass.
std::string merge_first_pass_shards(const std::vector<std::string>& shards, const std::vector<std::string>& what,
                                    const std::vector<std::string>& tensors);

// The ranges of `tensors` from the statistics of every shard (CalibrationResult::shard_stats,
// in shard order), merged as calibrate merges its workers: what calibrate gives on all the
// samples. MinMSE "All" and LayerWisePercentile: the shards' second passes, with their merged
// first pass in options.first_pass. Error naming the shard whose bytes are corrupt.
CalibrationResult merge_shard_stats(const std::vector<std::string>& shards, const std::vector<std::string>& what,
                                    const std::vector<std::string>& tensors, const CalibOptions& options);

// The options that decide the statistics and ranges (not threads, workers, logs or ranks), as
// JSON for a shard file, and back (Error naming a key missing or of the wrong kind).
std::string calib_options_json(const CalibOptions& options);
CalibOptions calib_options_from_json(const std::string& json);

}  // namespace onnxptq::calib
