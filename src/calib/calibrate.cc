#include "calib/calibrate.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calib/candidate_search_detail.h"
#include "calib/grid_histogram.h"
#include "calib/method_histograms_detail.h"
#include "calib/sample_passes_detail.h"
#include "calib/stats_bytes.h"
#include "calib/tensor_ranges_detail.h"
#include "calib/tensor_stats_detail.h"
#include "engine/parallel.h"
#include "onnxptq/error.h"
#include "qmath/params.h"

namespace onnxptq::calib {

namespace {

constexpr std::array<std::pair<Method, const char*>, 7> kMethods = {{
    {Method::MinMax, "MinMax"},
    {Method::Entropy, "Entropy"},
    {Method::Percentile, "Percentile"},
    {Method::Distribution, "Distribution"},
    {Method::NonOverflow, "NonOverflow"},
    {Method::MinMSE, "MinMSE"},
    {Method::LayerWisePercentile, "LayerWisePercentile"},
}};

}  // namespace

Method parse_method(const std::string& name) {
  for (const auto& [method, text] : kMethods)
    if (name == text) return method;
  std::string known;
  for (const auto& [method, text] : kMethods) known += (known.empty() ? "" : ", ") + std::string(text);
  throw Error("unknown calibration method '" + name + "' (known: " + known + ")");
}

const char* method_name(Method method) {
  for (const auto& [m, text] : kMethods)
    if (m == method) return text;
  return "?";
}

bool is_power_of_two(Method method) { return method == Method::NonOverflow || method == Method::MinMSE; }

size_t calib_histogram_bins(const CalibOptions& o) {
  if (o.num_bins > 0) return o.num_bins;
  return o.method == Method::Entropy ? 128 : 2048;
}

bool needs_merged_second_pass(const CalibOptions& o) {
  return (o.method == Method::MinMSE && o.minmse_mode == "All") || o.method == Method::LayerWisePercentile;
}

bool ranges_symmetric(const CalibOptions& o) {
  if (o.symmetric) return *o.symmetric;
  return is_power_of_two(o.method) || o.method == Method::Percentile || o.method == Method::LayerWisePercentile;
}

namespace {

// Checks the method's options and completes `settings` (the power-of-two range): Error naming
// an option out of its range.
void check_method_options(const CalibOptions& options, MethodSettings& settings) {
  if (options.method == Method::Entropy &&
      (settings.bins < 2 || settings.bins % 2 != 0 || options.num_quantized_bins < 1 ||
       options.num_quantized_bins > settings.bins))
    throw Error("Entropy needs an even number of bins (got " + std::to_string(settings.bins) +
                ") and 1 <= quantized bins <= bins (got " + std::to_string(options.num_quantized_bins) + ")");
  if (settings.bins > GridHistogram::kMaxBins)
    throw Error("calibration: the number of histogram bins must be within [1, " +
                std::to_string(GridHistogram::kMaxBins) + "], got " + std::to_string(settings.bins));
  if (options.method == Method::Percentile && !(options.percentile >= 0 && options.percentile <= 100))
    throw Error("CalibPercentile must be in [0, 100], got " + std::to_string(options.percentile));
  if (options.method == Method::LayerWisePercentile) {
    if (options.percentile_candidates.empty())
      throw Error("LayerWisePercentile needs at least one candidate percentile");
    for (double p : options.percentile_candidates)
      if (!(p >= 0 && p <= 100)) throw Error("candidate percentiles must be in [0, 100], got " + std::to_string(p));
    if (options.lwp_metric != "mae" && options.lwp_metric != "mse")
      throw Error("LayerWisePercentile metric must be 'mae' or 'mse', got '" + options.lwp_metric + "'");
  }
  if (options.method == Method::Distribution && options.scenario != "same" && options.scenario != "p3")
    throw Error("Distribution scenario must be 'same' or 'p3', got '" + options.scenario + "'");
  if (options.method == Method::MinMSE && options.minmse_mode != "All" && options.minmse_mode != "MostCommon")
    throw Error("MinMSEMode must be 'All' or 'MostCommon', got '" + options.minmse_mode + "'");
  if (options.method == Method::MinMSE && options.minmse_mode == "MostCommon" && !settings.symmetric)
    throw Error("MinMSEMode 'MostCommon' needs a symmetric range (CalibTensorRangeSymmetric)");
  if (options.moving_average && options.method != Method::MinMax && options.method != Method::NonOverflow)
    throw Error(std::string("CalibMovingAverage applies to MinMax and NonOverflow, not ") +
                method_name(options.method));
  if (options.moving_average && !(options.averaging_constant >= 0 && options.averaging_constant <= 1))
    throw Error("CalibMovingAverageConstant must be in [0, 1], got " + std::to_string(options.averaging_constant));
  if (is_power_of_two(options.method))
    settings.qrange = qmath::quant_range(options.activation_type, settings.symmetric);
}

// The ranges from the statistics of every sample merged: what a calibration ends with, whether
// its samples ran here, over ranks or as shards.
CalibrationResult ranges_of_merged(std::vector<TensorStats>& merged, const std::vector<std::string>& names,
                                   const MethodSettings& settings, int threads, size_t samples,
                                   const std::vector<size_t>& skipped, const std::string& source,
                                   const CalibOptions& options) {
  auto log = [&](const std::string& message) {
    if (options.log) options.log(message);
  };
  CalibrationResult result;
  result.samples = samples;
  result.skipped = skipped;
  if (samples == skipped.size())
    throw Error("calibration: no usable sample in " + source +
                (samples ? " (every sample has NaN or Inf)" : " (it gave none)"));
  // Per tensor, on every thread: the entropy search costs as much as many samples.
  std::vector<TensorRange> ranges(names.size());
  engine::parallel_for(threads, static_cast<int64_t>(names.size()), 1, [&](int64_t b, int64_t e) {
    for (auto i = static_cast<size_t>(b); i < static_cast<size_t>(e); ++i)
      if (!merged[i].minmax.empty()) ranges[i] = range_of(merged[i], settings);
  });
  std::vector<std::string>& unseen = result.never_computed;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!merged[i].minmax.empty())
      result.ranges[names[i]] = ranges[i];
    else if (merged[i].seen)
      result.non_finite.push_back(names[i]);
    else
      unseen.push_back(names[i]);
  }
  if (!unseen.empty())
    log("calibration: no range for " + std::to_string(unseen.size()) + " tensors never computed as floats (e.g. '" +
        unseen[0] + "')");
  if (!result.non_finite.empty())
    log("calibration: no range for " + std::to_string(result.non_finite.size()) +
        " tensors whose every value is NaN or infinite (e.g. '" + result.non_finite[0] +
        "'): the float model overflows on this data");
  return result;
}

// MinMSE "All" and LayerWisePercentile: each tensor's candidates (`samples` read in all); returns
// how many of the first samples a last pass must score, and in `tensors` for how many tensors.
size_t set_all_candidates(std::vector<TensorStats>& merged, const MethodSettings& settings, size_t samples,
                          size_t& tensors) {
  size_t limit = 0;
  tensors = 0;
  for (TensorStats& t : merged) {
    if (t.minmax.empty()) continue;
    set_candidates(t, settings, samples);
    size_t before = *std::max_element(t.missing_before.begin(), t.missing_before.end());
    tensors += before > 0;
    limit = std::max(limit, before);
  }
  return limit;
}

// The merged first pass of shards (merge_first_pass_shards), read back.
ShareStats read_first_pass(const std::string& bytes, size_t tensors) {
  StatsReader in(bytes, "the merged first pass");
  return read_share_stats(in, tensors);
}

// One calibration: the passes over the samples each method needs, in order, and the ranges.
class Calibrator {
 public:
  Calibrator(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
             const CalibOptions& options)
      : reader_(reader),
        options_(options),
        settings_{options, ranges_symmetric(options), calib_histogram_bins(options), qmath::QRange{}, 1} {
    // Values of If/Loop/Scan bodies too: the engine shows them to observers (a Loop or Scan body's
    // once per iteration, whose statistics merge as those of more samples do).
    std::set<std::string> known;
    std::vector<ir::Graph*> graphs = model.graph->nested_graphs();
    graphs.insert(graphs.begin(), model.graph.get());
    for (const ir::Graph* g : graphs) {
      for (const auto& node : g->nodes())
        for (const ir::Value* v : node->outputs())
          if (v) known.insert(v->name());
      for (const ir::Value* v : g->inputs()) known.insert(v->name());
    }
    for (const std::string& name : tensors)
      if (!known.count(name)) throw Error("calibration: the model has no tensor '" + name + "'");
    names_ = tensors;
    if (options.workers < 0 || options.workers > engine::kMaxThreads)
      throw Error("calibration: workers must be within [1, " + std::to_string(engine::kMaxThreads) +
                  "] (or 0: as many as the threads allow), got " + std::to_string(options.workers));
    check_method_options(options, settings_);
    if (options.ranks && options.shards) throw Error("calibration: a shard file's share is not run over ranks");
    if (options.shards && options.shard >= options.shards)
      throw Error("calibration shard " + std::to_string(options.shard) + " of " + std::to_string(options.shards) +
                  ": shards are numbered 0 to " + std::to_string(options.shards - 1));
    if (!options.first_pass.empty() && (!options.shards || !needs_merged_second_pass(options)))
      throw Error(std::string("calibration: a merged first pass goes with a shard of MinMSE \"All\" or ") +
                  "LayerWisePercentile, not " + method_name(options.method));
    ranks_ = options.ranks ? std::max(1, options.ranks->size()) : std::max<size_t>(1, options.shards);

    int threads = options.threads > 0 ? options.threads : engine::hardware_threads();
    worker_count_ = options.workers > 0 ? options.workers : auto_workers(threads);
    settings_.threads = std::max(1, threads / worker_count_);
    passes_.emplace(model, tensors, reader, options, worker_count_, settings_.threads, sample_share_of_this(),
                    ranks_ > 1 ? options.ranks.get() : nullptr);
  }

  CalibrationResult run() {
    const Method method = options_.method;
    const bool minmse_all = method == Method::MinMSE && options_.minmse_mode == "All";
    const bool layerwise = method == Method::LayerWisePercentile;
    const bool histograms =
        method == Method::Entropy || method == Method::Percentile || method == Method::Distribution || layerwise;
    // MinMSE "All" scores its positions in the first pass already (early_minmse_errors); a
    // second pass only for tensors it could not score there.
    const bool early_minmse = minmse_all && settings_.symmetric && worker_count_ == 1 && ranks_ == 1;
    const int planned = 1 + ((minmse_all && !early_minmse) || layerwise);
    if (planned > 1 && !reader_.can_rewind())
      throw Error(std::string(method_name(method)) +
                  " reads the data twice (the errors of its candidates come second), and " + reader_.describe() +
                  " cannot start over");
    int passes = 1;
    auto start_pass = [&](const std::string& what) {
      if (passes > 1) reader_.rewind();
      if (passes > 1 || planned > 1 || early_minmse) log("calibration pass " + std::to_string(passes) + ": " + what);
    };

    if (!options_.first_pass.empty()) return shard_second_pass(histograms);
    start_pass("extrema of " + std::to_string(names_.size()) + " tensors" +
               (histograms ? " and their histograms" : "") +
               (early_minmse ? ", and the squared errors of their power-of-two candidates" : ""));
    bool keep_per_sample = options_.moving_average;
    bool most_common = method == Method::MinMSE && !minmse_all;
    // A shard keeps its grids whole: no second pass can count in full after the merge.
    const bool recount_possible = reader_.can_rewind() && !options_.shards;
    const GridHistogram blank_grid =
        histograms ? GridHistogram(settings_.bins, abs_histograms(settings_), tail_share(settings_, recount_possible))
                   : GridHistogram();
    passes_->run(true, [&](TensorStats& s, size_t, size_t sample, const float* x, size_t n, engine::Extrema extrema) {
      s.minmax.add(sample, extrema, keep_per_sample || most_common);
      if (most_common) s.best_pos[sample] = sample_best_pos(s.minmax.per_sample.at(sample), x, n, settings_);
      if (early_minmse) early_minmse_errors(s, sample, x, n, extrema, settings_, reader_.can_rewind());
      if (histograms) {
        if (s.grid.empty()) s.grid = blank_grid;
        s.grid.add(x, n, extrema.abs_max(), settings_.threads, !extrema.non_finite);
      }
    });
    if (options_.shards) {
      CalibrationResult shard;
      StatsWriter out;
      write_share_stats(passes_->share_stats(), out);
      shard.shard_stats = std::move(out.bytes());
      shard.samples = passes_->rank_samples().at(0);
      shard.passes = 1;
      return shard;
    }
    if (ranks_ > 1) {
      std::string counts;
      for (size_t n : passes_->rank_samples()) counts += (counts.empty() ? "" : ", ") + std::to_string(n);
      log("calibration over " + std::to_string(ranks_) + " ranks: samples per rank " + counts + "; statistics " +
          std::to_string(passes_->exchanged_bytes()) + " bytes per rank at most");
    }
    std::vector<TensorStats> merged = merge_workers(passes_->workers(), names_.size());
    if (histograms) rebin_histograms(merged, settings_);
    // The values below a grid's floor lie in the bins up to the one they were put in: the
    // percentile is the full grid's unless those values alone reach it (the tail thinned out in
    // later samples). Then a pass counts that tensor's values in full.
    std::vector<size_t> recount;
    for (size_t i = 0; i < names_.size(); ++i)
      if (merged[i].below_floor > 0 &&
          static_cast<double>(merged[i].below_floor) / static_cast<double>(merged[i].histogram.total()) >=
              lowest_percentile(settings_) / 100)
        recount.push_back(i);
    if (!recount.empty()) {
      ++passes;
      start_pass("histograms of " + std::to_string(recount.size()) + " tensors in full (the percentile fell below " +
                 "the tail counted in the first pass)");
      recount_histograms(*passes_, merged, recount, settings_);
    }
    if (minmse_all || layerwise) {
      size_t tensors = 0;  // tensors with samples still to score, and how many samples
      const size_t limit = set_all_candidates(merged, settings_, passes_->samples(), tensors);
      if (limit > 0) {
        if (!reader_.can_rewind())
          throw Error("MinMSE: " + std::to_string(tensors) + " tensors need a second pass (" + kSecondPassWhy +
                      "), and " + reader_.describe() + " cannot start over");
        ++passes;
        std::string what = minmse_all ? "squared errors of the power-of-two candidates"
                                      : "errors of the candidate percentiles (" + options_.lwp_metric + ")";
        if (early_minmse)
          what += " for " + std::to_string(tensors) + " tensors (" + kSecondPassWhy + "), on the first " +
                  std::to_string(limit) + " of " + std::to_string(passes_->samples()) + " samples";
        start_pass(what);
        score_candidates(*passes_, merged, limit, settings_);
      }
      for (TensorStats& t : merged)
        if (!t.candidates.empty()) choose_candidate(t);
    }

    CalibrationResult result = ranges_of_merged(merged, names_, settings_, settings_.threads * worker_count_,
                                                passes_->samples(), passes_->skipped(), reader_.describe(), options_);
    result.passes = passes;
    result.rank_samples = passes_->rank_samples();
    return result;
  }

 private:
  // A shard's second pass (MinMSE "All", LayerWisePercentile): the candidates from the first
  // pass of every shard merged, scored on this shard's samples; its error sums are the result.
  CalibrationResult shard_second_pass(bool histograms) {
    ShareStats first = read_first_pass(options_.first_pass, names_.size());
    std::vector<TensorStats>& merged = first.stats;
    if (histograms) rebin_histograms(merged, settings_);
    size_t tensors = 0;
    const size_t limit = set_all_candidates(merged, settings_, first.samples, tensors);
    log("calibration pass 2 of shard " + std::to_string(options_.shard) + ": errors of the candidates of " +
        std::to_string(tensors) + " tensors");
    if (limit > 0) score_candidates(*passes_, merged, limit, settings_);
    ShareStats sums;  // the error sums alone: the rest is the first pass's
    sums.samples = limit > 0 ? passes_->share_stats().samples : 0;
    sums.stats.resize(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) sums.stats[i].error_sums = std::move(merged[i].error_sums);
    StatsWriter out;
    write_share_stats(sums, out);
    CalibrationResult shard;
    shard.shard_stats = std::move(out.bytes());
    shard.samples = first.samples;
    shard.passes = 1;
    return shard;
  }

  // This process's samples: all of them, or over ranks (or as a shard) its contiguous share of
  // the reader's samples (as many as max_samples), the ranks in sample order as the workers of
  // one process read them, so that each sample keeps its index (the moving average's order).
  SampleShare sample_share_of_this() const {
    if (ranks_ == 1) return {0, SIZE_MAX};
    std::optional<size_t> size = reader_.size();
    if (!size)
      throw Error("calibration over " + std::to_string(ranks_) + (options_.shards ? " shards" : " ranks") +
                  " splits the samples by their number, and " + reader_.describe() + " does not say how many it has");
    size_t samples = options_.max_samples ? std::min(*size, options_.max_samples) : *size;
    const int rank = options_.shards ? static_cast<int>(options_.shard) : options_.ranks->rank();
    return sample_share(samples, rank, ranks_);
  }

  void log(const std::string& message) {
    if (options_.log) options_.log(message);
  }

  // The workers when the options leave them to calibration: one a thread, as samples on threads
  // of their own need no joining after each of the engine's steps (on two threads, det's
  // Distribution takes ~12% less time than one sample on both), up to kAutoWorkers, as each
  // holds one sample's tensors, and no more than the samples. One for MinMSE "All" with
  // symmetric ranges, which scores its positions in the first pass only on one worker.
  int auto_workers(int threads) const {
    constexpr int kAutoWorkers = 4;
    if (options_.method == Method::MinMSE && options_.minmse_mode == "All" && settings_.symmetric) return 1;
    // LayerWisePercentile's second pass sums the candidates' errors while a worker holds the
    // sample's tensors: two workers were 5% faster (the detector, resnet50) and held twice the
    // memory, more or less as their samples' largest tensors met.
    if (options_.method == Method::LayerWisePercentile) return 1;
    size_t samples = SIZE_MAX;
    if (std::optional<size_t> size = reader_.size()) samples = *size;
    if (options_.max_samples) samples = std::min(samples, options_.max_samples);
    return static_cast<int>(
        std::clamp<size_t>(std::min<size_t>(samples, kAutoWorkers), 1, static_cast<size_t>(threads)));
  }

  DataReader& reader_;
  const CalibOptions& options_;
  MethodSettings settings_;
  int worker_count_ = 1;  // samples run at once
  int ranks_ = 1;         // processes (or shards) sharing the samples
  std::vector<std::string> names_;
  std::optional<SamplePasses> passes_;
};

}  // namespace

CalibrationResult calibrate(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
                            const CalibOptions& options) {
  return Calibrator(model, tensors, reader, options).run();
}

namespace {

// Each shard's statistics, read and merged in shard order as calibrate merges its workers.
ShareStats merged_shards(const std::vector<std::string>& shards, const std::vector<std::string>& what, size_t tensors,
                         std::vector<TensorStats>* into) {
  std::vector<std::vector<TensorStats>> workers;
  ShareStats all;
  for (size_t k = 0; k < shards.size(); ++k) {
    StatsReader in(shards[k], what.at(k));
    ShareStats share = read_share_stats(in, tensors);
    all.samples += share.samples;
    all.skipped.insert(all.skipped.end(), share.skipped.begin(), share.skipped.end());
    workers.push_back(std::move(share.stats));
  }
  if (into) {  // second passes: their error sums into the first pass's statistics
    for (auto& w : workers)
      for (size_t i = 0; i < tensors; ++i) merge_worker_stats((*into)[i], w[i]);
  } else {
    all.stats = merge_workers(workers, tensors);
  }
  return all;
}

}  // namespace

std::string merge_first_pass_shards(const std::vector<std::string>& shards, const std::vector<std::string>& what,
                                    const std::vector<std::string>& tensors) {
  StatsWriter out;
  write_share_stats(merged_shards(shards, what, tensors.size(), nullptr), out);
  return std::move(out.bytes());
}

CalibrationResult merge_shard_stats(const std::vector<std::string>& shards, const std::vector<std::string>& what,
                                    const std::vector<std::string>& tensors, const CalibOptions& options) {
  const bool two_passes = needs_merged_second_pass(options);
  if (two_passes && options.first_pass.empty())
    throw Error(std::string(method_name(options.method)) +
                ": these are first-pass shards; merge them into a first pass, run each shard's second pass on it, "
                "then merge those");
  if (!two_passes && !options.first_pass.empty())
    throw Error(std::string("a merged first pass goes with MinMSE \"All\" or LayerWisePercentile, not ") +
                method_name(options.method));
  MethodSettings settings{options, ranges_symmetric(options), calib_histogram_bins(options), qmath::QRange{}, 1};
  check_method_options(options, settings);
  const int threads = options.threads > 0 ? options.threads : engine::hardware_threads();
  settings.threads = threads;
  const bool histograms = options.method == Method::Entropy || options.method == Method::Percentile ||
                          options.method == Method::Distribution || options.method == Method::LayerWisePercentile;
  ShareStats first;
  int passes = 1;
  if (two_passes) {
    first = read_first_pass(options.first_pass, tensors.size());
    if (histograms) rebin_histograms(first.stats, settings);
    size_t scored = 0;
    passes += set_all_candidates(first.stats, settings, first.samples, scored) > 0;
    merged_shards(shards, what, tensors.size(), &first.stats);
    for (TensorStats& t : first.stats)
      if (!t.candidates.empty()) choose_candidate(t);
  } else {
    first = merged_shards(shards, what, tensors.size(), nullptr);
    if (histograms) rebin_histograms(first.stats, settings);
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    if (first.stats[i].below_floor > 0)  // shards keep their grids whole
      throw Error(what.at(0) + ": a histogram of '" + tensors[i] + "' counted only in part");
  CalibrationResult result = ranges_of_merged(first.stats, tensors, settings, threads, first.samples, first.skipped,
                                              std::to_string(shards.size()) + " shards", options);
  result.passes = passes;
  return result;
}

}  // namespace onnxptq::calib
