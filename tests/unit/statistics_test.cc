// Calibration statistics against values computed independently: closed forms, and numpy
// (Debian's python3-numpy) in a script the test runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "calib/statistics.h"
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

TEST(MinMaxStats, ExtremaSkipNonFiniteAndMergeInAnyOrder) {
  std::vector<float> a = {1, -2, NAN, 5}, b = {INFINITY, -7, 3};
  MinMaxStats one, two, merged;
  one.add(0, a.data(), a.size(), true);
  two.add(1, b.data(), b.size(), true);
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
      s.add(0, x.data(), x.size(), false);
      EXPECT_EQ(s.min, lo) << bad << " at " << at.size() << " places";
      EXPECT_EQ(s.max, hi) << bad << " at " << at.size() << " places";
    }
  std::vector<float> nothing(300, NAN);
  nothing[7] = INFINITY;
  MinMaxStats none;
  none.add(0, nothing.data(), nothing.size(), false);
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
  for (size_t i = 20; i-- > 0;) stats.add(i, all.data() + i * 50, 50, true);  // any order
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
  whole.add(x.data(), x.size());
  part2.add(x.data() + 5000, x.size() - 5000);  // split and merged the other way round
  part1.add(x.data(), 5000);
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
  mm.add(0, x.data(), x.size(), false);
  Histogram abs_hist(0, mm.max_abs, 2048);
  abs_hist.add_abs(x.data(), x.size());
  double bin = mm.max_abs / 2048;
  Range sym = percentile_range_symmetric(abs_hist, 99.0, mm.min, mm.max);
  EXPECT_NEAR(sym.hi, scalar("p.npy"), bin);
  EXPECT_GE(sym.hi, scalar("p.npy"));  // the right edge: at least 99 % inside
  EXPECT_EQ(sym.lo, -sym.hi);
  // 99.0 % of |N(0,1)| lies below 2.5758.
  EXPECT_NEAR(sym.hi, 2.5758, 0.03);

  Histogram h(mm.min, mm.max, 2048);
  h.add(x.data(), x.size());
  Range two_sided = percentile_range(h, 99.0);
  double width = (mm.max - mm.min) / 2048;
  EXPECT_NEAR(two_sided.lo, scalar("lo.npy"), width);
  EXPECT_NEAR(two_sided.hi, scalar("hi.npy"), width);
}

TEST(Entropy, ClipsTheOutliersOfAGaussian) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(100000);
  for (float& v : x) v = normal(rng);
  for (int i = 0; i < 20; ++i) x[i * 997] = (i % 2 ? 1 : -1) * 40.0f;  // a few far outliers
  MinMaxStats mm;
  mm.add(0, x.data(), x.size(), false);
  Histogram h(-mm.max_abs, mm.max_abs, 2048);
  h.add(x.data(), x.size());
  Range r = entropy_range(h, 128, mm.min, mm.max);
  EXPECT_LT(r.hi, 10.0);  // far below the outliers at 40
  EXPECT_GT(r.hi, 2.5);   // but keeps the bulk of the Gaussian
  EXPECT_DOUBLE_EQ(r.lo, -r.hi);
  // The outliers really are in the data the search saw.
  EXPECT_EQ(mm.max, 40.0);
}

TEST(Distribution, MeanAndStdOfBinCentres) {
  Histogram h(0, 4, 4);  // centres 0.5 1.5 2.5 3.5
  std::vector<float> x = {0.1f, 1.2f, 1.7f, 3.9f};
  h.add(x.data(), x.size());
  auto [mean, std] = histogram_mean_std(h, false);
  EXPECT_DOUBLE_EQ(mean, (0.5 + 1.5 + 1.5 + 3.5) / 4);
  double var = (0.25 + 2.25 + 2.25 + 12.25) / 4 - mean * mean;
  EXPECT_DOUBLE_EQ(std, std::sqrt(var));
}

}  // namespace
}  // namespace onnxptq::calib
