#include "calib/calibrate.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "calib/statistics.h"
#include "engine/kernel.h"
#include "engine/parallel.h"
#include "engine/session.h"
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

bool ranges_symmetric(const CalibOptions& o) {
  if (o.symmetric) return *o.symmetric;
  return is_power_of_two(o.method) || o.method == Method::Percentile || o.method == Method::LayerWisePercentile;
}

namespace {

// One quantization to try: scale, zero point, and the integer range values are clipped to.
struct Candidate {
  double scale = 1;
  int64_t zero_point = 0;
  qmath::QRange clip;
};

// Whether candidate c quantizes as one before it does (LayerWisePercentile's percentiles often
// fall in the same bin): then it has the same error and, ties going to the first, is never chosen.
bool repeats_earlier(const std::vector<Candidate>& candidates, size_t c) {
  for (size_t b = 0; b < c; ++b)
    if (candidates[b].scale == candidates[c].scale && candidates[b].zero_point == candidates[c].zero_point &&
        candidates[b].clip.min == candidates[c].clip.min && candidates[b].clip.max == candidates[c].clip.max)
      return true;
  return false;
}

// What one worker keeps of one tensor. Everything summed across samples is exact (extrema,
// integer counts, ExactSum) or kept per sample and combined in sample order at the end, so the
// result is the same for any number of workers.
struct TensorStats {
  bool seen = false;  // computed at all (minmax stays empty when every value is NaN or infinite)
  MinMaxStats minmax;
  GridHistogram grid;   // histogram methods: counts of the first pass
  Histogram histogram;  // the same counts over the range the method reads them on
  uint64_t below_floor = 0;  // of those counts, how many are below the grid's floor (counted together)
  // MinMSE "All" and LayerWisePercentile: the candidates, the sum of each one's error (squared
  // errors of the power-of-two positions, or the metric of each percentile's range) over every
  // sample, exact so that it comes out the same in any order, and the samples the last pass must
  // still add (candidate c: those before missing_before[c]).
  std::vector<Candidate> candidates;
  std::vector<ExactSum> error_sums;
  std::vector<size_t> missing_before;
  std::map<size_t, int> best_pos;  // MinMSE "MostCommon": each sample's own best position
  int chosen_pos = 0;  // MinMSE "All": the best position over every sample
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

// Checks a float input of a sample: how many values are NaN or infinite.
size_t count_non_finite(const ir::Tensor& t) {
  if (t.dtype() != ir::DataType::Float && t.dtype() != ir::DataType::Float16 && t.dtype() != ir::DataType::Double)
    return 0;
  ir::Tensor f = engine::as_float32(t);
  size_t bad = 0;
  for (float v : f.values<float>()) bad += !std::isfinite(v);
  return bad;
}

TensorRange bounds(double lo, double hi) {
  TensorRange r;
  r.lo = lo;
  r.hi = hi;
  return r;
}

using CandidateErrors = std::vector<double>;

// block_errors(values, count) gives `count` candidates' errors on one block of x; their sums
// over the blocks, in a fixed block order.
template <class BlockErrors>
CandidateErrors summed_over_blocks(int threads, const float* x, size_t n, size_t count, BlockErrors&& block_errors) {
  CandidateErrors total(count, 0.0);
  for (const CandidateErrors& e : reduce_blocks<CandidateErrors>(threads, x, n, block_errors))
    for (size_t c = 0; c < e.size(); ++c) total[c] += e[c];
  return total;
}

// The error of each candidate on these values, in a fixed block order.
CandidateErrors candidate_errors(int threads, const float* x, size_t n, const std::vector<Candidate>& candidates,
                                 qmath::ErrorMetric metric) {
  return summed_over_blocks(threads, x, n, candidates.size(), [&](const float* block, size_t m) {
    CandidateErrors e(candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c)
      e[c] = qmath::quantization_error(block, m, candidates[c].scale, candidates[c].zero_point, candidates[c].clip,
                                       metric);
    return e;
  });
}

// The MinMSE candidates around the NonOverflow position p0 (clipped as vai_q_onnx quantizes arrays).
std::vector<Candidate> minmse_candidates(int p0, int64_t zero_point, ir::DataType type) {
  std::vector<Candidate> out;
  for (int c = 0; c < qmath::kMinMseCandidates; ++c)
    out.push_back({qmath::pos_to_scale(qmath::minmse_candidate(p0, c)), zero_point, qmath::clip_range(type)});
  return out;
}

// Quark's LayerWisePercentile parameters for a candidate range: scale (hi - lo) / (qmax - qmin)
// + 1e-6 and zero point rne(qmin - lo / scale) over the type's full range. (Quark writes
// round(lo / scale - qmin), a sign slip that only asymmetric ranges feel.)
Candidate percentile_candidate(Range r, ir::DataType type) {
  qmath::QRange q = qmath::quant_range(type, false);
  Candidate c;
  c.scale = (r.hi - r.lo) / static_cast<double>(q.max - q.min) + 1e-6;
  c.zero_point = static_cast<int64_t>(std::nearbyint(static_cast<double>(q.min) - r.lo / c.scale));
  c.clip = q;
  return c;
}

// The candidate with the least error (strict <: the first wins ties).
size_t least_error(const CandidateErrors& errors) {
  size_t best = 0;
  for (size_t i = 1; i < errors.size(); ++i)
    if (errors[i] < errors[best]) best = i;
  return best;
}

class Calibrator {
 public:
  Calibrator(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
             const CalibOptions& options)
      : reader_(reader), options_(options), symmetric_(ranges_symmetric(options)), bins_(calib_histogram_bins(options)) {
    std::set<std::string> known;
    for (const auto& node : model.graph->nodes())
      for (const ir::Value* v : node->outputs())
        if (v) known.insert(v->name());
    for (const ir::Value* v : model.graph->inputs()) known.insert(v->name());
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!known.count(tensors[i])) throw Error("calibration: the model has no tensor '" + tensors[i] + "'");
      index_.emplace(tensors[i], i);
    }
    names_ = tensors;
    if (options.workers < 0 || options.workers > engine::kMaxThreads)
      throw Error("calibration: workers must be within [1, " + std::to_string(engine::kMaxThreads) +
                  "] (or 0: as many as the threads allow), got " + std::to_string(options.workers));
    if (options.method == Method::Entropy && (bins_ < 2 || bins_ % 2 != 0 ||
                                              options.num_quantized_bins < 1 || options.num_quantized_bins > bins_))
      throw Error("Entropy needs an even number of bins (got " + std::to_string(bins_) +
                  ") and 1 <= quantized bins <= bins (got " + std::to_string(options.num_quantized_bins) + ")");
    if (bins_ > GridHistogram::kMaxBins)
      throw Error("calibration: the number of histogram bins must be within [1, " +
                  std::to_string(GridHistogram::kMaxBins) + "], got " + std::to_string(bins_));
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
    if (options.method == Method::MinMSE && options.minmse_mode == "MostCommon" && !symmetric_)
      throw Error("MinMSEMode 'MostCommon' needs a symmetric range (CalibTensorRangeSymmetric)");
    if (options.moving_average && options.method != Method::MinMax && options.method != Method::NonOverflow)
      throw Error(std::string("CalibMovingAverage applies to MinMax and NonOverflow, not ") + method_name(options.method));
    if (options.moving_average && !(options.averaging_constant >= 0 && options.averaging_constant <= 1))
      throw Error("CalibMovingAverageConstant must be in [0, 1], got " + std::to_string(options.averaging_constant));
    if (is_power_of_two(options.method)) qrange_ = qmath::quant_range(options.activation_type, symmetric_);

    int threads = options.threads > 0 ? options.threads : engine::hardware_threads();
    worker_count_ = options.workers > 0 ? options.workers : auto_workers(threads);
    engine::SessionOptions so;
    so.threads = threads_ = std::max(1, threads / worker_count_);
    so.visible.insert(tensors.begin(), tensors.end());
    so.hooks_ignore_layout = true;  // every statistic here is per tensor: element order does not matter
    session_ = std::make_unique<engine::Session>(model, so);
  }

  CalibrationResult run() {
    const Method method = options_.method;
    const bool minmse_all = method == Method::MinMSE && options_.minmse_mode == "All";
    const bool layerwise = method == Method::LayerWisePercentile;
    const bool histograms =
        method == Method::Entropy || method == Method::Percentile || method == Method::Distribution || layerwise;
    // MinMSE "All" scores its positions in the first pass already (early_minmse_errors); a
    // second pass only for tensors it could not score there.
    const bool early_minmse = minmse_all && symmetric_ && worker_count_ == 1;
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

    start_pass("extrema of " + std::to_string(names_.size()) + " tensors" +
               (histograms ? " and their histograms" : "") +
               (early_minmse ? ", and the squared errors of their power-of-two candidates" : ""));
    bool keep_per_sample = options_.moving_average;
    bool most_common = method == Method::MinMSE && !minmse_all;
    const GridHistogram blank_grid =
        histograms ? GridHistogram(bins_, abs_histograms(), tail_share()) : GridHistogram();
    run_pass(true, [&](TensorStats& s, size_t, size_t sample, const float* x, size_t n, engine::Extrema extrema) {
      s.minmax.add(sample, extrema, keep_per_sample || most_common);
      if (most_common) s.best_pos[sample] = sample_best_pos(s.minmax.per_sample.at(sample), x, n);
      if (early_minmse) early_minmse_errors(s, sample, x, n, extrema);
      if (histograms) {
        if (s.grid.empty()) s.grid = blank_grid;
        s.grid.add(x, n, extrema.abs_max(), threads_, !extrema.non_finite);
      }
    });
    std::vector<TensorStats> merged = merge_first_pass();
    if (histograms) rebin_histograms(merged);
    // The values below a grid's floor lie in the bins up to the one they were put in: the
    // percentile is the full grid's unless those values alone reach it (the tail thinned out in
    // later samples). Then a pass counts that tensor's values in full.
    std::vector<size_t> recount;
    for (size_t i = 0; i < names_.size(); ++i)
      if (merged[i].below_floor > 0 &&
          static_cast<double>(merged[i].below_floor) / static_cast<double>(merged[i].histogram.total()) >=
              lowest_percentile() / 100)
        recount.push_back(i);
    if (!recount.empty()) {
      ++passes;
      start_pass("histograms of " + std::to_string(recount.size()) + " tensors in full (the percentile fell below " +
                 "the tail counted in the first pass)");
      recount_histograms(merged, recount);
    }
    if (minmse_all || layerwise) {
      size_t tensors = 0, limit = 0;  // tensors with samples still to score, and how many samples
      for (TensorStats& t : merged) {
        if (t.minmax.empty()) continue;
        set_candidates(t);
        size_t before = *std::max_element(t.missing_before.begin(), t.missing_before.end());
        tensors += before > 0;
        limit = std::max(limit, before);
      }
      if (limit > 0) {
        if (!reader_.can_rewind())
          throw Error("MinMSE: " + std::to_string(tensors) + " tensors need a second pass (" + kSecondPassWhy +
                      "), and " + reader_.describe() + " cannot start over");
        ++passes;
        std::string what = minmse_all ? "squared errors of the power-of-two candidates"
                                      : "errors of the candidate percentiles (" + options_.lwp_metric + ")";
        if (early_minmse)
          what += " for " + std::to_string(tensors) + " tensors (" + kSecondPassWhy + "), on the first " +
                  std::to_string(limit) + " of " + std::to_string(samples_) + " samples";
        start_pass(what);
        score_candidates(merged, limit);
      }
      for (TensorStats& t : merged)
        if (!t.candidates.empty()) choose_candidate(t);
    }

    CalibrationResult result;
    result.samples = samples_;
    result.skipped = skipped_;
    result.passes = passes;
    if (samples_ == skipped_.size())
      throw Error("calibration: no usable sample in " + reader_.describe() +
                  (samples_ ? " (every sample has NaN or Inf)" : " (it gave none)"));
    // Per tensor, on every thread: the entropy search costs as much as many samples.
    std::vector<TensorRange> ranges(names_.size());
    engine::parallel_for(threads_ * worker_count_, static_cast<int64_t>(names_.size()), 1, [&](int64_t b, int64_t e) {
      for (auto i = static_cast<size_t>(b); i < static_cast<size_t>(e); ++i)
        if (!merged[i].minmax.empty()) ranges[i] = range_of(merged[i]);
    });
    std::vector<std::string> unseen;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (!merged[i].minmax.empty())
        result.ranges[names_[i]] = ranges[i];
      else if (merged[i].seen)
        result.non_finite.push_back(names_[i]);
      else
        unseen.push_back(names_[i]);
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

 private:
  // Whether the histogram methods count |x| (symmetric percentiles) rather than x.
  bool abs_histograms() const {
    return symmetric_ && (options_.method == Method::Percentile || options_.method == Method::LayerWisePercentile);
  }

  // The lowest percentile read from the histograms of |x| (symmetric Percentile's, or
  // LayerWisePercentile's smallest candidate); 0 for the other methods.
  double lowest_percentile() const {
    if (!abs_histograms()) return 0;
    if (options_.method == Method::Percentile) return options_.percentile;
    return *std::min_element(options_.percentile_candidates.begin(), options_.percentile_candidates.end());
  }

  // Percentiles of |x| need only the tail of each grid exact: 100 times the share of values
  // above the lowest percentile (GridHistogram's floor), when a second pass can count in full
  // should the percentile fall below it.
  double tail_share() const {
    if (lowest_percentile() == 0 || !reader_.can_rewind()) return 1;
    const double share = (100 - lowest_percentile()) / 100 * kTailMargin;
    return share > 0 && share < 1 ? share : 1;
  }
  static constexpr double kTailMargin = 100;

  // Counts the values of the tensors `which` again over every sample, every value this time.
  void recount_histograms(std::vector<TensorStats>& merged, const std::vector<size_t>& which) {
    std::vector<char> wanted(names_.size(), 0);
    for (size_t i : which) wanted[i] = 1;
    const GridHistogram full(bins_, true);
    run_pass(false, [&](TensorStats& s, size_t i, size_t, const float* x, size_t n, engine::Extrema) {
      if (!wanted[i]) return;
      if (s.grid.empty()) s.grid = full;
      s.grid.add(x, n, merged[i].minmax.max_abs, threads_);
    });
    for (size_t i : which) {
      GridHistogram grid;
      for (auto& w : workers_) grid.merge(w[i].grid);
      merged[i].histogram = grid.rebin(0, merged[i].minmax.max_abs, bins_);
      merged[i].below_floor = 0;
    }
  }

  // Each tensor's grid counts on num_bins bins over the range its method reads them on.
  void rebin_histograms(std::vector<TensorStats>& merged) const {
    const bool percentile = options_.method == Method::Percentile || options_.method == Method::LayerWisePercentile;
    for (TensorStats& t : merged) {
      const MinMaxStats& m = t.minmax;
      if (m.empty()) continue;
      if (abs_histograms()) {
        t.histogram = t.grid.rebin(0, m.max_abs, bins_);
        t.below_floor = t.grid.below_floor();
      } else if (percentile)
        t.histogram = t.grid.rebin(m.min, m.max, bins_);
      else
        t.histogram = t.grid.rebin(-m.max_abs, m.max_abs, bins_);
      t.grid = GridHistogram();
    }
  }

  // The candidates of MinMSE "All" (around the final extrema's position) and LayerWisePercentile
  // (one per percentile), with what the first pass summed of their errors and the samples it
  // did not score.
  void set_candidates(TensorStats& t) const {
    if (options_.method == Method::LayerWisePercentile) {
      for (double percentile : options_.percentile_candidates) {
        t.percentile_ranges.push_back(percentile_range_of(t, percentile));
        t.candidates.push_back(percentile_candidate(t.percentile_ranges.back(), options_.activation_type));
      }
      t.error_sums.assign(t.candidates.size(), ExactSum());
      t.missing_before.assign(t.candidates.size(), samples_);
      // Only candidates that differ need their errors, and only if there are two of them.
      size_t distinct = 0;
      for (size_t c = 0; c < t.candidates.size(); ++c)
        if (repeats_earlier(t.candidates, c))
          t.missing_before[c] = 0;
        else
          ++distinct;
      if (distinct == 1) std::fill(t.missing_before.begin(), t.missing_before.end(), 0);
      return;
    }
    qmath::ScaleZeroPoint p =
        qmath::pof2_scale(t.minmax.min, t.minmax.max, qrange_, options_.activation_type, symmetric_);
    t.candidates = minmse_candidates(qmath::scale_to_pos(p.scale), p.zero_point, options_.activation_type);
    t.error_sums.assign(t.candidates.size(), ExactSum());
    t.missing_before.assign(t.candidates.size(), samples_);
    const auto& e = t.early;
    if (!e.usable || e.samples == 0 || p.zero_point != e.zero_point) return;  // scored in the last pass alone
    for (size_t c = 0; c < t.candidates.size(); ++c) {
      const int pos = qmath::scale_to_pos(t.candidates[c].scale);
      auto total = e.total.find(pos);
      if (total == e.total.end()) {
        if (pos > e.zero_pos) continue;  // not expected; the last pass scores it
        t.error_sums[c] = e.zero_total;  // no sample tried it: each one's values all round to 0 there
        t.missing_before[c] = 0;
        continue;
      }
      t.error_sums[c] = total->second;
      auto missing = e.missing_before.find(pos);
      t.missing_before[c] = missing == e.missing_before.end() ? 0 : missing->second;
    }
  }

  // The last pass of MinMSE "All" and LayerWisePercentile, over the first `limit` samples: each
  // tensor's candidates are scored on the samples they miss.
  void score_candidates(std::vector<TensorStats>& merged, size_t limit) {
    const qmath::ErrorMetric metric = options_.method == Method::MinMSE || options_.lwp_metric == "mse"
                                          ? qmath::ErrorMetric::Squared
                                          : qmath::ErrorMetric::Absolute;
    run_pass(
        false,
        [&](TensorStats& s, size_t i, size_t sample, const float* x, size_t n, engine::Extrema) {
          const TensorStats& t = merged[i];
          std::vector<Candidate> wanted;
          std::vector<size_t> index;
          for (size_t c = 0; c < t.candidates.size(); ++c)
            if (sample < t.missing_before[c]) {
              wanted.push_back(t.candidates[c]);
              index.push_back(c);
            }
          if (wanted.empty()) return;
          if (s.error_sums.empty()) s.error_sums.resize(t.candidates.size());
          CandidateErrors errors = candidate_errors(threads_, x, n, wanted, metric);
          for (size_t k = 0; k < wanted.size(); ++k) s.error_sums[index[k]].add(errors[k]);
        },
        limit);
    for (size_t i = 0; i < names_.size(); ++i)
      for (auto& w : workers_)
        for (size_t c = 0; c < w[i].error_sums.size(); ++c) merged[i].error_sums[c].merge(w[i].error_sums[c]);
  }

  // The candidate with the least error sum (the first on ties: for MinMSE the coarsest position),
  // of those that do not repeat an earlier one (scored in no pass).
  static void choose_candidate(TensorStats& t) {
    CandidateErrors totals;
    for (size_t c = 0; c < t.candidates.size(); ++c)
      totals.push_back(repeats_earlier(t.candidates, c) ? INFINITY : t.error_sums[c].value());
    t.chosen = least_error(totals);
    t.chosen_pos = qmath::scale_to_pos(t.candidates[t.chosen].scale);
  }

  Range percentile_range_of(const TensorStats& s, double percentile) const {
    return symmetric_ ? percentile_range_symmetric(s.histogram, percentile, s.minmax.min, s.minmax.max)
                      : percentile_range(s.histogram, percentile);
  }

  // Reads the samples once (the first `limit`), split over the workers, and calls
  // reduce(stats, tensor index, sample index, values, count, extrema) on each calibrated tensor;
  // the finite extrema of its values in the first pass (empty in the others).
  template <class Reduce>
  void run_pass(bool first, Reduce&& reduce, size_t limit = SIZE_MAX) {
    workers_.assign(static_cast<size_t>(worker_count_), std::vector<TensorStats>(names_.size()));
    size_t next_index = 0;
    std::mutex reader_mutex;
    std::exception_ptr failure;
    std::atomic<bool> stop{false};
    auto work = [&](int worker) {
      std::vector<TensorStats>& stats = workers_[worker];
      try {
        while (!stop) {
          std::optional<Feed> feed;
          size_t sample;
          {
            std::lock_guard<std::mutex> lock(reader_mutex);
            if (options_.max_samples && next_index >= options_.max_samples) break;
            if (next_index >= limit) break;
            feed = reader_.next();
            if (!feed) break;
            sample = next_index++;
          }
          if (!check_sample(first, sample, *feed)) continue;
          auto see = [&](const std::string& name, const ir::Tensor& t, engine::Extrema extrema) {
            auto it = index_.find(name);
            if (it == index_.end()) return;
            size_t i = it->second;
            if (t.dtype() != ir::DataType::Float && t.dtype() != ir::DataType::Float16 &&
                t.dtype() != ir::DataType::BFloat16)
              return;  // shapes and indices are not quantized
            stats[i].seen = true;
            if (t.dtype() == ir::DataType::Float) {
              reduce(stats[i], i, sample, t.values<float>().data(), t.size(), extrema);
            } else {
              ir::Tensor f = engine::as_float32(t);
              reduce(stats[i], i, sample, f.values<float>().data(), f.size(), extrema);
            }
          };
          // The first pass takes the extrema, from the engine (the kernels writing the tensors
          // take them as they write); the last one does not need them.
          engine::ExtremaObserver observe_extrema = see;
          engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) {
            see(name, t, engine::Extrema{});
          };
          engine::RunHooks hooks;
          if (first)
            hooks.observe_extrema = &observe_extrema;
          else
            hooks.observe = &observe;
          try {
            session_->run(*feed, hooks);
          } catch (const Error& e) {
            throw Error("calibration sample " + std::to_string(sample) + " of " + reader_.describe() + ": " + e.what());
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(reader_mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
      }
    };
    if (worker_count_ == 1) {
      work(0);
    } else {
      std::vector<std::thread> threads;
      for (int w = 0; w < worker_count_; ++w) threads.emplace_back(work, w);
      for (auto& t : threads) t.join();
    }
    if (failure) std::rethrow_exception(failure);
    if (first) samples_ = next_index;
  }

  // Whether to use the sample: a non-finite input skips it (reported once, on the first pass) or
  // fails the run with `strict`.
  bool check_sample(bool first, size_t sample, const Feed& feed) {
    for (const auto& [name, t] : feed) {
      size_t bad = count_non_finite(t);
      if (!bad) continue;
      std::string what = "calibration sample " + std::to_string(sample) + ", input '" + name + "': " +
                         std::to_string(bad) + " NaN or Inf value" + (bad == 1 ? "" : "s");
      if (options_.strict) throw Error(what + " (--strict)");
      if (first) {
        std::lock_guard<std::mutex> lock(skipped_mutex_);
        skipped_.push_back(sample);
        log(what + "; sample skipped");
      }
      return false;
    }
    return true;
  }

  // The first pass's statistics of every worker, merged.
  std::vector<TensorStats> merge_first_pass() {
    std::sort(skipped_.begin(), skipped_.end());
    std::vector<TensorStats> merged(names_.size());
    for (size_t i = 0; i < names_.size(); ++i)
      for (auto& w : workers_) {
        merged[i].seen = merged[i].seen || w[i].seen;
        merged[i].minmax.merge(w[i].minmax);
        merged[i].best_pos.merge(w[i].best_pos);
        if (merged[i].grid.empty())
          merged[i].grid = std::move(w[i].grid);
        else
          merged[i].grid.merge(w[i].grid);
        w[i].grid = GridHistogram();
      }
    if (workers_.size() == 1)
      for (size_t i = 0; i < names_.size(); ++i) merged[i].early = std::move(workers_[0][i].early);
    return merged;
  }

  // Why early_minmse_errors leaves a tensor to the second pass.
  static constexpr const char* kSecondPassWhy =
      "a range that outgrew the positions scored on earlier samples, NaN or infinities, a zero point that moved "
      "with the range, or computed twice in a sample";
  // How many positions below the coarsest candidate early_minmse_errors scores each sample at,
  // beyond the spread of the samples' ranges so far: a tensor whose samples differ 2^k in range
  // may well grow as much. Each position costs as much as a candidate, and a range that
  // outgrows them (mostly in the first samples, before the spread shows) costs a second pass
  // over the samples before it.
  static constexpr int kMinMseGrowth = 1;

  // MinMSE "All", first pass: this sample's squared errors at its zero position, the finest
  // where all its values round to 0 (its error there and at any coarser position is its sum of
  // squares), and at each position from the margin below the coarsest candidate of the range
  // seen so far (this sample's included) to the finest. The range and the spread only grow, so
  // no final candidate is finer and no later sample starts finer; a position no earlier sample
  // tried is either coarser than each one's zero position, so their error there is their sum of
  // squares, or the range outgrew the margin, and the second pass scores the earlier samples
  // there. A reader that cannot start over gets no margin: every position to the zero position.
  // A tensor with NaN or infinities, whose zero point changes as its range grows (uint16's can),
  // or seen twice in a sample (inside a loop) is left to the second pass, which scores every
  // sample.
  void early_minmse_errors(TensorStats& s, size_t sample, const float* x, size_t n, engine::Extrema extrema) {
    auto& e = s.early;
    if (!e.usable) return;
    if (e.last_sample == sample || s.minmax.empty() || extrema.non_finite) {
      e.usable = false;
      return;
    }
    e.last_sample = sample;
    qmath::ScaleZeroPoint p =
        qmath::pof2_scale(s.minmax.min, s.minmax.max, qrange_, options_.activation_type, symmetric_);
    if (e.samples == 0) e.zero_point = p.zero_point;
    if (p.zero_point != e.zero_point) {  // a range of zeros so far: another zero point
      e.usable = false;
      return;
    }
    const int p0 = qmath::scale_to_pos(p.scale);
    const int finest = qmath::minmse_candidate(p0, qmath::kMinMseCandidates - 1);
    int zero_pos = INT_MAX;      // every position, for zeros (or no value)
    std::vector<int> positions;  // zero_pos, then the finer ones scored
    std::vector<double> errors;  // at each of them
    if (const float abs_max = extrema.abs_max(); abs_max > 0) {
      int exponent = 0;
      std::frexp(abs_max, &exponent);
      zero_pos = 1 - exponent;
      while (std::nearbyint(abs_max / static_cast<float>(qmath::pos_to_scale(zero_pos))) != 0) --zero_pos;
      positions.push_back(zero_pos);
      e.finest_zero_pos = std::max(e.finest_zero_pos, zero_pos);
      const int spread = e.finest_zero_pos - std::min(e.zero_pos, zero_pos);
      const int coarsest = reader_.can_rewind() ? qmath::minmse_candidate(p0, 0) - kMinMseGrowth - spread : zero_pos;
      for (int pos = std::max(zero_pos + 1, coarsest); pos <= finest; ++pos) positions.push_back(pos);
      const qmath::QRange clip = qmath::clip_range(options_.activation_type);
      errors = summed_over_blocks(threads_, x, n, positions.size(), [&](const float* values, size_t m) {
        return qmath::pof2_squared_errors(values, m, extrema.lo, extrema.hi, positions, p.zero_point, clip);
      });
    }
    // Every position tried before lies at or above `coarsest` (it only moves down, as the range
    // and the spread grow), so none between zero_pos and it misses this sample's error.
    const double squares = errors.empty() ? 0.0 : errors[0];
    for (auto& [pos, total] : e.total)
      if (pos <= zero_pos) total.add(squares);
    for (size_t k = 1; k < positions.size(); ++k) {
      auto [total, added] = e.total.try_emplace(positions[k]);
      if (added && e.samples > 0) {
        if (positions[k] <= e.zero_pos)
          total->second = e.zero_total;  // every earlier sample: its sum of squares
        else
          e.missing_before[positions[k]] = sample;  // beyond the margin: the second pass adds the earlier samples
      }
      total->second.add(errors[k]);
    }
    e.zero_total.add(squares);
    e.zero_pos = std::min(e.zero_pos, zero_pos);
    ++e.samples;
  }

  // MinMSE "MostCommon": one sample's own search, from its own extrema.
  int sample_best_pos(const Range& r, const float* x, size_t n) const {
    qmath::ScaleZeroPoint p = qmath::pof2_scale(r.lo, r.hi, qrange_, options_.activation_type, symmetric_);
    int p0 = qmath::scale_to_pos(p.scale);
    std::vector<Candidate> candidates = minmse_candidates(p0, p.zero_point, options_.activation_type);
    size_t best = least_error(candidate_errors(threads_, x, n, candidates, qmath::ErrorMetric::Squared));
    return qmath::minmse_candidate(p0, static_cast<int>(best));
  }

  // The range a power-of-two position and its zero point represent (the quant_range table).
  TensorRange pof2_range(int pos, double rmin, double rmax) const {
    int64_t zp = qmath::pof2_zero_point(rmin, rmax, qrange_, options_.activation_type, symmetric_, pos);
    double s = qmath::pos_to_scale(pos);
    TensorRange r;
    r.lo = static_cast<double>(qrange_.min - zp) * s;
    r.hi = static_cast<double>(qrange_.max - zp) * s;
    r.pos = pos;
    return r;
  }

  TensorRange range_of(const TensorStats& s) const {
    const MinMaxStats& m = s.minmax;
    TensorRange r;
    switch (options_.method) {
      case Method::MinMax:
      case Method::NonOverflow: {
        Range x = options_.moving_average ? m.moving_average(options_.averaging_constant) : Range{m.min, m.max};
        if (symmetric_) {
          double a = std::max(std::fabs(x.lo), std::fabs(x.hi));
          x = {-a, a};
        }
        if (options_.method == Method::MinMax) return bounds(x.lo, x.hi);
        return pof2_range(qmath::pof2_non_overflow_pos(x.lo, x.hi, qrange_, options_.activation_type, symmetric_), x.lo,
                          x.hi);
      }
      case Method::MinMSE: {
        if (options_.minmse_mode == "All") return pof2_range(s.chosen_pos, m.min, m.max);
        // The most frequent position; ties go to the largest (the finest scale).
        std::map<int, size_t> counts;
        for (const auto& [sample, pos] : s.best_pos) ++counts[pos];
        auto best = counts.begin();
        for (auto it = counts.begin(); it != counts.end(); ++it)
          if (it->second >= best->second) best = it;
        return pof2_range(best->first, m.min, m.max);
      }
      case Method::Entropy: {
        if (m.max_abs == 0) return bounds(0, 0);
        Range x = entropy_range(s.histogram, options_.num_quantized_bins, m.min, m.max);
        return bounds(x.lo, x.hi);
      }
      case Method::Percentile: {
        if (m.max_abs == 0 || m.min == m.max) return bounds(m.min, m.max);
        Range x = percentile_range_of(s, options_.percentile);
        return bounds(x.lo, x.hi);
      }
      case Method::LayerWisePercentile: {
        if (m.max_abs == 0 || m.min == m.max) return bounds(m.min, m.max);
        Range x = s.percentile_ranges.at(s.chosen);
        return bounds(x.lo, x.hi);
      }
      case Method::Distribution: {
        if (m.max_abs == 0) return bounds(0, 0);
        auto [mean, std] = histogram_mean_std(s.histogram, options_.scenario == "p3");
        r.lo = s.histogram.lo();
        r.hi = s.histogram.hi();
        r.mean = mean;
        r.std = std;
        return r;
      }
    }
    return r;
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
    if (options_.method == Method::MinMSE && options_.minmse_mode == "All" && symmetric_) return 1;
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
  bool symmetric_;
  const size_t bins_;  // calib_histogram_bins(options_)
  qmath::QRange qrange_;
  int worker_count_ = 1;  // samples run at once
  int threads_ = 1;       // engine threads of each worker, also used to reduce a tensor
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> index_;
  std::unique_ptr<engine::Session> session_;
  std::vector<std::vector<TensorStats>> workers_;
  size_t samples_ = 0;
  std::vector<size_t> skipped_;
  std::mutex skipped_mutex_;
};

}  // namespace

CalibrationResult calibrate(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
                            const CalibOptions& options) {
  return Calibrator(model, tensors, reader, options).run();
}

}  // namespace onnxptq::calib
