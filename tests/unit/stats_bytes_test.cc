// The bytes of calibration statistics between ranks and in shard files: what is read back merges
// exactly as the original does, bytes that end early or hold impossible values are refused, and
// the samples are shared out contiguously.
#include "calib/stats_bytes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "calib/tensor_stats_detail.h"
#include "engine/extrema.h"
#include "onnxptq/error.h"
#include "onnxptq/sample_ranks.h"

namespace onnxptq::calib {
namespace {

std::vector<float> stats_bytes_values(uint32_t seed, size_t n, float scale) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> t(3);
  std::vector<float> v(n);
  for (float& x : v) x = t(rng) * scale;
  return v;
}

// A worker's statistics of two tensors as the passes fill them: extrema, per-sample extrema,
// MinMSE positions, a grid of x and a grid of |x| keeping its tail only, exact error sums.
std::vector<TensorStats> stats_bytes_worker(uint32_t seed) {
  std::vector<TensorStats> w(2);
  for (size_t sample = 0; sample < 3; ++sample) {
    std::vector<float> x = stats_bytes_values(seed + static_cast<uint32_t>(sample), 999, 1.5f + sample);
    const engine::Extrema e = engine::finite_extrema(x.data(), x.size());
    for (size_t i = 0; i < 2; ++i) {
      TensorStats& t = w[i];
      t.seen = true;
      t.minmax.add(seed * 10 + sample, e, true);
      t.best_pos[seed * 10 + sample] = static_cast<int>(sample) - 3;
      if (t.grid.empty()) t.grid = GridHistogram(64, i == 1, i == 1 ? 0.05 : 1);
      t.grid.add(x.data(), x.size(), e.abs_max());
      t.error_sums.resize(3);
      for (size_t c = 0; c < 3; ++c) t.error_sums[c].add(std::ldexp(x[c] * x[c], -static_cast<int>(c) * 300));
    }
  }
  return w;
}

std::string stats_bytes_of(const ShareStats& share) {
  StatsWriter out;
  write_share_stats(share, out);
  return out.bytes();
}

TEST(StatsBytes, ReadBackWritesTheSameBytesAndMergesAsTheOriginal) {
  ShareStats a{21, {4, 9}, stats_bytes_worker(1)};
  const std::string bytes = stats_bytes_of(a);
  StatsReader in(bytes, "rank 1");
  ShareStats b = read_share_stats(in, 2);
  EXPECT_EQ(stats_bytes_of(b), bytes);
  EXPECT_EQ(b.samples, 21u);
  EXPECT_EQ(b.skipped, (std::vector<size_t>{4, 9}));

  // Merged with another worker's, the copy gives what the original gives.
  std::vector<std::vector<TensorStats>> original = {stats_bytes_worker(2), stats_bytes_worker(1)};
  std::vector<std::vector<TensorStats>> copied = {stats_bytes_worker(2), std::move(b.stats)};
  std::vector<TensorStats> m1 = merge_workers(original, 2), m2 = merge_workers(copied, 2);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(m1[i].minmax.min, m2[i].minmax.min);
    EXPECT_EQ(m1[i].minmax.max, m2[i].minmax.max);
    EXPECT_EQ(m1[i].minmax.moving_average(0.1).lo, m2[i].minmax.moving_average(0.1).lo);
    EXPECT_EQ(m1[i].minmax.per_sample.size(), 6u);
    EXPECT_EQ(m1[i].best_pos, m2[i].best_pos);
    EXPECT_EQ(m1[i].grid.below_floor(), m2[i].grid.below_floor());
    EXPECT_EQ(m1[i].grid.rebin(0, m1[i].minmax.max_abs, 32).counts(),
              m2[i].grid.rebin(0, m2[i].minmax.max_abs, 32).counts());
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(m1[i].error_sums[c].value(), m2[i].error_sums[c].value());
  }
  EXPECT_GT(m1[1].grid.below_floor(), 0u);  // the tail-only grid's folded count travelled too
}

TEST(StatsBytes, BytesEndingEarlyOrImpossibleAreRefused) {
  const std::string bytes = stats_bytes_of(ShareStats{3, {}, stats_bytes_worker(5)});
  for (size_t cut : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    const std::string part = bytes.substr(0, cut);
    StatsReader in(part, "rank 2");
    try {
      read_share_stats(in, 2);
      ADD_FAILURE() << "read " << cut << " of " << bytes.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("rank 2: corrupt statistics (", 0), 0u) << e.what();
    }
  }
  StatsReader other(bytes, "rank 2");
  EXPECT_THROW(read_share_stats(other, 3), Error);  // another tensor count
  const std::string longer = bytes + "x";
  StatsReader extra(longer, "rank 2");
  EXPECT_THROW(read_share_stats(extra, 2), Error);
}

// Contiguous shares in rank order, covering every sample once, sizes differing by at most one.
TEST(StatsBytes, SampleSharesAreContiguousAndEven) {
  for (size_t samples : {0, 1, 2, 7, 100})
    for (int ranks : {1, 2, 3, 8}) {
      size_t next = 0, smallest = SIZE_MAX, largest = 0;
      for (int r = 0; r < ranks; ++r) {
        SampleShare s = sample_share(samples, r, ranks);
        EXPECT_EQ(s.begin, next);
        EXPECT_LE(s.begin, s.end);
        smallest = std::min(smallest, s.end - s.begin);
        largest = std::max(largest, s.end - s.begin);
        next = s.end;
      }
      EXPECT_EQ(next, samples);
      EXPECT_LE(largest - smallest, 1u);
    }
  EXPECT_EQ(sample_share(7, 0, 3).end, 3u);  // the first ranks take the extra samples
}

}  // namespace
}  // namespace onnxptq::calib
