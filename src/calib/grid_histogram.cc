#include "calib/grid_histogram.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <mutex>
#include <string>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "calib/reduce_blocks.h"
#include "calib/stats_bytes.h"
#include "engine/parallel.h"
#include "onnxptq/error.h"

namespace onnxptq::calib {

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

void GridHistogram::write(StatsWriter& out) const {
  out.u8(empty() ? 0 : abs_ ? 2 : 1);  // an empty grid merges as a default one: nothing more
  if (empty()) return;
  out.i64(limit_);
  out.i64(k_);
  out.f64(tail_share_);
  out.i64(floor_);
  out.varint(below_);
  size_t first = 0, last = counts_.size();
  while (first < last && counts_[first] == 0) ++first;
  while (last > first && counts_[last - 1] == 0) --last;
  out.varint(counts_.size());
  out.varint(first);
  out.varint(last - first);
  for (size_t i = first; i < last; ++i) out.varint(counts_[i]);
}

GridHistogram GridHistogram::read(StatsReader& in) {
  GridHistogram g;
  const uint8_t kind = in.u8();
  if (kind > 2) in.fail("a histogram's kind " + std::to_string(kind));
  if (kind == 0) return g;
  const bool abs = kind == 2;
  g.abs_ = abs;
  g.limit_ = in.i64();
  const int64_t k = in.i64();
  g.tail_share_ = in.f64();
  g.floor_ = in.i64();
  g.below_ = in.varint();
  const size_t size = in.count(0);
  const int64_t most = 4 * static_cast<int64_t>(kMaxBins);
  if (g.limit_ < 1 || g.limit_ > most || (g.limit_ & (g.limit_ - 1)) || k < -1100 || k > 1100 ||
      !(g.tail_share_ > 0 && g.tail_share_ <= 1))
    in.fail("a histogram's grid");
  g.k_ = static_cast<int>(k);
  const size_t first = in.count(0), n = in.count();
  if (size != static_cast<size_t>(abs ? g.limit_ : 2 * g.limit_)) in.fail("a histogram's size");
  if (first > size || n > size - first) in.fail("a histogram's counts beyond its size");
  if (g.floor_ < 0 || g.floor_ >= static_cast<int64_t>(size) || (!abs && (g.floor_ || g.below_)))
    in.fail("a histogram's floor");
  g.counts_.assign(size, 0);
  for (size_t i = first; i < first + n; ++i) g.counts_[i] = in.varint();
  return g;
}

}  // namespace onnxptq::calib
