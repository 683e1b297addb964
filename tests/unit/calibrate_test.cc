// Calibration end to end through the engine: each method against values computed here by
// other means (sorting, brute force over every power-of-two position, closed forms), and the
// streaming properties: the same ranges for any number of workers, bad samples reported.
#include "calib/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "engine/extrema.h"
#include "onnxptq/error.h"
#include "qmath/params.h"

namespace onnxptq::calib {
namespace {

using ir::DataType;

// x [n] -> Neg -> y -> Neg -> z: y is -x and z is x, so the ranges of x are known exactly.
ir::Model negations(int64_t n) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {n});
  ir::Value* y = g.add_value("y");
  ir::Value* z = g.add_value("z");
  g.add_input(x);
  g.add_node("Neg", {x}, {y}, "neg1");
  g.add_node("Neg", {y}, {z}, "neg2");
  g.add_output(z);
  return m;
}

// Samples from a list, rewindable or not.
class ListReader : public DataReader {
 public:
  ListReader(std::vector<std::vector<float>> samples, bool rewindable = true)
      : samples_(std::move(samples)), rewindable_(rewindable) {}
  std::optional<Feed> next() override {
    if (next_ >= samples_.size()) return std::nullopt;
    const auto& s = samples_[next_++];
    return Feed{{"x", ir::Tensor::from_values<float>({static_cast<int64_t>(s.size())}, s)}};
  }
  std::optional<size_t> size() const override { return samples_.size(); }
  bool can_rewind() const override { return rewindable_; }
  void rewind() override { next_ = 0; }
  std::string describe() const override { return "the test list"; }

 private:
  std::vector<std::vector<float>> samples_;
  bool rewindable_;
  size_t next_ = 0;
};

std::vector<std::vector<float>> gaussian_samples(size_t count, size_t n, uint32_t seed, float outlier = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<float>> samples(count, std::vector<float>(n));
  for (auto& s : samples)
    for (float& v : s) v = normal(rng);
  if (outlier != 0) {
    samples[0][0] = outlier;
    samples[count - 1][n - 1] = -outlier * 0.9f;
  }
  return samples;
}

CalibOptions with_method(Method method) {
  CalibOptions o;
  o.method = method;
  return o;
}

CalibrationResult run(const std::vector<std::vector<float>>& samples, CalibOptions o, bool rewindable = true,
                      int threads = 1) {
  ListReader reader(samples, rewindable);
  ir::Model m = negations(static_cast<int64_t>(samples[0].size()));
  o.threads = threads;
  return calibrate(m, {"x", "y", "z"}, reader, o);
}

TEST(Calibrate, MinMaxIsTheExtremaOverEverySample) {
  auto samples = gaussian_samples(7, 100, 1);
  float lo = 1e9f, hi = -1e9f;
  for (auto& s : samples)
    for (float v : s) lo = std::min(lo, v), hi = std::max(hi, v);
  CalibrationResult r = run(samples, {});
  EXPECT_EQ(r.samples, 7u);
  EXPECT_EQ(r.passes, 1);
  EXPECT_EQ(r.ranges.at("x").lo, lo);
  EXPECT_EQ(r.ranges.at("x").hi, hi);
  EXPECT_EQ(r.ranges.at("y").lo, -hi);  // y = -x
  EXPECT_EQ(r.ranges.at("y").hi, -lo);
  EXPECT_EQ(r.ranges.at("z").hi, hi);

  CalibOptions sym;
  sym.symmetric = true;
  CalibrationResult s = run(samples, sym);
  EXPECT_EQ(s.ranges.at("x").hi, std::max(-lo, hi));
  EXPECT_EQ(s.ranges.at("x").lo, -std::max(-lo, hi));

  CalibOptions first_three;
  first_three.max_samples = 3;
  EXPECT_EQ(run(samples, first_three).samples, 3u);
}

TEST(Calibrate, MovingAverageFollowsSampleOrder) {
  auto samples = gaussian_samples(10, 50, 2);
  CalibOptions o;
  o.moving_average = true;
  o.averaging_constant = 0.3;
  CalibrationResult r = run(samples, o);
  double lo = 0, hi = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    double slo = *std::min_element(samples[i].begin(), samples[i].end());
    double shi = *std::max_element(samples[i].begin(), samples[i].end());
    lo = i == 0 ? slo : lo + 0.3 * (slo - lo);
    hi = i == 0 ? shi : hi + 0.3 * (shi - hi);
  }
  EXPECT_NEAR(r.ranges.at("x").lo, lo, 1e-12);
  EXPECT_NEAR(r.ranges.at("x").hi, hi, 1e-12);
}

TEST(Calibrate, PercentileOfAUniformGridIsWithinOneBin) {
  // |x| is uniform on a fine grid over [0, 10]: the 99th percentile of |x| is 9.9.
  std::vector<std::vector<float>> samples(4);
  for (int i = 0; i < 40000; ++i) samples[i % 4].push_back((i % 2 ? -1.f : 1.f) * 10.f * static_cast<float>(i) / 39999.f);
  CalibOptions o;
  o.method = Method::Percentile;
  o.percentile = 99;
  CalibrationResult r = run(samples, o);
  EXPECT_EQ(r.passes, 1);
  double bin = 10.0 / 2048;
  EXPECT_NEAR(r.ranges.at("x").hi, 9.9, bin);
  EXPECT_GE(r.ranges.at("x").hi, 9.9);  // at least 99% inside
  EXPECT_EQ(r.ranges.at("x").lo, -r.ranges.at("x").hi);

  o.symmetric = false;  // 0.5% cut from each end of x
  CalibrationResult a = run(samples, o);
  EXPECT_NEAR(a.ranges.at("x").hi, 9.9, 2 * 20.0 / 2048);
  EXPECT_NEAR(a.ranges.at("x").lo, -9.9, 2 * 20.0 / 2048);
}

// Symmetric Percentile keeps only the tail of each histogram exact, where a second pass could
// count in full: the ranges are those of full counts (a reader that cannot start over), and a
// second pass comes only when the tail thinned out (a first sample 100 times larger than the
// 100 after it: the percentile falls below what the first pass kept).
TEST(Calibrate, PercentileCountsEveryValueAgainOnlyWhereTheTailThinnedOut) {
  for (bool thinned : {false, true}) {
    auto samples = gaussian_samples(101, 1000, 16);
    if (thinned)
      for (float& v : samples[0]) v *= 100;
    CalibOptions o;
    o.method = Method::Percentile;
    o.percentile = 99.9;
    std::vector<std::string> lines;
    o.log = [&](const std::string& line) { lines.push_back(line); };
    CalibrationResult r = run(samples, o);
    EXPECT_EQ(r.passes, thinned ? 2 : 1);
    ASSERT_EQ(lines.empty(), !thinned);
    if (thinned) {
      EXPECT_EQ(lines.back(),
                "calibration pass 2: histograms of 3 tensors in full (the percentile fell below the tail counted in "
                "the first pass)");
    }
    o.workers = 2;
    CalibrationResult two = run(samples, o);
    CalibrationResult once = run(samples, o, false);  // every value counted in the first pass
    EXPECT_EQ(once.passes, 1);
    for (const char* name : {"x", "y", "z"}) {
      EXPECT_EQ(r.ranges.at(name).hi, once.ranges.at(name).hi) << name << thinned;
      EXPECT_EQ(r.ranges.at(name).lo, once.ranges.at(name).lo) << name << thinned;
      EXPECT_EQ(two.ranges.at(name).hi, once.ranges.at(name).hi) << name << thinned;
    }
  }
}

// With the seeds' 128 bins and 128 quantized bins the search has one window, the whole histogram
// [-max|x|, max|x|], clamped to the extrema: MinMax's range (as in ORT and Quark). With 2048 bins
// it clips.
TEST(Calibrate, EntropyClipsOutliersOfAGaussianGivenMoreBinsThanLevels) {
  auto samples = gaussian_samples(8, 5000, 3, 60.f);
  CalibOptions o;
  o.method = Method::Entropy;
  EXPECT_EQ(calib_histogram_bins(o), 128u);
  const TensorRange seeds = run(samples, o).ranges.at("x");
  EXPECT_EQ(seeds.hi, 60.0);
  EXPECT_EQ(seeds.lo, -54.0);  // the other outlier, -60 * 0.9
  o.num_bins = 2048;
  const TensorRange x = run(samples, o).ranges.at("x");
  EXPECT_GT(x.hi, 2.0);  // keeps the body of N(0, 1)
  EXPECT_LT(x.hi, 12.0);  // and cuts the outlier at 60
  EXPECT_GT(x.lo, -12.0);
  EXPECT_LT(x.lo, -2.0);
}

// The histogram methods read the data once: a reader that cannot start over will do, and the
// ranges do not depend on where in the data the range grew (the samples in reverse order).
TEST(Calibrate, HistogramMethodsReadTheDataOnce) {
  auto samples = gaussian_samples(6, 3000, 8, 30.f);
  samples[2][5] = 80.f;  // the range grows in the middle of the data
  auto reversed = samples;
  std::reverse(reversed.begin(), reversed.end());
  for (Method method : {Method::Entropy, Method::Percentile, Method::Distribution}) {
    for (bool symmetric : {true, false}) {
      CalibOptions o = with_method(method);
      o.symmetric = symmetric;
      CalibrationResult once = run(samples, o, false);
      CalibrationResult backwards = run(reversed, o, false);
      EXPECT_EQ(once.passes, 1) << method_name(method);
      for (const char* t : {"x", "y"}) {
        EXPECT_EQ(once.ranges.at(t).lo, backwards.ranges.at(t).lo) << method_name(method) << " " << t;
        EXPECT_EQ(once.ranges.at(t).hi, backwards.ranges.at(t).hi) << method_name(method) << " " << t;
        EXPECT_EQ(once.ranges.at(t).std, backwards.ranges.at(t).std) << method_name(method) << " " << t;
      }
    }
  }
}

TEST(Calibrate, DistributionGivesMeanAndStd) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(1.5f, 2.f);
  std::vector<std::vector<float>> samples(5, std::vector<float>(20000));
  for (auto& s : samples)
    for (float& v : s) v = normal(rng);
  CalibOptions o;
  o.method = Method::Distribution;
  CalibrationResult r = run(samples, o);
  EXPECT_NEAR(r.ranges.at("x").mean, 1.5, 0.03);
  EXPECT_NEAR(r.ranges.at("x").std, 2.0, 0.03);
  EXPECT_NEAR(r.ranges.at("y").mean, -1.5, 0.03);
}

// Whether the range that position `pos` and its zero point represent holds [lo, hi].
bool holds(int pos, double lo, double hi, DataType type, bool symmetric) {
  qmath::QRange q = qmath::quant_range(type, symmetric);
  int64_t zp = qmath::pof2_zero_point(lo, hi, q, type, symmetric, pos);
  double s = std::ldexp(1.0, -pos);
  return (q.max - zp) * s >= hi && (q.min - zp) * s <= lo;
}

TEST(Calibrate, NonOverflowIsTheFinestPositionThatHoldsTheRange) {
  auto samples = gaussian_samples(3, 1000, 5);
  samples[1][7] = 5.3f;
  for (DataType type : {DataType::Int8, DataType::UInt8, DataType::Int16}) {
    CalibOptions o;
    o.method = Method::NonOverflow;
    o.activation_type = type;
    CalibrationResult r = run(samples, o);
    const TensorRange& x = r.ranges.at("x");
    ASSERT_TRUE(x.pos.has_value());
    double m = 5.3f;
    int brute = -40;
    for (int p = -40; p <= 40; ++p)
      if (holds(p, -m, m, type, true)) brute = p;
    EXPECT_EQ(*x.pos, brute) << ir::data_type_name(type);
    EXPECT_LE(x.lo, -m);
    EXPECT_GE(x.hi, m);
  }
}

// Squared error of quantizing with 2^-pos, written out separately from the library's.
double brute_error(const std::vector<std::vector<float>>& samples, int pos, int64_t zp, qmath::QRange clip) {
  double s = std::ldexp(1.0, -pos), sum = 0;
  for (const auto& v : samples)
    for (float x : v) {
      double q = std::clamp(std::nearbyint(static_cast<double>(x) / s) + static_cast<double>(zp),
                            static_cast<double>(clip.min), static_cast<double>(clip.max));
      double e = (q - static_cast<double>(zp)) * s - x;
      sum += e * e;
    }
  return sum;
}

// The position in [first, last] with the least brute_error (symmetric int8), by trying each.
int brute_best_position(const std::vector<std::vector<float>>& samples, int first, int last) {
  int best = first;
  double best_error = INFINITY;
  for (int p = first; p <= last; ++p) {
    double e = brute_error(samples, p, 0, {-127, 127});
    if (e < best_error) best_error = e, best = p;
  }
  return best;
}

TEST(Calibrate, MinMseAllPicksTheLeastSquaredErrorPosition) {
  auto samples = gaussian_samples(6, 3000, 6, 40.f);  // outliers: a finer scale than the extrema's wins
  CalibOptions o;
  o.method = Method::MinMSE;
  CalibrationResult r = run(samples, o);
  EXPECT_EQ(r.passes, 1);  // the outlier is in the first sample: its candidates were all tried early
  const TensorRange& x = r.ranges.at("x");
  ASSERT_TRUE(x.pos.has_value());
  // Every plausible position, not only the five candidates.
  EXPECT_EQ(*x.pos, brute_best_position(samples, -5, 12));
  int non_overflow = *run(samples, with_method(Method::NonOverflow)).ranges.at("x").pos;
  EXPECT_GT(*x.pos, non_overflow);  // finer than the scale that holds the outliers
  EXPECT_DOUBLE_EQ(x.hi, 127 * std::ldexp(1.0, -*x.pos));
}

// MinMSE "All" scores each sample around the candidates of the range seen so far, down to a
// margin that widens with how far the samples' ranges spread. A range that grows within it is
// read once (an outlier in the last sample 0.75 or 1.5 times the others), and so is one that
// grows so much that the earlier samples' values all round to 0 at the new candidates (3000
// times). Otherwise the samples scored too narrowly, and only they, are scored again in a second
// pass, which the log counts: an outlier 8 or 30 times the others in the last sample needs the
// four before it, or only the first two when the second sample, a sixteenth of the others,
// showed a spread (the samples after it are scored wider); 30 times in the second sample needs
// the first. A reader that cannot start over gets every position down to each sample's zero
// position: one pass. The positions are always those of two full passes (more than one worker
// always makes them) and of the brute force.
TEST(Calibrate, MinMseAllScoresEarlierSamplesAgainOnlyWhereTheRangeOutgrewThem) {
  struct Case {
    size_t sample;
    float times_max;
    float second_sample_scale;
    size_t rescored;  // samples the second pass scores (0: no second pass)
  };
  for (Case c : {Case{4, 0.75f, 1, 0}, Case{4, 1.5f, 1, 0}, Case{4, 3000.f, 1, 0}, Case{4, 8.f, 1, 4},
                 Case{4, 8.f, 1.f / 16, 2}, Case{4, 30.f, 1, 4}, Case{1, 30.f, 1, 1}}) {
    auto samples = gaussian_samples(5, 2000, 12);
    for (float& v : samples[1]) v *= c.second_sample_scale;
    float m = 0;
    for (const auto& v : samples)
      for (float x : v) m = std::max(m, std::fabs(x));
    samples[c.sample][7] = m * c.times_max;
    const std::string label =
        std::to_string(c.sample) + " " + std::to_string(c.times_max) + " " + std::to_string(c.second_sample_scale);
    CalibOptions o;
    o.method = Method::MinMSE;
    std::vector<std::string> lines;
    o.log = [&lines](const std::string& line) { lines.push_back(line); };
    CalibrationResult early = run(samples, o);
    EXPECT_EQ(early.passes, c.rescored > 0 ? 2 : 1) << label;
    if (c.rescored > 0) {
      ASSERT_FALSE(lines.empty());
      EXPECT_NE(lines.back().find("for 3 tensors"), std::string::npos) << lines.back();
      EXPECT_NE(lines.back().find("on the first " + std::to_string(c.rescored) + " of 5 samples"), std::string::npos)
          << label << ": " << lines.back();
    }
    o.log = nullptr;
    CalibrationResult once = run(samples, o, false);
    EXPECT_EQ(once.passes, 1) << label;
    o.workers = 2;
    CalibrationResult two = run(samples, o);
    EXPECT_EQ(two.passes, 2);
    for (const char* name : {"x", "y", "z"})
      for (const CalibrationResult* r : {&early, &once}) {
        EXPECT_EQ(r->ranges.at(name).pos, two.ranges.at(name).pos) << name << " " << label;
        EXPECT_EQ(r->ranges.at(name).hi, two.ranges.at(name).hi) << name << " " << label;
      }
    EXPECT_EQ(*early.ranges.at("x").pos, brute_best_position(samples, -16, 12)) << label;
  }
}

// A tensor with NaN (Sqrt of a negative input) is scored in a second pass over every sample,
// which the log announces; its position is that of two full passes.
TEST(Calibrate, MinMseAllScoresATensorWithNanInASecondPass) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1000});
  ir::Value* y = g.add_value("y");
  g.add_input(x);
  g.add_node("Sqrt", {x}, {y}, "sqrt");
  g.add_output(y);
  auto samples = gaussian_samples(3, 1000, 15);
  for (auto& v : samples)
    for (float& value : v) value = std::fabs(value);
  samples[1][5] = -1;  // y's NaN
  auto calibrate_with = [&](int workers, std::vector<std::string>* lines) {
    CalibOptions o;
    o.method = Method::MinMSE;
    o.workers = workers;
    if (lines) o.log = [lines](const std::string& line) { lines->push_back(line); };
    ListReader reader(samples, true);
    return calibrate(m, {"x", "y"}, reader, o);
  };
  std::vector<std::string> lines;
  CalibrationResult early = calibrate_with(1, &lines);
  EXPECT_EQ(early.passes, 2);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(),
            "calibration pass 2: squared errors of the power-of-two candidates for 1 tensors (a range that "
            "outgrew the positions scored on earlier samples, NaN or infinities, a zero point that moved with the "
            "range, or computed twice in a sample), on the first 3 of 3 samples");
  CalibrationResult two = calibrate_with(2, nullptr);
  for (const char* name : {"x", "y"}) {
    EXPECT_EQ(early.ranges.at(name).pos, two.ranges.at(name).pos) << name;
    EXPECT_EQ(early.ranges.at(name).hi, two.ranges.at(name).hi) << name;
  }
}

// A sample whose values all round to 0 at a position has its sum of squares as its error there:
// a first sample of zeros (a dead activation), or of values a ten-thousandth of the later ones,
// or later samples a hundred-and-fiftieth of the first (their values all round to 0 at the coarser
// candidates, not at the finer ones), need no second pass, and the positions are those of two
// full passes and of the brute-force search.
TEST(Calibrate, MinMseAllFillsCoarsePositionsOfSmallSamples) {
  struct Case {
    float first, later;  // scales of the first sample and of the others
  };
  for (Case c : {Case{0.0f, 1.0f}, Case{1e-4f, 1.0f}, Case{1.0f, 1.0f / 150}}) {
    auto samples = gaussian_samples(10, 2000, 13);
    for (size_t i = 0; i < samples.size(); ++i)
      for (float& v : samples[i]) v *= i == 0 ? c.first : c.later;
    CalibOptions o;
    o.method = Method::MinMSE;
    CalibrationResult early = run(samples, o);
    EXPECT_EQ(early.passes, 1) << c.first << " " << c.later;
    o.workers = 2;
    CalibrationResult two = run(samples, o);
    for (const char* name : {"x", "y", "z"}) {
      EXPECT_EQ(early.ranges.at(name).pos, two.ranges.at(name).pos) << name << " " << c.first << " " << c.later;
      EXPECT_EQ(early.ranges.at(name).hi, two.ranges.at(name).hi) << name << " " << c.first << " " << c.later;
    }
    EXPECT_EQ(*early.ranges.at("x").pos, brute_best_position(samples, -8, 24)) << c.first << " " << c.later;
  }
}

// LayerWisePercentile picks, per tensor, the candidate percentile whose range quantizes the
// data with the least error: the ranges are those of the Percentile method at each candidate,
// and the errors are recomputed here in double over every value.
TEST(Calibrate, LayerWisePercentilePicksTheCandidateWithTheLeastError) {
  auto samples = gaussian_samples(4, 5000, 12, 60.f);
  const std::vector<double> percentiles = {99.0, 99.9, 99.99, 99.99999};
  for (const char* metric : {"mae", "mse"}) {
    CalibOptions o = with_method(Method::LayerWisePercentile);
    o.percentile_candidates = percentiles;
    o.lwp_metric = metric;
    CalibrationResult r = run(samples, o);
    EXPECT_EQ(r.passes, 2);
    double best_error = INFINITY;
    std::pair<double, double> best_range;
    for (double p : percentiles) {
      CalibOptions po = with_method(Method::Percentile);
      po.percentile = p;
      const TensorRange c = run(samples, po).ranges.at("x");  // a copy: the result is a temporary
      double scale = (c.hi - c.lo) / 255 + 1e-6;  // int8: qmax - qmin = 255
      double zp = std::nearbyint(-128 - c.lo / scale);
      double error = 0;
      for (const auto& sample : samples)
        for (float v : sample) {
          double q = std::clamp(std::nearbyint(v / scale) + zp, -128.0, 127.0);
          double e = (q - zp) * scale - v;
          error += std::string(metric) == "mae" ? std::fabs(e) : e * e;
        }
      if (error < best_error) best_error = error, best_range = {c.lo, c.hi};
    }
    EXPECT_EQ(r.ranges.at("x").lo, best_range.first) << metric;
    EXPECT_EQ(r.ranges.at("x").hi, best_range.second) << metric;
  }
  CalibOptions bad = with_method(Method::LayerWisePercentile);
  bad.lwp_metric = "max";
  EXPECT_THROW(run(samples, bad), Error);
}

// LayerWisePercentile keeps the tail of each histogram exact for its lowest candidate (99.9: a
// floor under the top 10% of values; the highest, 99.99999, would keep almost none): each chosen
// range is the Percentile method's at one of the candidates, counted in full. Where the tail
// thinned out (a first sample 100 times larger than the 100 after it), a pass counts in full
// before the errors' pass.
TEST(Calibrate, LayerWisePercentileKeepsTheTailOfItsLowestCandidate) {
  const std::vector<double> percentiles = {99.99999, 99.9};
  for (bool thinned : {false, true}) {
    auto samples = gaussian_samples(101, 1000, 16);
    if (thinned)
      for (float& v : samples[0]) v *= 100;
    CalibOptions o = with_method(Method::LayerWisePercentile);
    o.percentile_candidates = percentiles;
    CalibrationResult r = run(samples, o);
    EXPECT_EQ(r.passes, thinned ? 3 : 2);
    std::vector<CalibrationResult> full;  // Percentile at each candidate, every value counted
    for (double p : percentiles) {
      CalibOptions po = with_method(Method::Percentile);
      po.percentile = p;
      full.push_back(run(samples, po, false));
    }
    for (const char* name : {"x", "y", "z"}) {
      const TensorRange& chosen = r.ranges.at(name);
      bool found = false;
      for (const CalibrationResult& f : full)
        found |= chosen.lo == f.ranges.at(name).lo && chosen.hi == f.ranges.at(name).hi;
      EXPECT_TRUE(found) << name << " " << thinned << ": [" << chosen.lo << ", " << chosen.hi << "]";
    }
  }
}

// LayerWisePercentile scores only candidates that quantize differently: a percentile repeated
// picks what the list without it picks (both orders, with and without outliers), and data whose
// every candidate falls in the same bin (a third of the values saturated at +-1) needs no pass
// for errors at all.
TEST(Calibrate, LayerWisePercentileScoresOnlyCandidatesThatDiffer) {
  for (float outlier : {0.f, 60.f}) {
    auto samples = gaussian_samples(4, 5000, 12, outlier);
    for (const auto& [repeated, plain] :
         {std::pair<std::vector<double>, std::vector<double>>{{99.99999, 99.9, 99.9}, {99.99999, 99.9}},
          {{99.9, 99.99999, 99.99999}, {99.9, 99.99999}}}) {
      CalibOptions o = with_method(Method::LayerWisePercentile);
      o.percentile_candidates = repeated;
      CalibrationResult r = run(samples, o);
      o.percentile_candidates = plain;
      CalibrationResult p = run(samples, o);
      for (const char* name : {"x", "y", "z"}) {
        EXPECT_EQ(r.ranges.at(name).lo, p.ranges.at(name).lo) << name << " " << outlier << " " << repeated[0];
        EXPECT_EQ(r.ranges.at(name).hi, p.ranges.at(name).hi) << name << " " << outlier << " " << repeated[0];
      }
    }
  }
  auto saturated = gaussian_samples(4, 5000, 12);
  for (auto& v : saturated)
    for (float& x : v) x = std::clamp(x, -1.0f, 1.0f);
  CalibrationResult r = run(saturated, with_method(Method::LayerWisePercentile));
  EXPECT_EQ(r.passes, 1);
  EXPECT_EQ(r.ranges.at("x").hi, 1.0);
  EXPECT_EQ(r.ranges.at("x").lo, -1.0);
}

TEST(Calibrate, MinMseMostCommonTakesTheMostFrequentSamplePosition) {
  // Two samples want a fine scale, one a coarse one.
  std::vector<std::vector<float>> samples = {std::vector<float>(100, 0.1f), std::vector<float>(100, 0.1f),
                                             std::vector<float>(100, 30.f)};
  samples[0][0] = samples[1][0] = -0.1f;
  CalibOptions o;
  o.method = Method::MinMSE;
  o.minmse_mode = "MostCommon";
  CalibrationResult r = run(samples, o);
  CalibOptions one;
  one.method = Method::MinMSE;
  int fine = *run({samples[0]}, one).ranges.at("x").pos;
  EXPECT_EQ(*r.ranges.at("x").pos, fine);
  EXPECT_EQ(r.passes, 1);
}

TEST(Calibrate, SameRangesForAnyNumberOfWorkers) {
  auto samples = gaussian_samples(23, 700, 7, 9.f);
  // MinMSE twice: symmetric (one worker scores its candidates in the first pass) and not (a
  // second pass, the errors of completed samples summed as they complete).
  for (auto [method, symmetric] : {std::pair{Method::MinMax, true}, std::pair{Method::Entropy, true},
                                   std::pair{Method::Percentile, true}, std::pair{Method::Distribution, true},
                                   std::pair{Method::NonOverflow, true}, std::pair{Method::MinMSE, true},
                                   std::pair{Method::MinMSE, false}, std::pair{Method::LayerWisePercentile, true}}) {
    CalibOptions o;
    o.method = method;
    o.moving_average = method == Method::MinMax;
    if (!symmetric) o.symmetric = false;
    CalibrationResult one = run(samples, o);
    for (int workers : {2, 3}) {
      o.workers = workers;
      CalibrationResult many = run(samples, o);
      for (const auto& [name, r] : one.ranges) {
        const TensorRange& m = many.ranges.at(name);
        EXPECT_EQ(r.lo, m.lo) << method_name(method) << " " << name << " workers " << workers;
        EXPECT_EQ(r.hi, m.hi) << method_name(method) << " " << name << " workers " << workers;
        EXPECT_EQ(r.pos, m.pos) << method_name(method);
        EXPECT_EQ(r.std, m.std) << method_name(method);
      }
    }
  }
}

// Workers left to calibration (0): one a thread, up to four and up to the samples, each reading on
// a thread of its own until the reader has no more (the caller's thread reads none); one, on the
// caller's thread, for a single thread, a single sample, MinMSE "All" with symmetric ranges
// (its positions scored in the first pass) and LayerWisePercentile. The ranges are those of one
// worker.
TEST(Calibrate, AutoWorkersRunSamplesOnThreadsOfTheirOwn) {
  class ThreadsReader : public ListReader {
   public:
    using ListReader::ListReader;
    std::optional<Feed> next() override {
      readers.insert(std::this_thread::get_id());
      return ListReader::next();
    }
    std::set<std::thread::id> readers;
  };
  auto samples = gaussian_samples(6, 700, 9, 7.f);
  struct Case {
    Method method;
    int threads;
    size_t samples;
    size_t workers;
  };
  for (Case c : {Case{Method::Distribution, 2, 6, 2}, Case{Method::MinMax, 3, 6, 3}, Case{Method::Entropy, 8, 6, 4},
                 Case{Method::Percentile, 8, 3, 3}, Case{Method::MinMSE, 2, 6, 1}, Case{Method::Distribution, 1, 6, 1},
                 Case{Method::Distribution, 2, 1, 1}, Case{Method::LayerWisePercentile, 2, 6, 1}}) {
    const std::string label = std::string(method_name(c.method)) + ", " + std::to_string(c.threads) + " threads, " +
                              std::to_string(c.samples) + " samples";
    std::vector<std::vector<float>> some(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(c.samples));
    ThreadsReader reader(some);
    CalibOptions o = with_method(c.method);
    o.threads = c.threads;
    o.workers = 0;
    CalibrationResult r = calibrate(negations(700), {"x", "y", "z"}, reader, o);
    EXPECT_EQ(reader.readers.count(std::this_thread::get_id()), c.workers > 1 ? 0u : 1u) << label;
    EXPECT_EQ(reader.readers.size(), c.workers) << label;
    // MinMSE: on two workers, a second pass (LayerWisePercentile's has nothing to do with workers).
    if (c.method != Method::LayerWisePercentile) {
      EXPECT_EQ(r.passes, 1) << label;
    }
    CalibrationResult one = run(some, with_method(c.method));
    for (const auto& [name, range] : one.ranges) {
      EXPECT_EQ(r.ranges.at(name).lo, range.lo) << label << " " << name;
      EXPECT_EQ(r.ranges.at(name).hi, range.hi) << label << " " << name;
    }
  }
}

// Large tensors are reduced by several threads at once; sums (squared errors, moments) are
// combined in a fixed block order, so the ranges are exactly those of one thread.
TEST(Calibrate, SameRangesForAnyNumberOfThreads) {
  auto samples = gaussian_samples(3, 150001, 11, 7.f);  // several blocks of kReduceBlock values, one partial
  for (Method method : {Method::MinMax, Method::Entropy, Method::Percentile, Method::Distribution, Method::NonOverflow,
                        Method::MinMSE, Method::LayerWisePercentile}) {
    CalibOptions o = with_method(method);
    CalibrationResult one = run(samples, o);
    for (int threads : {2, 3}) {
      CalibrationResult many = run(samples, o, true, threads);
      for (const auto& [name, r] : one.ranges) {
        const TensorRange& m = many.ranges.at(name);
        EXPECT_EQ(r.lo, m.lo) << method_name(method) << " " << name << " threads " << threads;
        EXPECT_EQ(r.hi, m.hi) << method_name(method) << " " << name << " threads " << threads;
        EXPECT_EQ(r.pos, m.pos) << method_name(method);
        EXPECT_EQ(r.std, m.std) << method_name(method);
      }
    }
  }
}

// Samples of different lengths (sequence lengths, image sizes) through a dynamic dimension:
// every method runs, and the extrema are those of all values together.
TEST(Calibrate, SamplesOfDifferentShapesThroughADynamicDimension) {
  std::vector<std::vector<float>> samples = {{0.5f, -2.f, 1.f}, {3.f, 0.f, -1.f, 0.25f, 2.f, -0.5f, 1.5f}, {-0.75f}};
  for (Method method : {Method::MinMax, Method::Entropy, Method::Percentile, Method::Distribution, Method::NonOverflow,
                        Method::MinMSE, Method::LayerWisePercentile}) {
    ListReader reader(samples);
    ir::Model m = negations(1);
    m.graph->find_value("x")->type.shape = {ir::Dim::symbol("length")};
    CalibOptions o = with_method(method);
    o.threads = 1;
    CalibrationResult r = calibrate(m, {"x", "y"}, reader, o);
    EXPECT_EQ(r.samples, 3u) << method_name(method);
    ASSERT_EQ(r.ranges.size(), 2u) << method_name(method);
    if (method == Method::MinMax) {
      EXPECT_EQ(r.ranges.at("x").lo, -2.0);
      EXPECT_EQ(r.ranges.at("x").hi, 3.0);
      EXPECT_EQ(r.ranges.at("y").lo, -3.0);
      EXPECT_EQ(r.ranges.at("y").hi, 2.0);
    }
  }
}

TEST(Calibrate, NonFiniteSamplesAreSkippedOrFailWithStrict) {
  auto samples = gaussian_samples(4, 10, 8);
  samples[2][3] = NAN;
  samples[2][4] = INFINITY;
  std::vector<std::string> messages;
  CalibOptions o;
  o.log = [&](const std::string& m) { messages.push_back(m); };
  CalibrationResult r = run(samples, o);
  EXPECT_EQ(r.skipped, std::vector<size_t>{2});
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "calibration sample 2, input 'x': 2 NaN or Inf values; sample skipped");
  float hi = -1e9f;
  for (size_t i : {0, 1, 3}) hi = std::max(hi, *std::max_element(samples[i].begin(), samples[i].end()));
  EXPECT_EQ(r.ranges.at("x").hi, hi);

  o.strict = true;
  try {
    run(samples, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "calibration sample 2, input 'x': 2 NaN or Inf values (--strict)");
  }
}

// A float model that overflows on the data (ReplaceClip6Relu inside a hard-swish did so): the
// tensor whose every value is infinite has no range and is named as such, not as unseen.
TEST(Calibrate, TensorsThatOnlyOverflowAreReportedApart) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {4});
  g.add_input(x);
  ir::Value* big = g.add_value("big");
  g.set_initializer(big, ir::Tensor::from_values<float>({}, std::vector<float>{1e30f}));
  ir::Value *y = g.add_value("y"), *z = g.add_value("z");
  g.add_node("Mul", {x, big}, {y}, "mul1");
  g.add_node("Mul", {y, big}, {z}, "mul2");
  g.add_output(z);
  ListReader reader({{1, -2, 3, 4}, {2, 3, -4, 5}});
  std::vector<std::string> messages;
  CalibOptions o;
  o.log = [&](const std::string& line) { messages.push_back(line); };
  CalibrationResult r = calibrate(m, {"x", "y", "z"}, reader, o);
  EXPECT_EQ(r.ranges.count("y"), 1u);
  EXPECT_EQ(r.ranges.count("z"), 0u);
  EXPECT_EQ(r.non_finite, std::vector<std::string>{"z"});
  EXPECT_EQ(messages, std::vector<std::string>{
                          "calibration: no range for 1 tensors whose every value is NaN or infinite (e.g. 'z'): "
                          "the float model overflows on this data"});
}

// The error of quantizing every value, against a plain loop in double: lengths that are not a
// multiple of the lanes or blocks, power-of-two scales and others, and a zero point outside the
// clip range (where a value of 0 has an error: nothing may be added for values that are not there).
TEST(QuantizationError, IsTheSumOverEveryValue) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uniform(0.5f, 3.f);
  for (size_t n : {1, 15, 16, 17, 100, 256, 1000, 1024, 5000}) {
    std::vector<float> x(n);
    for (float& v : x) v = uniform(rng);
    for (double scale : {0.0625, 0.03}) {
      for (int64_t zp : {0, -60}) {  // -60: q = 0 is 60 steps below the clip range [0, 255]
        for (auto metric : {qmath::ErrorMetric::Squared, qmath::ErrorMetric::Absolute}) {
          double expected = 0;
          const auto s = static_cast<float>(scale);  // the scale as a model stores it
          for (float v : x) {
            float q = std::clamp(std::nearbyint(v / s) + static_cast<float>(zp), 0.0f, 255.0f);
            double e = static_cast<double>((q - static_cast<float>(zp)) * s) - v;  // the value ONNX dequantizes to
            expected += metric == qmath::ErrorMetric::Squared ? e * e : std::fabs(e);
          }
          double got = qmath::quantization_error(x.data(), n, scale, zp, {0, 255}, metric);
          // Summed in float blocks, within 1e-6 of the exact sum (params.h).
          EXPECT_NEAR(got, expected, 1e-6 * expected + 1e-12) << n << " " << scale << " " << zp;
        }
      }
    }
  }
}

// Any scale rounds x / s as the division does, bit for bit: values on and within eight ulps of
// each half-integer step to 2000 (x * (1 / s) rounds some of them the other way),
// values beyond 2^21 steps and the clip range; each value alone (a block whose other values are
// far from a half-integer step) has the error float arithmetic gives it, and all of them, with a
// tail shorter than a block, sum within 1e-6 of those errors' sum. 16-bit clip ranges, so that
// the steps are not clipped, and an 8-bit one that clips them.
TEST(QuantizationError, AnyScaleRoundsAsTheDivisionDoes) {
  for (float s : {0.03f, 0.1f, 1.0f / 3, 7.7e-4f, 3.3e5f}) {
    std::vector<float> x;
    for (int k = -2000; k <= 2000; ++k) {
      const auto tie = static_cast<float>((k + 0.5) * static_cast<double>(s));
      x.push_back(tie);
      float up = tie, down = tie;
      for (int ulps = 0; ulps < 8; ++ulps) {
        x.push_back(up = std::nextafter(up, INFINITY));
        x.push_back(down = std::nextafter(down, -INFINITY));
      }
    }
    for (float t : {3e6f, -5e6f, 1e9f}) x.push_back(t * s);
    x.resize(x.size() + 5, 0.7f * s);
    for (auto [zp, clip] :
         {std::pair<int64_t, qmath::QRange>{0, {-32768, 32767}}, {32768, {0, 65535}}, {3, {-128, 127}}})
      for (auto metric : {qmath::ErrorMetric::Squared, qmath::ErrorMetric::Absolute}) {
        const auto z = static_cast<float>(zp);
        auto error = [&](float v) {  // the seeds' arithmetic, in float as numpy does it
          float q = std::clamp(std::nearbyint(v / s) + z, static_cast<float>(clip.min), static_cast<float>(clip.max));
          float e = (q - z) * s - v;
          return static_cast<double>(metric == qmath::ErrorMetric::Squared ? e * e : std::fabs(e));
        };
        double expected = 0;
        size_t wrong = 0;
        for (float v : x) {
          expected += error(v);
          wrong += qmath::quantization_error(&v, 1, s, zp, clip, metric) != error(v);
        }
        EXPECT_EQ(wrong, 0u) << s << " " << zp;
        EXPECT_NEAR(qmath::quantization_error(x.data(), x.size(), s, zp, clip, metric), expected, 1e-6 * expected)
            << s << " " << zp;
      }
  }
}

// A scale that is no normal float (1e-40: its inverse is infinite) or whose inverse is none
// (2e38) rounds as the division does too: values at and between half-integer steps, and 0.
TEST(QuantizationError, ScalesWithoutANormalInverseRoundAsTheDivisionDoes) {
  for (float s : {1e-40f, 2e38f}) {
    std::vector<float> x = {0.0f};
    for (double step : {-1.0, -0.75, -0.5, -0.25, 0.25, 0.5, 0.75, 1.0}) x.push_back(static_cast<float>(step * s));
    for (auto metric : {qmath::ErrorMetric::Squared, qmath::ErrorMetric::Absolute})
      for (float v : x) {
        float q = std::clamp(std::nearbyint(v / s), -128.0f, 127.0f);
        float e = q * s - v;
        double expected = metric == qmath::ErrorMetric::Squared ? e * e : std::fabs(e);
        EXPECT_EQ(qmath::quantization_error(&v, 1, s, 0, {-128, 127}, metric), expected) << s << " " << v;
      }
  }
}

// Every position's squared error at once is each one's qmath::quantization_error, bit for bit: positions
// where every value rounds to 0, where none is clipped, where some are, and where the scale or its
// inverse is no normal float; int8, uint8 with zero point 128, int16 and a 32-bit clip range (where
// values beyond 2^22 steps must not take the cheaper rounding); lengths around the blocks.
TEST(QuantizationError, Pof2SquaredErrorsAreEachPositionsError) {
  std::mt19937 rng(22);
  std::normal_distribution<float> normal(0.f, 1.f);
  struct Clip {
    int64_t zero_point;
    qmath::QRange range;
  };
  for (size_t n : {1, 255, 256, 1024, 1300, 5000}) {
    for (float magnitude : {1e-3f, 1.f, 3e7f}) {
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng) * magnitude;
      x[n / 2] = (n % 2 ? -40.f : 40.f) * magnitude;  // an outlier, below or above
      const engine::Extrema e = engine::finite_extrema(x.data(), n);
      for (Clip c :
           {Clip{0, {-127, 127}}, Clip{128, {0, 255}}, Clip{0, {-32767, 32767}}, Clip{0, {-2147483647, 2147483647}}}) {
        const int first = -120, last = 150;
        std::vector<int> positions;
        for (int pos = first; pos <= last; ++pos) positions.push_back(pos);
        std::vector<double> all = qmath::pof2_squared_errors(x.data(), n, e.lo, e.hi, positions, c.zero_point, c.range);
        ASSERT_EQ(all.size(), static_cast<size_t>(last - first + 1));
        for (int pos = first; pos <= last; ++pos)
          ASSERT_EQ(all[static_cast<size_t>(pos - first)],
                    qmath::quantization_error(x.data(), n, qmath::pos_to_scale(pos), c.zero_point, c.range,
                                              qmath::ErrorMetric::Squared))
              << n << " " << magnitude << " " << c.range.max << " " << pos;
      }
    }
  }
}

TEST(Calibrate, ErrorsNameWhatIsWrong) {
  auto expect_error = [](auto&& f, const std::string& message) {
    try {
      f();
      ADD_FAILURE() << "no error, expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  auto samples = gaussian_samples(2, 10, 9);
  samples[1].resize(12);  // does not fit x [10]
  expect_error([&] { run(samples, {}); },
               "calibration sample 1 of the test list: input 'x': expected shape float[10], got [12]");
  expect_error([&] { run(gaussian_samples(2, 10, 9), with_method(Method::LayerWisePercentile), false); },
               "LayerWisePercentile reads the data twice (the errors of its candidates come second), and the test "
               "list cannot start over");
  CalibOptions too_many_bins = with_method(Method::Percentile);
  too_many_bins.num_bins = size_t{1} << 21;
  expect_error([&] { run(gaussian_samples(2, 10, 9), too_many_bins); },
               "calibration: the number of histogram bins must be within [1, 1048576], got 2097152");
  ListReader reader(gaussian_samples(2, 10, 9));
  ir::Model m = negations(10);
  expect_error([&] { calibrate(m, {"nope"}, reader, {}); }, "calibration: the model has no tensor 'nope'");
  expect_error([&] { parse_method("KL"); },
               "unknown calibration method 'KL' (known: MinMax, Entropy, Percentile, Distribution, NonOverflow, "
               "MinMSE, LayerWisePercentile)");
  auto all_nan = gaussian_samples(1, 10, 9);
  all_nan[0][0] = NAN;
  expect_error([&] { run(all_nan, {}); }, "calibration: no usable sample in the test list (every sample has NaN or Inf)");
}

}  // namespace
}  // namespace onnxptq::calib
