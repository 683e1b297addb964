// Calibration statistics against values computed independently: closed forms, and numpy
// (Debian's python3-numpy) in a script the test runs.
#include "calib/statistics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "ir/npy.h"

namespace onnxptq::calib {
namespace {

namespace fs = std::filesystem;

// Runs numpy code in a fresh folder; the test reads back what it saved.
class Numpy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_stats_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void python(const std::string& code) {
    std::ofstream(dir_ / "script.py") << "import numpy as np, os\nos.chdir(" << dir_ << ")\n" << code;
    ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir_ / "script.py").string()).c_str()), 0);
  }
  std::vector<float> floats(const std::string& name) {
    ir::Tensor t = ir::load_npy(dir_ / name);
    auto v = t.values<float>();
    return {v.begin(), v.end()};
  }
  double scalar(const std::string& name) { return ir::load_npy(dir_ / name).values<double>()[0]; }
  fs::path dir_;
};

// Counts each value (|value| with `abs`) into `h`.
void count(Histogram& h, const float* x, size_t n, bool abs = false) {
  for (size_t i = 0; i < n; ++i) h.add_count(abs ? std::fabs(x[i]) : x[i], 1);
}

TEST(MinMaxStats, ExtremaSkipNonFiniteAndMergeInAnyOrder) {
  std::vector<float> a = {1, -2, NAN, 5}, b = {INFINITY, -7, 3};
  MinMaxStats one, two, merged;
  one.add(0, engine::finite_extrema(a.data(), a.size()), true);
  two.add(1, engine::finite_extrema(b.data(), b.size()), true);
  merged.merge(two);
  merged.merge(one);
  EXPECT_EQ(merged.min, -7);
  EXPECT_EQ(merged.max, 5);
  EXPECT_EQ(merged.max_abs, 7);
  EXPECT_EQ(merged.per_sample.size(), 2u);
  // EMA with constant 0.5 from sample 0: lo = -2 + 0.5 * (-7 - -2) = -4.5, hi = 5 + 0.5 * (3 - 5) = 4.
  Range r = merged.moving_average(0.5);
  EXPECT_DOUBLE_EQ(r.lo, -4.5);
  EXPECT_DOUBLE_EQ(r.hi, 4.0);
}

TEST(MinMaxStats, LongBlocksSkipNonFiniteWhereverTheyAre) {
  // Long enough for the vectorised lanes; each non-finite kind alone, then all of them, at the
  // start, inside and at the end. Expected: a plain loop over the finite values.
  std::vector<float> base(1000);
  for (size_t i = 0; i < base.size(); ++i) base[i] = std::sin(static_cast<float>(i)) * static_cast<float>(i % 97);
  const std::vector<std::vector<size_t>> places = {{0}, {517}, {999}, {0, 300, 999}};
  for (float bad : {NAN, INFINITY, -INFINITY})
    for (const auto& at : places) {
      std::vector<float> x = base;
      for (size_t i : at) x[i] = bad;
      double lo = INFINITY, hi = -INFINITY;
      for (float v : x)
        if (std::isfinite(v)) {
          lo = std::min(lo, static_cast<double>(v));
          hi = std::max(hi, static_cast<double>(v));
        }
      MinMaxStats s;
      s.add(0, engine::finite_extrema(x.data(), x.size()), false);
      EXPECT_EQ(s.min, lo) << bad << " at " << at.size() << " places";
      EXPECT_EQ(s.max, hi) << bad << " at " << at.size() << " places";
    }
  std::vector<float> nothing(300, NAN);
  nothing[7] = INFINITY;
  MinMaxStats none;
  none.add(0, engine::finite_extrema(nothing.data(), nothing.size()), false);
  EXPECT_TRUE(none.empty());
}

TEST_F(Numpy, MovingAverageMatchesAnEmaInNumpy) {
  python(R"(
rng = np.random.default_rng(3)
samples = [rng.normal(size=50).astype(np.float32) * (1 + i) for i in range(20)]
np.save('samples.npy', np.stack(samples))
lo, hi = float(samples[0].min()), float(samples[0].max())
for s in samples[1:]:
    lo += 0.01 * (float(s.min()) - lo)
    hi += 0.01 * (float(s.max()) - hi)
np.save('lo.npy', np.array([lo])); np.save('hi.npy', np.array([hi]))
)");
  std::vector<float> all = floats("samples.npy");
  MinMaxStats stats;
  for (size_t i = 20; i-- > 0;) stats.add(i, engine::finite_extrema(all.data() + i * 50, 50), true);  // any order
  Range r = stats.moving_average(0.01);
  EXPECT_NEAR(r.lo, scalar("lo.npy"), 1e-12);
  EXPECT_NEAR(r.hi, scalar("hi.npy"), 1e-12);
}

TEST_F(Numpy, HistogramCountsAreNumpys) {
  python(R"(
rng = np.random.default_rng(1)
x = rng.integers(0, 100, size=10007).astype(np.float32)
np.save('x.npy', x)
counts, _ = np.histogram(x, bins=100, range=(-0.5, 99.5))
np.save('counts.npy', counts.astype(np.float32))
)");
  std::vector<float> x = floats("x.npy");
  Histogram whole(-0.5, 99.5, 100), part1(-0.5, 99.5, 100), part2(-0.5, 99.5, 100);
  count(whole, x.data(), x.size());
  count(part2, x.data() + 5000, x.size() - 5000);  // split and merged the other way round
  count(part1, x.data(), 5000);
  part2.merge(part1);
  std::vector<float> expected = floats("counts.npy");
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(static_cast<float>(whole.counts()[i]), expected[i]) << i;
    ASSERT_EQ(part2.counts()[i], whole.counts()[i]) << i;
  }
}

TEST_F(Numpy, PercentileOfAKnownDistribution) {
  python(R"(
rng = np.random.default_rng(7)
x = rng.standard_normal(200000).astype(np.float32)
np.save('x.npy', x)
np.save('p.npy', np.array([np.percentile(np.abs(x), 99.0)]))
np.save('lo.npy', np.array([np.percentile(x, 0.5)])); np.save('hi.npy', np.array([np.percentile(x, 99.5)]))
)");
  std::vector<float> x = floats("x.npy");
  MinMaxStats mm;
  mm.add(0, engine::finite_extrema(x.data(), x.size()), false);
  Histogram abs_hist(0, mm.max_abs, 2048);
  count(abs_hist, x.data(), x.size(), true);
  double bin = mm.max_abs / 2048;
  Range sym = percentile_range_symmetric(abs_hist, 99.0, mm.min, mm.max);
  EXPECT_NEAR(sym.hi, scalar("p.npy"), bin);
  EXPECT_GE(sym.hi, scalar("p.npy"));  // the right edge: at least 99 % inside
  EXPECT_EQ(sym.lo, -sym.hi);
  // 99.0 % of |N(0,1)| lies below 2.5758.
  EXPECT_NEAR(sym.hi, 2.5758, 0.03);

  Histogram h(mm.min, mm.max, 2048);
  count(h, x.data(), x.size());
  Range two_sided = percentile_range(h, 99.0);
  double width = (mm.max - mm.min) / 2048;
  EXPECT_NEAR(two_sided.lo, scalar("lo.npy"), width);
  EXPECT_NEAR(two_sided.hi, scalar("hi.npy"), width);
}

// The grid's counts depend on the values only: counted whole, or in parts whose range grows
// (small values first, then larger ones, in either order) and merged, they are the same.
TEST(GridHistogram, CountsDoNotDependOnOrderOrSplit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(30000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i < 10000 ? 0.001f : i < 20000 ? 1.f : 300.f);
  x[123] = NAN;
  x[456] = -INFINITY;
  auto part_max = [&](size_t b, size_t e) {
    MinMaxStats m;
    m.add(0, engine::finite_extrema(x.data() + b, e - b), false);
    return m.max_abs;
  };
  for (bool abs : {false, true}) {
    GridHistogram whole(64, abs);
    whole.add(x.data(), x.size(), part_max(0, x.size()));
    GridHistogram forward(64, abs), backward(64, abs), merged(64, abs), other(64, abs);
    for (size_t p = 0; p < 3; ++p) forward.add(x.data() + p * 10000, 10000, part_max(p * 10000, (p + 1) * 10000));
    for (size_t p = 3; p-- > 0;) backward.add(x.data() + p * 10000, 10000, part_max(p * 10000, (p + 1) * 10000), 2);
    merged.add(x.data(), 15000, part_max(0, 15000));
    other.add(x.data() + 15000, 15000, part_max(15000, 30000));
    merged.merge(other);
    Histogram expected = whole.rebin(-300, 300, 1000);
    for (const GridHistogram* g : {&forward, &backward, &merged}) {
      EXPECT_EQ(g->width(), whole.width());
      EXPECT_EQ(g->rebin(-300, 300, 1000).counts(), expected.counts());
    }
    EXPECT_EQ(expected.total(), x.size() - 2);  // NaN and -inf not counted
  }
}

// Told that the values are finite, the grid skips its test for NaN and infinities and counts
// alike: signed and |x| grids, tiny negative values whose product underflows to -0 (bin -1),
// scales float holds and scales only double holds (values near 1e-40 and 1e30).
TEST(GridHistogram, KnownFiniteValuesCountAlike) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0, 1);
  for (float scale : {1.f, 1e-40f, 1e30f}) {
    std::vector<float> x(70000);
    for (float& v : x) v = normal(rng) * scale;
    x[3] = -1e-45f;  // the smallest subnormal
    const double m = engine::finite_extrema(x.data(), x.size()).abs_max();
    for (bool abs : {false, true})
      for (int threads : {1, 2}) {
        GridHistogram checked(512, abs), trusted(512, abs);
        checked.add(x.data(), x.size(), m, threads);
        trusted.add(x.data(), x.size(), m, threads, true);
        EXPECT_EQ(trusted.rebin(abs ? 0 : -m, m, 512).counts(), checked.rebin(abs ? 0 : -m, m, 512).counts())
            << scale << " " << abs << " " << threads;
      }
  }
}

// Each value lands in grid bin floor(x / width), worked out here in double (exact: the width is a
// power of two), clamped to the grid: on and next to every bin edge, zeros of both signs, tiny
// values (a negative one is in bin -1, also where its product with 1 / width underflows to -0, as
// on the grid of 2^20), subnormals, values beyond the largest |x| the grid was told of, and
// lengths that end mid-vector. The tests' second executable runs this without AVX-512.
TEST(GridHistogram, EachValueLandsInTheBinOfItsExactQuotient) {
  for (auto [abs, max] : {std::pair{false, 1.f}, {true, 1.f}, {false, 0x1p20f}, {true, 0x1p20f}}) {
    GridHistogram probe(64, abs);
    probe.add(&max, 1, max);
    const double width = probe.width();
    const auto limit = static_cast<int64_t>(std::lround(2 * max / width));  // the grid spans [-2 max, 2 max)
    std::vector<float> x;
    for (int64_t j = -limit; j <= limit; ++j) {
      auto edge = static_cast<float>(static_cast<double>(j) * width);
      x.insert(x.end(), {edge, std::nextafter(edge, -INFINITY), std::nextafter(edge, INFINITY)});
    }
    x.insert(x.end(), {0.f, -0.f, 1e-45f, -1e-45f, 1e-39f, -1e-39f, 1e-30f, -1e-30f, 5 * max, -5 * max, 1e30f, -1e30f});
    for (size_t n : {x.size(), x.size() - 5, size_t{1}, size_t{17}}) {
      for (bool finite : {false, true}) {
        GridHistogram grid(64, abs);
        grid.add(x.data(), n, max, 1, finite);
        ASSERT_EQ(grid.width(), width);
        const int64_t bottom = abs ? 0 : -limit;
        Histogram expected(static_cast<double>(bottom) * width, static_cast<double>(limit) * width,
                           static_cast<size_t>(limit - bottom));
        for (size_t i = 0; i < n; ++i) {
          const double v = abs ? std::fabs(static_cast<double>(x[i])) : static_cast<double>(x[i]);
          const double bin =
              std::clamp(std::floor(v / width), static_cast<double>(bottom), static_cast<double>(limit - 1));
          expected.add_count((bin + 0.5) * width, 1);
        }
        EXPECT_EQ(grid.rebin(expected.lo(), expected.hi(), expected.bins()).counts(), expected.counts())
            << "abs " << abs << ", max " << max << ", " << n << " values, finite " << finite;
      }
    }
  }
}

// A bin takes more values than a 16-bit counter holds, every one of them: 0.5 at every other
// position (all in one of the two tables the increments alternate between), 2 at the others,
// over several flushes of the tables and an odd length.
TEST(GridHistogram, ABinTakesMoreValuesThanASixteenBitCounterHolds) {
  std::vector<float> x(400001);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? 2.0f : 0.5f;
  for (int threads : {1, 2}) {
    GridHistogram grid(512, false);
    grid.add(x.data(), x.size(), 2.0, threads, true);
    EXPECT_EQ(grid.rebin(-2, 2, 4).counts(), (std::vector<uint64_t>{0, 0, 200001, 200000})) << threads;
  }
}

// A grid of |x| that keeps only its tail exact (2% of the values seen, after each add) has the
// full grid's counts above the bin its floor's values went to, and every value in its total:
// through widening (a sample three times larger, and an outlier), NaN and infinities, a split
// over threads, and a merge of two grids with different floors. A percentile in the tail is the
// full grid's.
TEST(GridHistogram, AFloorKeepsTheTailExact) {
  std::mt19937 rng(6);
  std::normal_distribution<float> normal(0, 1);
  std::vector<std::vector<float>> samples;
  for (float scale : {1.f, 3.f, 1.f, 1.f, 0.5f, 0.5f}) {
    samples.emplace_back(70000);  // two threads' worth
    for (float& v : samples.back()) v = normal(rng) * scale;
  }
  samples[4][5] = 25;  // an outlier in smaller values: the grid widens, the floor stays
  samples[1][10] = NAN;
  samples[3][20] = INFINITY;
  auto max_abs = [](const std::vector<float>& x) { return engine::finite_extrema(x.data(), x.size()).abs_max(); };
  GridHistogram full(256, true), tail(256, true, 0.02), first(256, true, 0.02), second(256, true, 0.02);
  for (size_t s = 0; s < samples.size(); ++s) {
    const auto& x = samples[s];
    full.add(x.data(), x.size(), max_abs(x));
    tail.add(x.data(), x.size(), max_abs(x), s % 2 ? 2 : 1);
    (s < 4 ? first : second).add(x.data(), x.size(), max_abs(x));
  }
  first.merge(second);
  const double m = 25;
  for (const GridHistogram* g : {&tail, &first}) {
    EXPECT_EQ(g->width(), full.width());
    ASSERT_GT(g->below_floor(), 0u);
    // Rebinned to bins as wide as the grid's (each grid bin in one of its own), and to 256 bins.
    for (auto [hi, bins] : {std::pair{4096 * full.width(), size_t{4096}}, std::pair{m, size_t{256}}}) {
      const Histogram h = g->rebin(0, hi, bins), expected = full.rebin(0, hi, bins);
      EXPECT_EQ(h.total(), expected.total());
      // Above the floor: more than 0.1% (maybe less than 2% now: the floor rose with the larger sample).
      EXPECT_GT(static_cast<double>(h.total() - g->below_floor()), 0.001 * static_cast<double>(h.total()));
      size_t lumped = 0;  // the bin the values below the floor went to: no count below it
      while (h.counts()[lumped] == 0) ++lumped;
      EXPECT_GT(lumped, 10u);
      uint64_t cumulative = 0, expected_cumulative = 0;
      for (size_t i = 0; i < bins; ++i) {
        cumulative += h.counts()[i];
        expected_cumulative += expected.counts()[i];
        if (i > lumped) {
          ASSERT_EQ(h.counts()[i], expected.counts()[i]) << i << " of " << bins;
        }
        if (i >= lumped) {
          ASSERT_EQ(cumulative, expected_cumulative) << i << " of " << bins;
        }
      }
      EXPECT_EQ(percentile_range_symmetric(h, 99.9, -m, m).hi, percentile_range_symmetric(expected, 99.9, -m, m).hi);
    }
  }
  EXPECT_EQ(full.below_floor(), 0u);
}

// Every value from the floor's lower edge up counts, whatever the others in its group of sixteen
// (those are skipped together when all are below the floor): four alike samples (the floor stays
// where the first put it), each with every grid edge from 1 to 5 as a value among fifteen zeros,
// and a NaN so (in no bin, but not below the floor either).
TEST(GridHistogram, AFloorCountsEveryValueFromItsEdgeUp) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1);
  GridHistogram full(256, true), tail(256, true, 0.02);
  for (int s = 0; s < 4; ++s) {
    std::vector<float> x(70000);  // a multiple of 16
    for (float& v : x) v = std::clamp(normal(rng), -4.5f, 4.5f);
    for (int j = 128; j <= 640; ++j) {  // 1 to 5 in steps of 2^-7, the grid's width for |x| < 8
      x.push_back(std::ldexp(static_cast<float>(j), -7));
      x.insert(x.end(), 15, 0.0f);
    }
    x.push_back(NAN);
    x.insert(x.end(), 15, 0.0f);
    full.add(x.data(), x.size(), 5.0);
    tail.add(x.data(), x.size(), 5.0, s % 2 ? 2 : 1);
  }
  ASSERT_EQ(tail.width(), std::ldexp(1.0, -7));
  ASSERT_GT(tail.below_floor(), 0u);
  const Histogram h = tail.rebin(0, 1024 * tail.width(), 1024), expected = full.rebin(0, 1024 * tail.width(), 1024);
  size_t lumped = 0;  // the bin the values below the floor went to
  while (h.counts()[lumped] == 0) ++lumped;
  ASSERT_GT(lumped, 128u);
  ASSERT_LT(lumped, 640u);
  EXPECT_EQ(h.total(), expected.total());
  for (size_t i = lumped + 1; i < 1024; ++i) ASSERT_EQ(h.counts()[i], expected.counts()[i]) << i;
}

// Rebinned, the grid's counts are numpy's over the final range but for values within a grid
// bin of a bin edge, and the grid is at least 2x finer than the bins.
TEST_F(Numpy, GridHistogramRebinnedIsNumpysUpToAGridBin) {
  python(R"(
rng = np.random.default_rng(3)
x = np.concatenate([rng.standard_normal(50000), 5 * rng.standard_normal(50000), [23.7, -31.25]]).astype(np.float32)
np.save('x.npy', x)
m = np.abs(x).max()
np.save('signed.npy', np.histogram(x, bins=2048, range=(-m, m))[0].astype(np.float32))
np.save('absolute.npy', np.histogram(np.abs(x), bins=2048, range=(0, m))[0].astype(np.float32))
)");
  std::vector<float> x = floats("x.npy");
  MinMaxStats all;
  all.add(0, engine::finite_extrema(x.data(), x.size()), false);
  for (bool abs : {false, true}) {
    GridHistogram grid(2048, abs);
    for (size_t b = 0; b < x.size(); b += 7000) {  // parts, as samples come
      size_t n = std::min<size_t>(7000, x.size() - b);
      MinMaxStats m;
      m.add(0, engine::finite_extrema(x.data() + b, n), false);
      grid.add(x.data() + b, n, m.max_abs);
    }
    const double m = all.max_abs, lo = abs ? 0 : -m, bin = (m - lo) / 2048;
    EXPECT_LE(grid.width(), bin / 2);
    Histogram h = grid.rebin(lo, m, 2048);
    std::vector<float> expected = floats(abs ? "absolute.npy" : "signed.npy");
    double cumulative = 0, expected_cumulative = 0;
    size_t moved_max = 0;
    for (size_t i = 0; i + 1 < 2048; ++i) {
      cumulative += static_cast<double>(h.counts()[i]);
      expected_cumulative += expected[i];
      double edge = lo + bin * static_cast<double>(i + 1);
      size_t near = 0;  // values a grid bin or less from the edge
      for (float v : x) near += std::fabs((abs ? std::fabs(v) : v) - edge) <= grid.width();
      ASSERT_LE(std::fabs(cumulative - expected_cumulative), static_cast<double>(near)) << "edge " << i + 1;
      moved_max = std::max(moved_max, static_cast<size_t>(std::fabs(cumulative - expected_cumulative)));
    }
    EXPECT_EQ(h.total(), x.size());
    EXPECT_GT(moved_max, 0u);  // the data is not aligned with the grid: some values did move
  }
}

// Terms that are multiples of 2^-30 below 2^22 sum exactly in integers: the ExactSum is that sum
// in any order and split, where a double accumulator drifts with the order.
TEST(ExactSum, IsTheExactSumInAnyOrderAndSplit) {
  std::mt19937_64 rng(9);
  std::vector<double> terms;
  unsigned __int128 exact = 0;  // in steps of 2^-30
  for (int i = 0; i < 20000; ++i) {
    uint64_t k = rng() >> (i % 2 ? 12 : 40);  // large and small terms
    terms.push_back(std::ldexp(static_cast<double>(k), -30));
    exact += k;
  }
  ExactSum forward, split_a, split_b;
  for (double t : terms) forward.add(t);
  std::shuffle(terms.begin(), terms.end(), rng);
  for (size_t i = 0; i < terms.size(); ++i) (i % 3 ? split_a : split_b).add(terms[i]);
  split_b.merge(split_a);
  const double expected = std::ldexp(static_cast<double>(exact), -30);
  EXPECT_EQ(forward.value(), expected);
  EXPECT_EQ(split_b.value(), expected);

  ExactSum extremes;  // the smallest subnormal, the largest double, and 0 are held too
  extremes.add(std::numeric_limits<double>::denorm_min());
  extremes.add(0);
  EXPECT_EQ(extremes.value(), std::numeric_limits<double>::denorm_min());
  extremes.add(std::numeric_limits<double>::max());
  EXPECT_EQ(extremes.value(), std::numeric_limits<double>::max());
  EXPECT_EQ(ExactSum().value(), 0.0);

  ExactSum poisoned;
  poisoned.add(1);
  poisoned.add(INFINITY);
  EXPECT_EQ(poisoned.value(), INFINITY);
  poisoned.add(NAN);
  EXPECT_TRUE(std::isnan(poisoned.value()));
}

TEST(Entropy, ClipsTheOutliersOfAGaussian) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(100000);
  for (float& v : x) v = normal(rng);
  for (int i = 0; i < 20; ++i) x[i * 997] = (i % 2 ? 1 : -1) * 40.0f;  // a few far outliers
  MinMaxStats mm;
  mm.add(0, engine::finite_extrema(x.data(), x.size()), false);
  Histogram h(-mm.max_abs, mm.max_abs, 2048);
  count(h, x.data(), x.size());
  Range r = entropy_range(h, 128, mm.min, mm.max);
  EXPECT_LT(r.hi, 10.0);  // far below the outliers at 40
  EXPECT_GT(r.hi, 2.5);   // but keeps the bulk of the Gaussian
  EXPECT_DOUBLE_EQ(r.lo, -r.hi);
  // The outliers really are in the data the search saw.
  EXPECT_EQ(mm.max, 40.0);
}

// The entropy search against the same definition written plainly in numpy, window by window:
// p the window with the outliers folded onto its edges, q each level's count spread over its
// bins with data, both smoothed (eps to empty entries, taken evenly from the others) and
// normalised, KL(p || q). Dense and sparse histograms, a level count the narrowest windows do not
// reach, and 13 values in 16,384 bins (counts 3, 1, 2, 5, 1 in neighbouring bins, and an outlier),
// where smoothing the widest windows takes more than a quarter from each count (so the search sums
// their bins one by one, not by its series). Every window's divergence must be numpy's to within
// 1e-11 of it, and our threshold numpy's best (the first of equal ones, up to rounding).
TEST_F(Numpy, EntropyThresholdIsTheLeastKlOfEveryWindow) {
  python(R"(
rng = np.random.default_rng(7)
cases = {
    'dense': (np.histogram(np.concatenate([rng.standard_normal(200000), [40, -38, 35]]), bins=2048)[0], 128),
    'sparse': (np.histogram(np.concatenate([rng.standard_normal(300), [9, -7]]), bins=512)[0], 64),
    'narrow': (np.histogram(rng.laplace(size=5000), bins=64)[0], 31),
    'spread': (np.histogram([1e-4] * 3 + [7e-4] + [12e-4] * 2 + [17e-4] * 5 + [22e-4, 3.1], bins=16384,
                            range=(-4, 4))[0], 128),
}
def smooth(d, eps=1e-4):
    zero = d == 0
    if zero.all(): return None
    return d + eps * zero - eps * zero.sum() / (~zero).sum() * (~zero)
def kl(hist, start, width, levels):
    p = hist[start:start + width].astype(np.float64).copy()
    p[0] += hist[:start].sum()
    p[-1] += hist[start + width:].sum()
    per = width // levels
    # each bin's level: `per` bins each, the last taking the rest (every bin when per is 0)
    level = np.minimum(np.arange(width) // per, levels - 1) if per else np.full(width, levels - 1)
    filled = p != 0
    mass = np.bincount(level, weights=hist[start:start + width].astype(np.float64), minlength=levels)
    with_data = np.bincount(level, weights=filled, minlength=levels)
    q = np.where(filled, mass[level] / np.maximum(with_data[level], 1), 0)
    ps, qs = smooth(p), smooth(q)
    if ps is None or qs is None or (qs <= 0).any(): return np.inf
    pn, qn = ps / ps.sum(), qs / qs.sum()
    keep = pn > 0
    return float(np.sum(pn[keep] * np.log(pn[keep] / qn[keep])))
for name, (hist, levels) in cases.items():
    zero = hist.size // 2
    divs = [kl(hist, zero - i, 2 * i, levels) for i in range(max(levels // 2, 1), zero + 1)]
    np.save(name + '_hist.npy', hist.astype(np.float32))
    np.save(name + '_kl.npy', np.array(divs))
    np.save(name + '_first.npy', np.array([float(max(levels // 2, 1))]))
)");
  for (auto [name, levels] :
       {std::pair{"dense", 128}, std::pair{"sparse", 64}, std::pair{"narrow", 31}, std::pair{"spread", 128}}) {
    std::vector<float> counts = floats(std::string(name) + "_hist.npy");
    const size_t bins = counts.size();
    Histogram h(-1, 1, bins);
    for (size_t k = 0; k < bins; ++k)
      if (counts[k] > 0) h.add_count(h.edge(k) + 0.5 * (h.edge(k + 1) - h.edge(k)), static_cast<uint64_t>(counts[k]));
    Range r = entropy_range(h, static_cast<size_t>(levels), -1, 1);
    // The window our threshold stands for, and numpy's divergence there against its least.
    const auto i = static_cast<size_t>(std::lround(r.hi * static_cast<double>(bins) / 2));
    ir::Tensor kl = ir::load_npy(dir_ / (std::string(name) + "_kl.npy"));
    auto divs = kl.values<double>();
    const auto first = static_cast<size_t>(scalar(std::string(name) + "_first.npy"));
    ASSERT_GE(i, first) << name;
    ASSERT_LT(i - first, divs.size()) << name;
    const double least = *std::min_element(divs.begin(), divs.end());
    EXPECT_LE(divs[i - first], least + 1e-12 * std::fabs(least)) << name << ": window " << i;
    // Every window's divergence is numpy's, to within rounding (the sums differ in order).
    const std::vector<double> ours = entropy_divergences(h, static_cast<size_t>(levels));
    ASSERT_EQ(ours.size(), divs.size()) << name;
    double worst = 0;
    for (size_t j = 0; j < ours.size(); ++j)
      if (std::isfinite(divs[j]) || std::isfinite(ours[j]))
        worst = std::max(worst, std::fabs(ours[j] - divs[j]) / std::fabs(divs[j]));
    EXPECT_LT(worst, 1e-11) << name;
    // The first of the windows that reach the least, as the search keeps the first minimum.
    for (size_t j = 0; j < i - first; ++j)
      EXPECT_GT(divs[j], least + 1e-12 * std::fabs(least)) << name << ": window " << j + first;
    EXPECT_DOUBLE_EQ(r.lo, -r.hi);
  }
}

TEST(Distribution, MeanAndStdOfBinCentres) {
  Histogram h(0, 4, 4);  // centres 0.5 1.5 2.5 3.5
  std::vector<float> x = {0.1f, 1.2f, 1.7f, 3.9f};
  count(h, x.data(), x.size());
  auto [mean, std] = histogram_mean_std(h, false);
  EXPECT_DOUBLE_EQ(mean, (0.5 + 1.5 + 1.5 + 3.5) / 4);
  double var = (0.25 + 2.25 + 2.25 + 12.25) / 4 - mean * mean;
  EXPECT_DOUBLE_EQ(std, std::sqrt(var));
}

}  // namespace
}  // namespace onnxptq::calib
