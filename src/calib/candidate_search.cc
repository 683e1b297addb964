#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "calib/candidate_search_detail.h"
#include "calib/reduce_blocks.h"
#include "calib/tensor_ranges_detail.h"
#include "qmath/params.h"

namespace onnxptq::calib {

namespace {

using CandidateErrors = std::vector<double>;

// Whether candidate c quantizes as one before it does (LayerWisePercentile's percentiles often
// fall in the same bin): then it has the same error and, ties going to the first, is never chosen.
bool repeats_earlier(const std::vector<Candidate>& candidates, size_t c) {
  for (size_t b = 0; b < c; ++b)
    if (candidates[b].scale == candidates[c].scale && candidates[b].zero_point == candidates[c].zero_point &&
        candidates[b].clip.min == candidates[c].clip.min && candidates[b].clip.max == candidates[c].clip.max)
      return true;
  return false;
}

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

// How many positions below the coarsest candidate early_minmse_errors scores each sample at,
// beyond the spread of the samples' ranges so far: a tensor whose samples differ 2^k in range
// may well grow as much. Each position costs as much as a candidate, and a range that
// outgrows them (mostly in the first samples, before the spread shows) costs a second pass
// over the samples before it.
constexpr int kMinMseGrowth = 1;

}  // namespace

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
void early_minmse_errors(TensorStats& s, size_t sample, const float* x, size_t n, engine::Extrema extrema,
                         const MethodSettings& settings, bool can_rewind) {
  auto& e = s.early;
  if (!e.usable) return;
  if (e.last_sample == sample || s.minmax.empty() || extrema.non_finite) {
    e.usable = false;
    return;
  }
  e.last_sample = sample;
  qmath::ScaleZeroPoint p = qmath::pof2_scale(s.minmax.min, s.minmax.max, settings.qrange,
                                              settings.options.activation_type, settings.symmetric);
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
    const int coarsest = can_rewind ? qmath::minmse_candidate(p0, 0) - kMinMseGrowth - spread : zero_pos;
    for (int pos = std::max(zero_pos + 1, coarsest); pos <= finest; ++pos) positions.push_back(pos);
    const qmath::QRange clip = qmath::clip_range(settings.options.activation_type);
    errors = summed_over_blocks(settings.threads, x, n, positions.size(), [&](const float* values, size_t m) {
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

int sample_best_pos(const Range& r, const float* x, size_t n, const MethodSettings& settings) {
  qmath::ScaleZeroPoint p =
      qmath::pof2_scale(r.lo, r.hi, settings.qrange, settings.options.activation_type, settings.symmetric);
  int p0 = qmath::scale_to_pos(p.scale);
  std::vector<Candidate> candidates = minmse_candidates(p0, p.zero_point, settings.options.activation_type);
  size_t best = least_error(candidate_errors(settings.threads, x, n, candidates, qmath::ErrorMetric::Squared));
  return qmath::minmse_candidate(p0, static_cast<int>(best));
}

void set_candidates(TensorStats& t, const MethodSettings& settings, size_t samples) {
  if (settings.options.method == Method::LayerWisePercentile) {
    for (double percentile : settings.options.percentile_candidates) {
      t.percentile_ranges.push_back(percentile_range_of(t, percentile, settings.symmetric));
      t.candidates.push_back(percentile_candidate(t.percentile_ranges.back(), settings.options.activation_type));
    }
    t.error_sums.assign(t.candidates.size(), ExactSum());
    t.missing_before.assign(t.candidates.size(), samples);
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
  qmath::ScaleZeroPoint p = qmath::pof2_scale(t.minmax.min, t.minmax.max, settings.qrange,
                                              settings.options.activation_type, settings.symmetric);
  t.candidates = minmse_candidates(qmath::scale_to_pos(p.scale), p.zero_point, settings.options.activation_type);
  t.error_sums.assign(t.candidates.size(), ExactSum());
  t.missing_before.assign(t.candidates.size(), samples);
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

void score_candidates(SamplePasses& passes, std::vector<TensorStats>& merged, size_t limit,
                      const MethodSettings& settings) {
  const qmath::ErrorMetric metric = settings.options.method == Method::MinMSE || settings.options.lwp_metric == "mse"
                                        ? qmath::ErrorMetric::Squared
                                        : qmath::ErrorMetric::Absolute;
  passes.run(
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
        CandidateErrors errors = candidate_errors(settings.threads, x, n, wanted, metric);
        for (size_t k = 0; k < wanted.size(); ++k) s.error_sums[index[k]].add(errors[k]);
      },
      limit);
  for (size_t i = 0; i < merged.size(); ++i)
    for (auto& w : passes.workers())
      for (size_t c = 0; c < w[i].error_sums.size(); ++c) merged[i].error_sums[c].merge(w[i].error_sums[c]);
}

void choose_candidate(TensorStats& t) {
  CandidateErrors totals;
  for (size_t c = 0; c < t.candidates.size(); ++c)
    totals.push_back(repeats_earlier(t.candidates, c) ? INFINITY : t.error_sums[c].value());
  t.chosen = least_error(totals);
  t.chosen_pos = qmath::scale_to_pos(t.candidates[t.chosen].scale);
}

}  // namespace onnxptq::calib
