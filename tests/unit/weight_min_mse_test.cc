// Quark's float-scale weight MinMSE (extra options WeightCalibrateMethod and
// MinMSEModeFloatScale) through quantize_static: the weight scale chosen is the candidate of least
// error, the candidates and their errors computed here again by brute force from Quark's
// description of compute_minmse (quant_utils.py): Percentile tries the two-sided percentiles 99.9,
// 99.99, 99.999 and 99.9999 (numpy's linear percentile); HistCenter and All a min(2048, n)-bin
// histogram's windows of bin centres shrinking symmetrically from all the bins to half of them,
// HistCenter's error that of the centres weighted by their counts, All's that of every value.
// Symmetric int8: scale 2 max(|lo|, |hi|) / 254, values saturating at +-127.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/config_keys.h"
#include "quant/quantize.h"
#include "support/one_node.h"
#include "support/pass_check.h"

namespace onnxptq {
namespace {

// Two output channels of 100,000 values, uniform in [-1, 1] and [-0.5, 0.5], each with one
// outlier 1.6 times its bound (+1.6 and -0.8): MinMax's range spends most of its steps on it.
constexpr int64_t kInputs = 1000, kKernel = 10;

std::vector<float> weight_values() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> w(2 * kInputs * kKernel * kKernel);
  const size_t per_channel = w.size() / 2;
  for (size_t i = 0; i < w.size(); ++i) w[i] = uniform(rng) * (i < per_channel ? 1.f : 0.5f);
  w[123] = 1.6f;
  w[per_channel + 4567] = -0.8f;
  return w;
}

ir::Model conv_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {1, kInputs, kKernel, kKernel});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, ir::Tensor::from_values<float>({2, kInputs, kKernel, kKernel}, weight_values()));
  ir::Value* y = testing::add_float_value(g, "y", {1, 2, 1, 1});
  g.add_node("Conv", {x, w}, {y}, "conv");
  g.add_output(y);
  return m;
}

// ---- The brute force

float symmetric_int8_scale(double lo, double hi) {
  double a = std::max(std::fabs(std::min(lo, 0.0)), std::fabs(std::max(hi, 0.0)));
  return static_cast<float>(2.0 * static_cast<float>(a) / 254.0);
}

float fake_quantize(float x, float s) { return std::clamp(std::nearbyint(x / s), -127.f, 127.f) * s; }

// Mean squared error after quantize-dequantize, each value weighted (HistCenter's counts) or not.
double mse(const std::vector<float>& x, float s, const std::vector<double>* weights = nullptr) {
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double e = static_cast<double>(fake_quantize(x[i], s)) - x[i];
    sum += e * e * (weights ? (*weights)[i] : 1.0);
  }
  return sum / static_cast<double>(x.size());
}

// numpy's percentile, "linear": q / 100 of the way along the sorted values, between the two
// nearest, from the nearer one (its _lerp; the difference of float32 values in float32).
double percentile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  double h = (static_cast<double>(v.size()) - 1) * (q / 100);
  auto i = static_cast<size_t>(h);
  double g = h - static_cast<double>(i);
  float a = v[i], b = v[std::min(i + 1, v.size() - 1)];
  float d = b - a;
  return g < 0.5 ? a + static_cast<double>(d) * g : b - static_cast<double>(d) * (1 - g);
}

struct Candidate {
  float scale;
  double error;  // the error the mode minimises
};

std::vector<Candidate> candidates(const std::vector<float>& x, const std::string& mode) {
  std::vector<Candidate> out;
  if (mode == "Percentile") {
    for (double p : {99.9, 99.99, 99.999, 99.9999}) {
      float s = symmetric_int8_scale(percentile(x, (100 - p) / 2), percentile(x, 100 - (100 - p) / 2));
      out.push_back({s, mse(x, s)});
    }
    return out;
  }
  // np.histogram: float32 edges of linspace(min, max, bins + 1); bin i holds [e_i, e_i+1), the last one closed.
  const size_t bins = std::min<size_t>(2048, x.size());
  auto [mn, mx] = std::minmax_element(x.begin(), x.end());
  std::vector<float> edges(bins + 1);
  for (size_t i = 0; i <= bins; ++i)
    edges[i] = static_cast<float>(*mn + static_cast<double>(i) * ((static_cast<double>(*mx) - *mn) / bins));
  edges[bins] = *mx;
  std::vector<double> counts(bins, 0);
  for (float v : x) {
    auto i = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), v) - edges.begin());
    counts[std::min(i, bins) - 1] += 1;
  }
  std::vector<float> centers(bins);
  for (size_t i = 0; i < bins; ++i) centers[i] = (edges[i] + edges[i + 1]) / 2;
  // Windows of bins ... bins/2 + 1 centres; gap is Quark's bins - center_i, center_i from bins/2 up.
  for (size_t width = bins; width > bins / 2; --width) {
    size_t gap = bins - (width - 1);
    auto left = static_cast<size_t>(static_cast<double>(gap) / 2);
    auto right = static_cast<size_t>(static_cast<double>(bins) - static_cast<double>(gap) / 2);
    float s = symmetric_int8_scale(centers[left], centers[right]);
    out.push_back({s, mode == "HistCenter" ? mse(centers, s, &counts) : mse(x, s)});
  }
  return out;
}

std::vector<float> channel(const std::vector<float>& w, int c) {
  const size_t n = w.size() / 2;
  return {w.begin() + static_cast<std::ptrdiff_t>(c * n), w.begin() + static_cast<std::ptrdiff_t>((c + 1) * n)};
}

quant::QuantConfig min_mse_config(const std::string& mode, bool per_channel) {
  quant::QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.per_channel = per_channel;
  c.calib.threads = 2;
  quant::apply_extra_option(c, "WeightCalibrateMethod", "ExtendedCalibrationMethod.MinMSE");
  quant::apply_extra_option(c, "MinMSEModeFloatScale", mode);
  return c;
}

std::vector<qmath::ScaleZeroPoint> weight_params(const quant::QuantConfig& config) {
  ir::Model m = conv_model();
  calib::RandomReaderOptions ro;
  ro.count = 1;
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(m.graph->fed_inputs(), ro);
  quant::QuantizeResult r = quant::quantize_static(m, *reader, config);
  const quant::TensorPlan* w = r.plan.find("w");
  EXPECT_TRUE(w);
  return w ? w->params : std::vector<qmath::ScaleZeroPoint>{};
}

// The scale chosen is one of the candidates and none has a smaller error (the first of equals
// wins, so a later candidate of the same error is no counterexample); MinMax's range is clearly worse.
void expect_least_error(const std::vector<float>& x, const std::string& mode, const qmath::ScaleZeroPoint& got) {
  std::vector<Candidate> all = candidates(x, mode);
  auto chosen = std::find_if(all.begin(), all.end(), [&](const Candidate& c) { return c.scale == got.scale; });
  ASSERT_NE(chosen, all.end()) << mode << ": scale " << got.scale << " is no candidate";
  double least = std::numeric_limits<double>::infinity();
  for (const Candidate& c : all) least = std::min(least, c.error);
  EXPECT_EQ(chosen->error, least) << mode;
  EXPECT_EQ(got.zero_point, 0);
  auto [mn, mx] = std::minmax_element(x.begin(), x.end());
  float min_max = symmetric_int8_scale(*mn, *mx);
  double min_mse = mse(x, got.scale);
  EXPECT_GT(mse(x, min_max), 1.4 * min_mse) << mode << ": MinMax's error against the chosen scale's";
  std::cout << mode << ": scale " << got.scale << " (MinMax " << min_max << "), mean squared error " << min_mse
            << " (MinMax " << mse(x, min_max) << ") of " << all.size() << " candidates\n";
}

class WeightMinMse : public ::testing::TestWithParam<const char*> {};

TEST_P(WeightMinMse, PerTensorScaleIsTheCandidateOfLeastError) {
  std::vector<qmath::ScaleZeroPoint> p = weight_params(min_mse_config(GetParam(), false));
  ASSERT_EQ(p.size(), 1u);
  expect_least_error(weight_values(), GetParam(), p[0]);
}

TEST_P(WeightMinMse, PerChannelScalesAreTheCandidatesOfLeastError) {
  std::vector<qmath::ScaleZeroPoint> p = weight_params(min_mse_config(GetParam(), true));
  ASSERT_EQ(p.size(), 2u);
  for (int c = 0; c < 2; ++c) expect_least_error(channel(weight_values(), c), GetParam(), p[c]);
}

INSTANTIATE_TEST_SUITE_P(Modes, WeightMinMse, ::testing::Values("Percentile", "HistCenter", "All"));

// Without the keys (and with WeightCalibrateMethod MinMax) the weight keeps MinMax's scale.
TEST(WeightMinMseKeys, MinMaxIsTheDefault) {
  quant::QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  std::vector<float> w = weight_values();
  float min_max = symmetric_int8_scale(*std::min_element(w.begin(), w.end()), *std::max_element(w.begin(), w.end()));
  EXPECT_EQ(weight_params(c)[0].scale, min_max);
  quant::apply_extra_option(c, "WeightCalibrateMethod", "CalibrationMethod.MinMax");
  EXPECT_EQ(weight_params(c)[0].scale, min_max);
}

TEST(WeightMinMseKeys, RefusedByName) {
  using testing::error_of;
  quant::QuantConfig c;
  EXPECT_EQ(error_of([&] { quant::apply_extra_option(c, "WeightCalibrateMethod", "Entropy"); }),
            "extra option WeightCalibrateMethod: expected \"MinMax\" or \"MinMSE\", got \"Entropy\"");
  EXPECT_EQ(
      error_of([&] { quant::apply_extra_option(c, "MinMSEModeFloatScale", "MostCommon"); }),
      "extra option MinMSEModeFloatScale: expected \"Percentile\", \"HistCenter\" or \"All\", got \"MostCommon\"");
  // The mode alone would change nothing.
  quant::apply_extra_option(c, "MinMSEModeFloatScale", "All");
  c.calibrate_method = calib::Method::MinMax;
  EXPECT_EQ(error_of([&] { quant::check_config(c); }),
            "extra option MinMSEModeFloatScale takes effect only with WeightCalibrateMethod MinMSE");
  // Power-of-two methods search their weights' positions by MinMSE already (vai_q_onnx), also with
  // UsePowerOf2Scale false; Int16Scale's weight scales are M / 2^N.
  quant::apply_extra_option(c, "WeightCalibrateMethod", "MinMSE");
  EXPECT_EQ(error_of([&] { quant::check_config(c); }), "");
  c.calibrate_method = calib::Method::MinMSE;
  EXPECT_NE(error_of([&] {
              quant::check_config(c);
            }).find("WeightCalibrateMethod MinMSE with calibrate_method MinMSE: power-of-two methods"),
            std::string::npos);
  c.use_power_of_two_scale = false;
  EXPECT_NE(error_of([&] { quant::check_config(c); }).find("WeightCalibrateMethod MinMSE with calibrate_method"),
            std::string::npos);
  c = quant::QuantConfig{};
  c.calibrate_method = calib::Method::MinMax;
  quant::apply_extra_option(c, "WeightCalibrateMethod", "MinMSE");
  c.int16_scale = true;
  EXPECT_EQ(error_of([&] { quant::check_config(c); }),
            "WeightCalibrateMethod MinMSE and Int16Scale: M / 2^N weight scales are not float scales");
  c.int16_scale = false;
  c.format = quant::QuantFormat::ExtendedQDQ;
  c.weight_type = ir::DataType::BFloat16;
  EXPECT_EQ(error_of([&] { quant::check_config(c); }),
            "WeightCalibrateMethod MinMSE with weight_type QBFloat16: the MinMSE search needs an integer weight type");
}

}  // namespace
}  // namespace onnxptq
