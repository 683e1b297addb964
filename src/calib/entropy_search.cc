#include "calib/entropy_search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "onnxptq/error.h"

namespace onnxptq::calib {

namespace {

// A sum kept in two doubles, the second holding what the first lost to rounding (Knuth's
// two-sum): a difference of two prefix sums is then the sum of the terms between them to within
// a rounding of that difference, however large the prefixes.
struct PreciseSum {
  double hi = 0, lo = 0;
  PreciseSum plus(double x) const {
    const double s = hi + x, b = s - hi;
    return {s, lo + ((hi - (s - b)) + (x - b))};
  }
  // Less x * y, the product exact (its rounding error from a fused multiply-add).
  PreciseSum minus_product(double x, double y) const {
    const double product = x * y;
    return plus(-product).plus(-std::fma(x, y, -product));
  }
  double value() const { return hi + lo; }
};

// What the entropy search sums over bins, as prefix sums over the histogram (entry k: bins
// [0, k)), so that a window's sums cost O(levels), not O(width). Counts are integers below 2^53:
// their sums are exact in double, so those prefix differences are exactly the sums bin by bin.
struct EntropySums {
  std::vector<double> below;   // the counts
  std::vector<size_t> filled;  // the bins with a count
  // Of the bins with a count, in order (bin k's at filled[k]): the count, its log and its inverse.
  std::vector<double> count, log_count, inverse_count;
  // Over the bins with a count c: c log c, log c, and 1 / c^j for j = 1, 2, ... (the series of
  // window_kl, as many terms as asked for).
  std::vector<PreciseSum> c_log_c, log_c;
  std::vector<std::vector<PreciseSum>> inverse_power;  // [j - 1]: of 1 / c^j

  explicit EntropySums(const std::vector<uint64_t>& hist) {
    const size_t bins = hist.size();
    below.assign(bins + 1, 0);
    filled.assign(bins + 1, 0);
    c_log_c.assign(bins + 1, {});
    log_c.assign(bins + 1, {});
    for (size_t k = 0; k < bins; ++k) {
      const auto c = static_cast<double>(hist[k]);
      below[k + 1] = below[k] + c;
      filled[k + 1] = filled[k] + (hist[k] != 0);
      const double log = hist[k] ? std::log(c) : 0;
      c_log_c[k + 1] = c_log_c[k].plus(c * log);
      log_c[k + 1] = log_c[k].plus(log);
      if (!hist[k]) continue;
      count.push_back(c);
      log_count.push_back(log);
      inverse_count.push_back(1 / c);
    }
  }
  void add_inverse_powers(const std::vector<uint64_t>& hist, size_t terms) {
    inverse_power.assign(terms, std::vector<PreciseSum>(hist.size() + 1));
    for (size_t k = 0; k < hist.size(); ++k) {
      const double inverse = hist[k] ? 1 / static_cast<double>(hist[k]) : 0;
      double power = 1;
      for (auto& sums : inverse_power) {
        power *= inverse;
        sums[k + 1] = sums[k].plus(power);
      }
    }
  }
  // The sum of bins [a, b) of one of the prefix sums, added to `to`.
  static PreciseSum add_between(PreciseSum to, const std::vector<PreciseSum>& prefix, size_t a, size_t b) {
    return to.plus(prefix[b].hi).plus(-prefix[a].hi).plus(prefix[b].lo - prefix[a].lo);
  }
  static double between(const std::vector<PreciseSum>& prefix, size_t a, size_t b) {
    return add_between({}, prefix, a, b).value();
  }
};

// What smoothing gives each empty entry of the distributions the entropy search compares.
constexpr double kEntropyEps = 1e-4;

// The terms of window_kl's series that a window needs whose smoothing takes t < 1/4 from each
// count: those whose bound t^(j+1) / (j (j + 1)) is at least 1e-18 (24 at most).
size_t series_terms(double t) {
  size_t terms = 0;
  for (double power = t * t; power / static_cast<double>((terms + 1) * (terms + 2)) >= 1e-18; power *= t) ++terms;
  return terms;
}

// One window of the entropy search: bins [start, start + width) of the histogram, with the
// counts outside folded onto its first and last bin.
struct EntropyWindow {
  const std::vector<uint64_t>& hist;
  const EntropySums& sums;
  size_t start, width, per, levels;

  size_t level_begin(size_t level) const { return level * per; }
  size_t level_end(size_t level) const { return level + 1 == levels ? width : (level + 1) * per; }
  double outliers_low() const { return sums.below[start]; }
  double outliers_high() const { return sums.below.back() - sums.below[start + width]; }
  // p[k]: the window's count k, outliers folded onto the edges.
  double p(size_t k) const {
    double c = static_cast<double>(hist[start + k]);
    if (k == 0) c += outliers_low();
    if (k + 1 == width) c += outliers_high();
    return c;
  }
  // Whether an edge bin has data in p only from the outliers folded onto it (widths are even:
  // the edges are two bins).
  bool low_edge_only_outliers() const { return hist[start] == 0 && outliers_low() > 0; }
  bool high_edge_only_outliers() const { return hist[start + width - 1] == 0 && outliers_high() > 0; }
  // The bins with data in p.
  size_t with_data() const {
    return sums.filled[start + width] - sums.filled[start] + low_edge_only_outliers() + high_edge_only_outliers();
  }
  // What smoothing takes from each of p's counts: eps for each empty bin, shared by the others.
  double p_take() const {
    const size_t data = with_data();
    return kEntropyEps * static_cast<double>(width - data) / static_cast<double>(data);
  }
  // The level's counts as counted (without the outliers), and its bins with data in p.
  double mass(size_t level) const {
    return sums.below[start + level_end(level)] - sums.below[start + level_begin(level)];
  }
  size_t nonzero(size_t level) const {
    size_t b = level_begin(level), e = level_end(level);
    if (b == e) return 0;  // (levels of no bin when the width is less than the levels)
    return sums.filled[start + e] - sums.filled[start + b] + (b == 0 && low_edge_only_outliers()) +
           (e == width && high_edge_only_outliers());
  }
};

// Per level, what window_kl works out (kept from window to window: no allocation in the search).
struct LevelScratch {
  std::vector<size_t> nonzero;  // bins with data in p
  std::vector<double> mass;     // counts, as counted
  std::vector<double> log_q;    // log of the smoothed, normalised q of its bins with data
  explicit LevelScratch(size_t levels) : nonzero(levels), mass(levels), log_q(levels) {}
};

// KL(p || q) of one window, both smoothed first (TensorRT's and ORT's way: each empty entry
// gets eps, taken evenly from the others; the sums stay). q is constant over the bins of a
// level that hold data in p, and p's empty bins are q's: a log per level, and per bin with data
// one taken once per histogram (below). Infinite where smoothing leaves a q entry <= 0, or
// nothing to smooth.
double window_kl(const EntropyWindow& w, LevelScratch& scratch) {
  constexpr double kEps = kEntropyEps;
  const size_t width = w.width, levels = w.levels;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // q: a level's mass spread evenly over its bins with data in p (0 elsewhere).
  std::vector<size_t>& nonzero = scratch.nonzero;
  std::vector<double>&mass = scratch.mass, &log_q = scratch.log_q;
  const double p_sum = w.sums.below.back();  // the window and its outliers: every count
  const size_t p_zeros = width - w.with_data();
  size_t q_zeros = p_zeros;  // and the bins of a level with data in p but no mass
  double q_sum = 0;
  for (size_t level = 0; level < levels; ++level) {
    nonzero[level] = w.nonzero(level);
    mass[level] = w.mass(level);
    if (mass[level] == 0) q_zeros += nonzero[level];
    if (nonzero[level]) q_sum += mass[level];
  }
  if (p_zeros == width || q_zeros == width) return kInf;
  const double p_take = w.p_take();
  const double q_take = kEps * static_cast<double>(q_zeros) / static_cast<double>(width - q_zeros);
  for (size_t level = 0; level < levels; ++level) {
    if (!nonzero[level]) continue;
    double q = mass[level] == 0 ? kEps : mass[level] / static_cast<double>(nonzero[level]) - q_take;
    if (q <= 0) return kInf;
    log_q[level] = std::log(q / q_sum);
  }
  // Empty bins of p: eps in both.
  const double empty_p = kEps / p_sum;
  double kl = static_cast<double>(p_zeros) * empty_p * std::log(empty_p / (kEps / q_sum));
  // log pk = log(c - p_take) - log(p_sum). The logs of the edges (which take the outliers) are
  // computed; the inner bins' sum comes from prefix sums where the series below converges fast
  // enough, and term by term otherwise.
  const double log_sum = std::log(p_sum), inverse_sum = 1 / p_sum;
  auto add_edge = [&](size_t k, size_t level) {
    const double c = w.p(k);
    const double pk = (c - p_take) * inverse_sum;
    if (c != 0 && pk > 0) kl += pk * (std::log(c - p_take) - log_sum - log_q[level]);
  };
  const size_t terms = p_take < 0.25 ? series_terms(p_take) : SIZE_MAX;
  if (terms <= w.sums.inverse_power.size()) {
    // The inner bins (count c >= 1 > t = p_take) in O(levels) instead of a term each: with
    // x = t / c < 1/4, (c - t) log(c - t) = (c - t) log c + (c - t) log1p(-x)
    // = c log c - t log c - t + sum over j >= 1 of t x^j / (j (j + 1)), the series taken until a
    // term is below 1e-18 for every c (t^(j+1) / (j (j + 1))); each of its sums over the window's
    // inner bins comes from the prefix sums, and so do each level's counts and bins with a count,
    // which multiply its log q. The sum of c log c and that of each level's p log q nearly cancel
    // (their difference is the divergence): both are kept with what rounding took from them.
    const EntropySums& sums = w.sums;
    const size_t a = w.start + 1, b = w.start + width - 1;
    const double t = p_take, n = static_cast<double>(sums.filled[b] - sums.filled[a]);
    PreciseSum inner = EntropySums::add_between({}, sums.c_log_c, a, b)
                           .minus_product(t, EntropySums::between(sums.log_c, a, b))
                           .plus(-n * t);
    double t_power = t;  // t^j
    for (size_t j = 1; j <= terms; ++j) {
      t_power *= t;
      inner = inner.plus(t_power / static_cast<double>(j * (j + 1)) *
                         EntropySums::between(sums.inverse_power[j - 1], a, b));
    }
    size_t low_edge_level = levels;  // the level of bin 0: the first with bins
    for (size_t level = 0; level < levels; ++level) {
      const size_t begin = w.level_begin(level), end = w.level_end(level);
      if (begin == end) continue;
      if (begin == 0) low_edge_level = level;
      if (!nonzero[level]) continue;
      // The level's inner bins: its counts and its bins with a count, less the edges'.
      double inner_mass = mass[level];
      auto with_count = static_cast<double>(sums.filled[w.start + end] - sums.filled[w.start + begin]);
      for (size_t edge : {size_t{0}, width - 1})
        if (edge >= begin && edge < end) {
          inner_mass -= static_cast<double>(w.hist[w.start + edge]);
          with_count -= w.hist[w.start + edge] != 0;
        }
      inner = inner.minus_product(log_sum + log_q[level], inner_mass - with_count * t);
    }
    kl += inner.value() * inverse_sum;
    add_edge(0, low_edge_level);
    add_edge(width - 1, levels - 1);
    return kl;
  }
  // Term by term (smoothing takes a quarter or more from a count of 1: many bins, few with data),
  // walking the list of bins with a count. log(c - p_take) = log c + log1p(-x), x = p_take / c:
  // log c is computed once per histogram, and for x < 1e-4 three terms of the series of log1p
  // leave out less than x^4 / 4 < 3e-17 (below the rounding of the log itself). Divisions are by
  // multiplying with inverses (within an ulp).
  for (size_t level = 0; level < levels; ++level) {
    size_t begin = w.level_begin(level), end = w.level_end(level);
    if (begin == end) continue;
    if (begin == 0) add_edge(begin++, level);
    const bool high_edge = end == width;
    end -= high_edge;
    for (size_t j = w.sums.filled[w.start + begin], last = w.sums.filled[w.start + end]; j < last; ++j) {
      const double c = w.sums.count[j];
      const double pk = (c - p_take) * inverse_sum;
      if (pk <= 0) continue;
      const double x = p_take * w.sums.inverse_count[j];
      const double log_taken = x >= 1e-4 ? std::log(c - p_take) : w.sums.log_count[j] - x * (1 + x * (0.5 + x / 3));
      kl += pk * (log_taken - log_sum - log_q[level]);
    }
    if (high_edge) add_edge(width - 1, level);
  }
  return kl;
}

// Half the width of the narrowest window of the entropy search, in bins.
size_t narrowest_window(size_t quantized_bins) { return std::max<size_t>(quantized_bins / 2, 1); }

}  // namespace

std::vector<double> entropy_divergences(const Histogram& h, size_t quantized_bins) {
  const auto& hist = h.counts();
  size_t bins = hist.size();
  if (bins % 2 != 0 || quantized_bins == 0 || quantized_bins > bins)
    throw Error("entropy calibration needs an even bin count of at least num_quantized_bins");
  const size_t zero = bins / 2, first = narrowest_window(quantized_bins);
  EntropySums sums(hist);
  // Levels merge the window as counted: quantized_bins levels of `per` bins, the last taking the rest.
  auto window = [&](size_t i) {
    return EntropyWindow{hist, sums, zero - i, 2 * i, 2 * i / quantized_bins, quantized_bins};
  };
  // The series' terms as many as the windows need, within 64 MB of prefix sums (windows that
  // need more are summed bin by bin).
  size_t terms = 0;
  for (size_t i = first; i <= zero; ++i) {
    const double t = window(i).p_take();
    if (t < 0.25) terms = std::max(terms, series_terms(t));
  }
  sums.add_inverse_powers(hist, std::min(terms, (size_t{64} << 20) / sizeof(PreciseSum) / (bins + 1)));
  LevelScratch scratch(quantized_bins);
  std::vector<double> divergences;
  for (size_t i = first; i <= zero; ++i) divergences.push_back(window_kl(window(i), scratch));
  return divergences;
}

Range entropy_range(const Histogram& h, size_t quantized_bins, double observed_min, double observed_max) {
  const std::vector<double> divergences = entropy_divergences(h, quantized_bins);
  const size_t zero = h.bins() / 2, first = narrowest_window(quantized_bins);
  size_t best_i = zero;
  double best_kl = std::numeric_limits<double>::infinity();
  for (size_t i = first; i <= zero; ++i)
    if (divergences[i - first] < best_kl) {
      best_kl = divergences[i - first];
      best_i = i;
    }
  return {std::max(h.edge(zero - best_i), observed_min), std::min(h.edge(zero + best_i), observed_max)};
}

}  // namespace onnxptq::calib
