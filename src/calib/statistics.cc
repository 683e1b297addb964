#include "calib/statistics.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <mutex>
#include <numeric>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "onnxptq/error.h"

namespace onnxptq::calib {

void MinMaxStats::add(size_t sample, engine::Extrema extrema, bool keep_per_sample) {
  if (extrema.empty()) return;  // nothing finite
  const double lo = extrema.lo, hi = extrema.hi;
  min = std::min(min, lo);
  max = std::max(max, hi);
  max_abs = std::max(max_abs, std::max(std::fabs(min), std::fabs(max)));
  if (keep_per_sample) {
    Range& r = per_sample.try_emplace(sample, Range{lo, hi}).first->second;
    r.lo = std::min(r.lo, lo);  // a sample seen in parts (several runs)
    r.hi = std::max(r.hi, hi);
  }
}

void MinMaxStats::merge(const MinMaxStats& other) {
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  max_abs = std::max(max_abs, other.max_abs);
  for (const auto& [sample, r] : other.per_sample) {
    auto [it, fresh] = per_sample.try_emplace(sample, r);
    if (!fresh) {
      it->second.lo = std::min(it->second.lo, r.lo);
      it->second.hi = std::max(it->second.hi, r.hi);
    }
  }
}

Range MinMaxStats::moving_average(double constant) const {
  if (per_sample.empty()) return {min, max};
  Range r = per_sample.begin()->second;
  for (auto it = std::next(per_sample.begin()); it != per_sample.end(); ++it) {
    r.lo += constant * (it->second.lo - r.lo);
    r.hi += constant * (it->second.hi - r.hi);
  }
  return r;
}

Histogram::Histogram(double lo, double hi, size_t bins) : lo_(lo), hi_(hi), counts_(bins, 0) {
  if (bins == 0) throw Error("a histogram needs at least one bin");
  if (!(hi >= lo)) throw Error("histogram range is empty");
}

namespace {

// A chunk's bins from a bin of one value, `bin_of(x)`, in a loop the compiler vectorises.
template <class BinOf>
struct EachValue {
  BinOf bin_of;
  void operator()(const float* data, size_t m, int32_t* index) const {
    // omp simd: GCC's -O2 cost model leaves this loop scalar otherwise.
#pragma omp simd simdlen(16)
    for (size_t i = 0; i < m; ++i) index[i] = bin_of(data[i]);
  }
};

#if defined(__AVX512F__)
// A chunk's grid bins sixteen values at a time, each floor(x * 2^-k) + offset from one fused
// multiply-add and one conversion, both rounding down: x * 2^-k + offset is exact before the add
// rounds, and rounded down it stays at or above its floor (an integer, which a float holds), so
// the conversion gives that floor; a tiny negative x stays below offset (bin -1), where the
// product alone would underflow to -0. Half the instructions of EachValue's floor and clamps.
template <bool kAbs, bool kAllFinite>
struct GridBins512 {
  float scale, offset;
  float first, last;  // the bins values beyond the grid go to (only if max_abs was short of the data)
  int32_t uncounted;  // the bin of NaN and infinities

  void operator()(const float* data, size_t m, int32_t* index) const {
    constexpr int kDown = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    const __m512 scale_v = _mm512_set1_ps(scale), offset_v = _mm512_set1_ps(offset);
    const __m512 first_v = _mm512_set1_ps(first), last_v = _mm512_set1_ps(last);
    for (size_t i = 0; i < m; i += 16) {
      const auto lanes = static_cast<__mmask16>(m - i >= 16 ? 0xFFFF : (1u << (m - i)) - 1);
      __m512 x = _mm512_maskz_loadu_ps(lanes, data + i);
      if constexpr (kAbs) x = _mm512_abs_ps(x);
      __m512 v = _mm512_fmadd_round_ps(x, scale_v, offset_v, kDown);
      // The zero-masking forms: GCC 12 warns of the others' undefined pass-through.
      v = _mm512_maskz_min_ps(lanes, _mm512_maskz_max_ps(lanes, v, first_v), last_v);
      __m512i bin = _mm512_maskz_cvt_roundps_epi32(lanes, v, kDown);
      if constexpr (!kAllFinite) {
        const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(HUGE_VALF), _CMP_LT_OQ);
        bin = _mm512_mask_blend_epi32(finite, _mm512_set1_epi32(uncounted), bin);
      }
      _mm512_mask_storeu_epi32(index + i, lanes, bin);
    }
  }
};
#endif

// Counts values into `counts` by the bins `bins_of(data, m, index)` writes for a chunk of m values
// (counts.size(): not counted) where that bin is at least `floor`, and how many values it counted
// (the others, below the floor, only in that total); values with |x| < value_floor have bins
// below the floor (0: none known to). Every value: a chunk's bins, then the increments. One
// counter takes a thread's blocks of a tensor, one after another.
template <class BinsOf>
class BinCounter {
 public:
  // `narrow`: the increments go to two tables of 16-bit counters taking every other value
  // (8192 counters fit the L1 cache twice; on real activations, many of them in few bins, an
  // increment waits less often on the previous one to the same counter than with one table),
  // added to `counts` every 65535 values, before one could overflow; their last counter takes
  // the values not counted, so that the increments need no test. Not for a few values, where
  // zeroing and adding up the tables would cost more.
  BinCounter(std::vector<uint64_t>& counts, const BinsOf& bins_of, int32_t floor, float value_floor, bool narrow)
      : counts_(counts),
        bins_of_(bins_of),
        floor_(floor),
        value_floor_(value_floor),
        tables_(narrow && floor <= 0 ? 2 * (counts.size() + 1) : 0) {}
  BinCounter(const BinCounter&) = delete;
  BinCounter& operator=(const BinCounter&) = delete;

  void add(const float* data, size_t n) {
    if (floor_ > 0) {
      add_above_floor(data, n);
      return;
    }
    counted_ += n;
    if (tables_.empty()) {
      for (size_t start = 0; start < n; start += kChunk) {
        const size_t m = std::min(kChunk, n - start);
        bins_of_(data + start, m, index_);
        for (size_t i = 0; i < m; ++i)
          if (static_cast<size_t>(index_[i]) < counts_.size()) ++counts_[static_cast<size_t>(index_[i])];
      }
      return;
    }
    uint16_t* const table0 = tables_.data();
    uint16_t* const table1 = table0 + counts_.size() + 1;
    for (size_t start = 0; start < n;) {
      if (pending_ == kFlush) flush();
      const size_t m = std::min({kChunk, n - start, kFlush - pending_});
      bins_of_(data + start, m, index_);
      size_t i = 0;
      for (; i + 2 <= m; i += 2) {
        ++table0[static_cast<size_t>(index_[i])];
        ++table1[static_cast<size_t>(index_[i + 1])];
      }
      for (; i < m; ++i) ++table0[static_cast<size_t>(index_[i])];
      pending_ += m;
      start += m;
    }
  }

  // Adds what the tables hold to `counts`; returns how many values were counted in all.
  uint64_t finish() {
    if (pending_ > 0) flush();
    return counted_;
  }

 private:
  static constexpr size_t kChunk = 1024;
  static constexpr size_t kFlush = 65535;

  void flush() {
    const size_t bins = counts_.size();
    const uint16_t* const table0 = tables_.data();
    const uint16_t* const table1 = table0 + bins + 1;
#pragma omp simd
    for (size_t b = 0; b < bins; ++b) counts_[b] += table0[b] + table1[b];
    std::fill(tables_.begin(), tables_.end(), uint16_t{0});
    pending_ = 0;
  }

  // Most values are below the floor, and |x| < value_floor_ tells so without their bins: with
  // AVX-512, sixteen values compared at once, and their bins only if one of them may reach the
  // floor (or is NaN), the hits found in the bit mask of the bins' comparison.
  void add_above_floor(const float* data, size_t n) {
    const BinsOf bins_of = bins_of_;  // a local copy: its constants stay in registers
    const auto bins = static_cast<int32_t>(counts_.size());
    auto count = [&](int32_t j) {
      ++counted_;
      if (j < bins) ++counts_[static_cast<size_t>(j)];
    };
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512 value_floor = _mm512_set1_ps(value_floor_);
    const __m512i floor_lanes = _mm512_set1_epi32(floor_);
    for (; i + 16 <= n; i += 16) {
      if (!_mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(data + i)), value_floor, _CMP_NLT_UQ)) continue;
      bins_of(data + i, 16, index_);
      for (__mmask16 hit = _mm512_cmpge_epi32_mask(_mm512_load_si512(index_), floor_lanes); hit; hit &= hit - 1)
        count(index_[__builtin_ctz(hit)]);
    }
#endif
    for (size_t start = i; start < n; start += kChunk) {
      const size_t m = std::min(kChunk, n - start);
      bins_of(data + start, m, index_);
      for (size_t j = 0; j < m; ++j)
        if (index_[j] >= floor_) count(index_[j]);
    }
  }

  std::vector<uint64_t>& counts_;
  const BinsOf bins_of_;  // a copy: its constants stay in registers
  const int32_t floor_;
  const float value_floor_;
  std::vector<uint16_t> tables_;
  size_t pending_ = 0;  // values in the tables
  uint64_t counted_ = 0;
  alignas(64) int32_t index_[kChunk];
};

// Counts are integers: each thread counts into its own bins, and the sum is exact. The threads
// take blocks of the tensor as they go, so that one slowed by its values (many to one counter)
// or by the machine does not hold up the other; each keeps its own counter over its blocks.
template <class BinsOf>
uint64_t count_split(std::vector<uint64_t>& counts, const float* data, size_t n, int threads, const BinsOf& bins_of,
                     int32_t floor, float value_floor) {
  const bool narrow = n >= 4 * counts.size();
  if (threads <= 1 || n < 2 * kReduceBlock) {
    BinCounter<BinsOf> counter(counts, bins_of, floor, value_floor, narrow);
    counter.add(data, n);
    return counter.finish();
  }
  std::mutex mutex;
  uint64_t counted = 0;
  std::atomic<size_t> next{0};
  engine::parallel_for(threads, threads, 1, [&](int64_t, int64_t) {
    std::vector<uint64_t> own(counts.size(), 0);
    BinCounter<BinsOf> counter(own, bins_of, floor, value_floor, narrow);
    for (size_t start; (start = next.fetch_add(kReduceBlock)) < n;)
      counter.add(data + start, std::min(kReduceBlock, n - start));
    const uint64_t own_counted = counter.finish();
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < own.size(); ++i) counts[i] += own[i];
    counted += own_counted;
  });
  return counted;
}

}  // namespace

void Histogram::merge(const Histogram& other) {
  if (other.counts_.size() != counts_.size() || other.lo_ != lo_ || other.hi_ != hi_)
    throw Error("histograms over different bins cannot be merged");
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

void Histogram::add_count(double value, uint64_t count) {
  if (!std::isfinite(value)) return;
  const size_t bins = counts_.size();
  double position =
      hi_ <= lo_ ? static_cast<double>(bins / 2) : (value - lo_) * static_cast<double>(bins) / (hi_ - lo_);
  position = std::clamp(position, 0.0, static_cast<double>(bins - 1));
  counts_[static_cast<size_t>(position)] += count;
}

namespace {

// The grid's k before any value other than 0: 2^-k scales every float exactly, in double.
constexpr int kFinestGrid = -200;

}  // namespace

GridHistogram::GridHistogram(size_t bins, bool abs, double tail_share) : abs_(abs), tail_share_(tail_share) {
  if (bins == 0 || bins > kMaxBins) throw Error("histogram bins must be within [1, " + std::to_string(kMaxBins) + "]");
  if (!(tail_share > 0 && tail_share <= 1) || (!abs && tail_share < 1))
    throw Error("a grid histogram keeps a share in (0, 1] of the values exact, of |x| only");
  // At least 2x bins over [-m, m] or [0, m]: m < 2^e and m >= 2^(e-1), and the grid spans 2^e.
  const size_t wanted = (abs ? 4 : 2) * bins;
  limit_ = 1;
  while (static_cast<size_t>(limit_) < wanted) limit_ *= 2;
}

double GridHistogram::width() const { return std::ldexp(1.0, k_); }

void GridHistogram::widen(int k) {
  if (k <= k_) return;
  const int shift = std::min(k - k_, 62);
  const int64_t offset = abs_ ? 0 : limit_;
  std::vector<uint64_t> wider(counts_.size(), 0);
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i]) wider[static_cast<size_t>(((static_cast<int64_t>(i) - offset) >> shift) + offset)] += counts_[i];
  counts_.swap(wider);
  k_ = k;
  // The grid bin holding the old floor now holds values from below it too.
  const int64_t floor = floor_;
  floor_ >>= shift;
  fold_below((floor + (int64_t{1} << shift) - 1) >> shift);
}

void GridHistogram::fold_below(int64_t floor) {
  for (; floor_ < floor; ++floor_) {
    below_ += counts_[static_cast<size_t>(floor_)];
    counts_[static_cast<size_t>(floor_)] = 0;
  }
}

void GridHistogram::raise_floor() {
  uint64_t total = below_;
  for (uint64_t c : counts_) total += c;
  const auto keep = static_cast<uint64_t>(std::ceil(tail_share_ * static_cast<double>(total)));
  uint64_t above = 0;
  for (int64_t j = static_cast<int64_t>(counts_.size()) - 1; j > floor_; --j) {
    above += counts_[static_cast<size_t>(j)];
    if (above >= keep) {
      fold_below(j);
      return;
    }
  }
}

void GridHistogram::add(const float* data, size_t n, double max_abs, int threads, bool all_finite) {
  if (limit_ == 0) throw Error("a grid histogram needs bins");
  if (counts_.empty()) {
    counts_.assign(static_cast<size_t>(abs_ ? limit_ : 2 * limit_), 0);
    k_ = kFinestGrid;
  }
  // The finest k where max_abs < limit * 2^k: with max_abs in [2^(e-1), 2^e), k = e - log2(limit).
  if (max_abs > 0) {
    int e = 0;
    std::frexp(max_abs, &e);
    widen(std::max(k_, e - std::countr_zero(static_cast<uint64_t>(limit_))));
  }
  // x * 2^-k in the type T is exact but where it falls below T's normal range, and there only
  // the sign matters (the bin is 0 or -1): floor is the grid bin. Float has twice the vector
  // lanes; double serves the scales float cannot hold (with AVX-512, floats go to GridBins512).
  // Values known to be finite skip the test (were one not, the clamps would still keep its bin in
  // range).
  auto count_as = [&](auto zero, auto abs_tag, auto finite_tag) {
    using T = decltype(zero);
    constexpr bool kAbs = decltype(abs_tag)::value, kAllFinite = decltype(finite_tag)::value;
    const T scale = static_cast<T>(std::ldexp(1.0, -k_));
    const T top = static_cast<T>(limit_ - 1), bottom = abs_ ? T{0} : -static_cast<T>(limit_);
    const auto offset = static_cast<int32_t>(abs_ ? 0 : limit_);
    const auto uncounted = static_cast<int32_t>(counts_.size());
    const auto floor = static_cast<int32_t>(floor_);
    // |x| < floor * 2^k means |x| * 2^-k < floor: a bin below the floor. As a float, the nearest
    // (no float lies between the two), and at most the largest finite one.
    const float value_floor =
        kAbs && floor > 0
            ? static_cast<float>(std::min(std::ldexp(static_cast<double>(floor), k_), static_cast<double>(FLT_MAX)))
            : 0.0f;
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>)
      return count_split(
          counts_, data, n, threads,
          GridBins512<kAbs, kAllFinite>{scale, static_cast<float>(offset), bottom + static_cast<float>(offset),
                                        top + static_cast<float>(offset), uncounted},
          floor, value_floor);
#endif
    auto bin_of = [=](float x) {
      const bool finite = kAllFinite || std::fabs(x) < HUGE_VALF;
      T v = finite ? static_cast<T>(kAbs ? std::fabs(x) : x) * scale : T{0};
      v = std::floor(v);
      const T cap = !kAbs && x < 0 ? T{-1} : top;  // -1: a product that underflowed to -0
      v = v < cap ? v : cap;
      v = v > bottom ? v : bottom;  // only if max_abs was short of the data
      return finite ? static_cast<int32_t>(v) + offset : uncounted;
    };
    return count_split(counts_, data, n, threads, EachValue<decltype(bin_of)>{bin_of}, floor, value_floor);
  };
  auto count_checked = [&](auto zero, auto abs_tag) {
    return all_finite ? count_as(zero, abs_tag, std::true_type{}) : count_as(zero, abs_tag, std::false_type{});
  };
  const bool in_float = std::abs(k_) < 126;
  uint64_t counted = 0;
  if (abs_ && in_float)
    counted = count_checked(0.0f, std::true_type{});
  else if (abs_)
    counted = count_checked(0.0, std::true_type{});
  else if (in_float)
    counted = count_checked(0.0f, std::false_type{});
  else
    counted = count_checked(0.0, std::false_type{});
  below_ += n - counted;
  if (tail_share_ < 1) raise_floor();
}

void GridHistogram::merge(const GridHistogram& other) {
  if (other.empty()) return;
  if (empty()) {
    *this = other;
    return;
  }
  if (other.abs_ != abs_ || other.limit_ != limit_) throw Error("grid histograms of different sizes cannot be merged");
  GridHistogram o = other;
  o.widen(k_);
  widen(o.k_);
  const int64_t floor = std::max(floor_, o.floor_);
  fold_below(floor);
  o.fold_below(floor);
  below_ += o.below_;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
}

Histogram GridHistogram::rebin(double lo, double hi, size_t bins) const {
  Histogram h(lo, hi, bins);
  const double w = width();
  const int64_t offset = abs_ ? 0 : limit_;
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i]) h.add_count((static_cast<double>(static_cast<int64_t>(i) - offset) + 0.5) * w, counts_[i]);
  if (below_) h.add_count((static_cast<double>(floor_) - 0.5) * w, below_);
  return h;
}

uint64_t Histogram::total() const { return std::accumulate(counts_.begin(), counts_.end(), uint64_t{0}); }

void ExactSum::add(double v) {
  if (std::isnan(v) || v < 0) {
    nan_ = true;
    return;
  }
  if (std::isinf(v)) {
    infinite_ = true;
    return;
  }
  if (v == 0) return;
  if (digits_.empty()) digits_.assign(kDigits, 0);
  int e = 0;
  const double fraction = std::frexp(v, &e);                        // v = fraction * 2^e, fraction in [0.5, 1)
  auto mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));  // v = mantissa * 2^(e - 53)
  int bit = e - 53 + 1074;                                          // of the mantissa's lowest bit, in steps of 2^-1074
  if (bit < 0) {                                                    // a subnormal: its low bits are zeros
    mantissa >>= -bit;
    bit = 0;
  }
  const auto wide = static_cast<unsigned __int128>(mantissa) << (bit % 32);
  const auto word = static_cast<size_t>(bit / 32);
  digits_[word] += static_cast<uint32_t>(wide);
  digits_[word + 1] += static_cast<uint32_t>(wide >> 32);
  digits_[word + 2] += static_cast<uint64_t>(wide >> 64);
  if (++uncarried_ == (uint32_t{1} << 30)) carry();
}

void ExactSum::carry() {
  for (size_t i = 0; i + 1 < digits_.size(); ++i) {
    digits_[i + 1] += digits_[i] >> 32;
    digits_[i] &= 0xffffffffu;
  }
  uncarried_ = 0;
}

void ExactSum::merge(const ExactSum& other) {
  nan_ = nan_ || other.nan_;
  infinite_ = infinite_ || other.infinite_;
  if (other.digits_.empty()) return;
  if (digits_.empty()) digits_.assign(kDigits, 0);
  ExactSum o = other;
  o.carry();  // its digits under 2^32, as one addition adds
  for (size_t i = 0; i < kDigits; ++i) digits_[i] += o.digits_[i];
  if (++uncarried_ == (uint32_t{1} << 30)) carry();
}

double ExactSum::value() const {
  if (nan_) return NAN;
  if (infinite_) return INFINITY;
  ExactSum c = *this;
  c.carry();
  size_t top = c.digits_.size();
  while (top > 0 && c.digits_[top - 1] == 0) --top;
  if (top == 0) return 0;
  // The top three digits (96 bits), with the lowest bit set if anything below is not zero: the
  // conversion to double then rounds as the whole sum would.
  const size_t low = top >= 3 ? top - 3 : 0;
  unsigned __int128 v = 0;
  for (size_t i = top; i-- > low;) v = (v << 32) | c.digits_[i];
  for (size_t i = 0; i < low; ++i)
    if (c.digits_[i]) {
      v |= 1;
      break;
    }
  return std::ldexp(static_cast<double>(v), static_cast<int>(32 * low) - 1074);
}

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

Range percentile_range_symmetric(const Histogram& abs_hist, double percentile, double observed_min,
                                 double observed_max) {
  if (!(percentile >= 0 && percentile <= 100)) throw Error("percentile must be within [0, 100]");
  double total = static_cast<double>(abs_hist.total());
  double threshold = abs_hist.hi();
  double cumulative = 0;
  for (size_t i = 0; i < abs_hist.bins() && total > 0; ++i) {
    cumulative += static_cast<double>(abs_hist.counts()[i]);
    if (cumulative / total >= percentile / 100) {
      threshold = abs_hist.edge(i + 1);
      break;
    }
  }
  return {std::max(-threshold, observed_min), std::min(threshold, observed_max)};
}

Range percentile_range(const Histogram& h, double percentile) {
  if (!(percentile >= 0 && percentile <= 100)) throw Error("percentile must be within [0, 100]");
  double total = static_cast<double>(h.total());
  double cut = (100 - percentile) / 200;
  Range r{h.lo(), h.hi()};
  if (total == 0) return r;
  double cumulative = 0;
  bool low_found = false;
  for (size_t i = 0; i < h.bins(); ++i) {
    cumulative += static_cast<double>(h.counts()[i]);
    double share = cumulative / total;
    if (!low_found && share > cut) {
      r.lo = h.edge(i);
      low_found = true;
    }
    if (share >= 1 - cut) {
      r.hi = h.edge(i + 1);
      break;
    }
  }
  return r;
}

std::pair<double, double> histogram_mean_std(const Histogram& h, bool cube_root) {
  double n = 0, sum = 0, sum_sq = 0;
  for (size_t i = 0; i < h.bins(); ++i) {
    double c = static_cast<double>(h.counts()[i]);
    double v = (h.edge(i) + h.edge(i + 1)) / 2;
    if (cube_root) v = std::cbrt(v);
    n += c;
    sum += c * v;
    sum_sq += c * v * v;
  }
  if (n == 0) return {0, 0};
  double mean = sum / n;
  return {mean, std::sqrt(std::max(sum_sq / n - mean * mean, 0.0))};
}

}  // namespace onnxptq::calib
