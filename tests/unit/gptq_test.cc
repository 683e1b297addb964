// GPTQ's core (finetune/gptq_core.h) against a plain implementation of the paper's algorithm
// (arXiv:2210.17323, Algorithm 1 without blocks or lazy updates) written here in double: the same
// integers on a small layer whose input columns are correlated, in order and by act order, per
// tensor, per channel and per group, with blocks smaller than the layer; and a lower output
// error than rounding to nearest on the same scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "calib/data_reader.h"
#include "finetune/fast_finetune.h"
#include "finetune/gptq_core.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/config_keys.h"
#include "quant/quantize.h"
#include "support/test_paths.h"

namespace onnxptq::finetune {
namespace {

using Matrix = std::vector<double>;

// Lower Cholesky factor, plainly.
Matrix cholesky(const Matrix& a, int64_t n) {
  Matrix l(a.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = a[i * n + j];
      for (int64_t p = 0; p < j; ++p) s -= l[i * n + p] * l[j * n + p];
      l[i * n + j] = i == j ? std::sqrt(s) : s / l[j * n + j];
    }
  return l;
}

// The inverse by Gauss-Jordan elimination with partial pivoting.
Matrix inverse(Matrix a, int64_t n) {
  Matrix x(a.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) x[i * n + i] = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[pivot * n + c])) pivot = r;
    for (int64_t j = 0; j < n; ++j) {
      std::swap(a[c * n + j], a[pivot * n + j]);
      std::swap(x[c * n + j], x[pivot * n + j]);
    }
    const double d = a[c * n + c];
    for (int64_t j = 0; j < n; ++j) {
      a[c * n + j] /= d;
      x[c * n + j] /= d;
    }
    for (int64_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r * n + c];
      for (int64_t j = 0; j < n; ++j) {
        a[r * n + j] -= f * a[c * n + j];
        x[r * n + j] -= f * x[c * n + j];
      }
    }
  }
  return x;
}

double reference_code(double w, const GptqGrid& g, size_t p) {
  double v = w / g.scale[p];
  v = std::clamp(v, static_cast<double>(g.qmin - g.zero_point[p]), static_cast<double>(g.qmax - g.zero_point[p]));
  return std::nearbyint(v) + g.zero_point[p];
}

// The paper's algorithm, one row at a time: dead inputs, act order, damping, the upper Cholesky
// factor of H^-1, each row's error divided by its diagonal and moved onto every later row.
std::vector<float> reference_gptq(Matrix h, const std::vector<float>& w0, int64_t k, int64_t n, const GptqGrid& g,
                                  double perc_damp, bool act_order) {
  Matrix w(w0.begin(), w0.end());
  for (int64_t i = 0; i < k; ++i)
    if (h[i * k + i] == 0) {
      h[i * k + i] = 1;
      for (int64_t c = 0; c < n; ++c) w[i * n + c] = 0;
    }
  std::vector<int64_t> perm(k);
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return h[a * k + a] > h[b * k + b]; });
  Matrix hp(h.size()), wp(w.size());
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) hp[i * k + j] = h[perm[i] * k + perm[j]];
    for (int64_t c = 0; c < n; ++c) wp[i * n + c] = w[perm[i] * n + c];
  }
  double mean = 0;
  for (int64_t i = 0; i < k; ++i) mean += hp[i * k + i];
  for (int64_t i = 0; i < k; ++i) hp[i * k + i] += perc_damp * mean / k;
  const Matrix l = cholesky(inverse(hp, k), k);  // H^-1 = L L^T, U = L^T
  auto u = [&](int64_t i, int64_t j) { return l[j * k + i]; };
  std::vector<float> q(w.size());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t c = 0; c < n; ++c) {
      const size_t p = g.param(perm[i], c, k);
      const double code = reference_code(wp[i * n + c], g, p);
      q[perm[i] * n + c] = static_cast<float>(code);
      const double err = (wp[i * n + c] - (code - g.zero_point[p]) * g.scale[p]) / u(i, i);
      for (int64_t j = i + 1; j < k; ++j) wp[j * n + c] -= u(i, j) * err;
    }
  return q;
}

struct Layer {
  int64_t k = 64, n = 16, rows = 256;
  std::vector<float> x, w;
  Matrix h;
};

// X with correlated columns (a random mixing of independent ones), and one column always 0.
Layer make_layer(uint32_t seed, int64_t k = 64, int64_t n = 16, int64_t rows = 256) {
  Layer l;
  l.k = k;
  l.n = n;
  l.rows = rows;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> z(static_cast<size_t>(rows * k)), mix(static_cast<size_t>(k * k));
  for (float& v : z) v = normal(rng);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) mix[i * k + j] = (i == j ? 1.0f : 0.0f) + 0.3f * normal(rng);
  l.x.assign(static_cast<size_t>(rows * k), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += z[r * k + p] * mix[p * k + j];
      l.x[r * k + j] = j == 5 ? 0.0f : s * (1.0f + 0.05f * static_cast<float>(j % 7));
    }
  l.w.resize(static_cast<size_t>(k * n));
  for (float& v : l.w) v = 0.1f * normal(rng);
  GptqHessian hessian(k, 1);
  hessian.add(l.x.data(), rows / 2);  // two calls: the sum does not depend on how rows arrive
  hessian.add(l.x.data() + (rows / 2) * k, rows - rows / 2);
  l.h = hessian.matrix();
  return l;
}

// A symmetric 4-bit grid (codes -8..7) by max |w| over each parameter's values.
GptqGrid grid_of(const Layer& l, GptqGrid::Layout layout, int64_t group = 0) {
  GptqGrid g;
  g.layout = layout;
  g.group_size = group;
  g.qmin = -8;
  g.qmax = 7;
  size_t params = 1;
  if (layout == GptqGrid::Layout::PerColumn) params = static_cast<size_t>(l.n);
  if (layout == GptqGrid::Layout::ColumnGroups) params = static_cast<size_t>(l.n * ((l.k + group - 1) / group));
  std::vector<float> m(params, 0.0f);
  for (int64_t i = 0; i < l.k; ++i)
    for (int64_t c = 0; c < l.n; ++c) {
      const size_t p = g.param(i, c, l.k);
      m[p] = std::max(m[p], std::fabs(l.w[i * l.n + c]));
    }
  for (float v : m) {
    g.scale.push_back(v > 0 ? v / 7.5f : 1.0f);
    g.zero_point.push_back(0.0f);
  }
  return g;
}

void expect_same_as_reference(const Layer& l, const GptqGrid& g, bool act_order, int64_t block) {
  GptqOptions o;
  o.block_size = block;
  o.act_order = act_order;
  o.threads = 2;
  const GptqResult r = gptq_quantize(l.h, l.w.data(), l.k, l.n, g, o);
  const std::vector<float> expected = reference_gptq(l.h, l.w, l.k, l.n, g, o.perc_damp, act_order);
  int differ = 0;
  for (size_t i = 0; i < expected.size(); ++i) differ += r.codes[i] != expected[i];
  EXPECT_EQ(differ, 0) << "act_order " << act_order << ", block " << block;
  EXPECT_LT(r.error_gptq, r.error_nearest) << "act_order " << act_order << ", block " << block;
  // The errors are tr(E^T H E) / 2N, computed here plainly.
  auto error_of = [&](const std::vector<float>& q) {
    double sum = 0;
    for (int64_t c = 0; c < l.n; ++c)
      for (int64_t i = 0; i < l.k; ++i)
        for (int64_t j = 0; j < l.k; ++j) {
          const size_t pi = g.param(i, c, l.k), pj = g.param(j, c, l.k);
          const double ei = l.w[i * l.n + c] - (q[i * l.n + c] - g.zero_point[pi]) * g.scale[pi];
          const double ej = l.w[j * l.n + c] - (q[j * l.n + c] - g.zero_point[pj]) * g.scale[pj];
          sum += ei * l.h[i * l.k + j] * ej;
        }
    return sum / (2.0 * static_cast<double>(l.n));
  };
  std::vector<float> nearest(l.w.size());
  for (int64_t i = 0; i < l.k; ++i)
    for (int64_t c = 0; c < l.n; ++c) nearest[i * l.n + c] = g.code(l.w[i * l.n + c], g.param(i, c, l.k));
  EXPECT_NEAR(r.error_nearest, error_of(nearest), 1e-5 * error_of(nearest));
  EXPECT_NEAR(r.error_gptq, error_of(expected), 1e-3 * error_of(expected));
  // The dead input's weights are 0 (its code the zero point).
  for (int64_t c = 0; c < l.n; ++c) EXPECT_EQ(r.codes[5 * l.n + c], g.zero_point[g.param(5, c, l.k)]);
}

TEST(Gptq, SameIntegersAsThePaperPerTensor) {
  const Layer l = make_layer(1);
  for (bool act_order : {false, true})
    for (int64_t block : {16, 24, 128})
      expect_same_as_reference(l, grid_of(l, GptqGrid::Layout::PerTensor), act_order, block);
}

TEST(Gptq, SameIntegersAsThePaperPerChannel) {
  const Layer l = make_layer(2);
  for (bool act_order : {false, true})
    for (int64_t block : {8, 20})
      expect_same_as_reference(l, grid_of(l, GptqGrid::Layout::PerColumn), act_order, block);
}

TEST(Gptq, SameIntegersAsThePaperPerGroup) {
  const Layer l = make_layer(3);
  for (bool act_order : {false, true})
    expect_same_as_reference(l, grid_of(l, GptqGrid::Layout::ColumnGroups, 16), act_order, 32);
}

TEST(Gptq, AsymmetricUint8Grid) {
  const Layer l = make_layer(4, 48, 12, 200);
  GptqGrid g;
  g.qmin = 0;
  g.qmax = 255;
  float lo = 0, hi = 0;
  for (float v : l.w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  g.scale = {(hi - lo) / 255.0f};
  g.zero_point = {std::nearbyint(-lo / g.scale[0])};
  for (bool act_order : {false, true}) expect_same_as_reference(l, g, act_order, 16);
}

// The inverse Cholesky factor through blocks (sgemm updates) against the plain one.
TEST(Gptq, InverseCholeskyFactorThroughBlocks) {
  const Layer l = make_layer(5, 100, 4, 400);
  Matrix h = l.h;
  h[5 * 100 + 5] = 1;
  for (int64_t i = 0; i < 100; ++i) h[i * 100 + i] += 0.01;
  const Matrix ref = cholesky(inverse(h, 100), 100);  // U = L^T
  for (int64_t block : {16, 40, 128}) {
    const std::vector<float> u = gptq_inverse_cholesky_upper(h, 100, block, 2);
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < 100; ++i)
      for (int64_t j = 0; j < 100; ++j) {
        const double expected = j >= i ? ref[j * 100 + i] : 0.0;
        worst = std::max(worst, std::fabs(u[i * 100 + j] - expected));
        largest = std::max(largest, std::fabs(expected));
      }
    // float32 products on a matrix of condition ~1e4 (damping 1%): a few 1e-5 of the largest entry.
    EXPECT_LT(worst, 1e-4 * largest) << "block " << block;
  }
}

TEST(Gptq, RefusesAMatrixNotPositiveDefinite) {
  Matrix h = {1, 2, 2, 1};
  EXPECT_THROW(gptq_inverse_cholesky_upper(h, 2), Error);
}

// Real weights: the MatMuls of the PP-OCRv4 recognizer (SVTR's attention and MLP), quantized
// through quantize_static with UseGPTQ (8-bit weights per channel, int16 activations) and with
// MatMulNBits' GPTQ (4-bit, groups of 32): on every MatMul GPTQ's layer output error is below
// rounding to nearest on the same grid, and the plan keeps GPTQ's integers.
void expect_gptq_beats_nearest(quant::QuantConfig config, const char* what) {
  ir::Model model = ir::load_model(testing::kOcr / "ch_PP-OCRv4_rec_infer.onnx");
  config.calib.threads = 2;
  calib::RandomReaderOptions ro;
  ro.shapes = {{"x", {1, 3, 48, 320}}};
  ro.count = 8;
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  quant::QuantizeResult r = quant::quantize_static(model, *reader, config, {}, post_quantization_refiner(config));
  size_t rounded = 0;
  double before = 0, after = 0;
  for (const quant::FinetunedLayer& l : r.finetuned) {
    if (l.pass != "gptq" || !l.skipped.empty()) continue;
    ++rounded;
    before += l.loss_before;
    after += l.loss_after;
    EXPECT_LT(l.loss_after, l.loss_before) << what << ": " << l.node;
    EXPECT_TRUE(l.kept) << what << ": " << l.node;
  }
  std::printf("PP-OCRv4 rec, %s: %zu MatMuls, output error (sum over layers) %.4g nearest, %.4g GPTQ\n", what, rounded,
              before, after);
  EXPECT_GE(rounded, 9u) << what;  // the MatMuls of its two SVTR blocks and its neck
}

TEST(Gptq, PpOcrRecognizerQdqBeatsNearest) {
  quant::QuantConfig c;
  quant::apply_config_json(c, {{"calibrate_method", "MinMax"}, {"activation_type", "QInt16"}, {"per_channel", true}});
  quant::apply_extra_option(c, "UseGPTQ", true);
  quant::apply_extra_option(c, "GPTQParams", {{"ActOrder", true}});
  expect_gptq_beats_nearest(c, "UseGPTQ A16W8 per channel");
}

TEST(Gptq, PpOcrRecognizerMatMulNBitsBeatsNearest) {
  quant::QuantConfig c;
  quant::apply_extra_option(c, "UseMatMulNBits", true);
  quant::apply_extra_option(c, "MatMulNBitsParams", {{"Algorithm", "GPTQ"}, {"GroupSize", 32}});
  expect_gptq_beats_nearest(c, "MatMulNBits GPTQ 4-bit, group 32");
}

// The speed figure of docs/benchmarks.md: one 4096 x 4096 MatMul, 128 samples of 512 tokens.
// Not run by default (--gtest_also_run_disabled_tests); it prints the time, asserts nothing on it.
TEST(Gptq, DISABLED_Speed4096) {
  const int64_t k = 4096, n = 4096, tokens = 512, samples = 128;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> sample(static_cast<size_t>(tokens * k)), w(static_cast<size_t>(k * n));
  for (float& v : w) v = 0.02f * normal(rng);
  // Wall time, and the process's CPU time (every thread's), which a busy machine does not inflate;
  // the samples' drawing (a xorshift generator, uniform in [-1, 1)) is left out of both.
  double hessian_seconds = 0, hessian_cpu = 0;
  uint64_t state = 88172645463325252ull;
  GptqHessian hessian(k);
  for (int64_t s = 0; s < samples; ++s) {
    for (float& v : sample) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      v = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
    }
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    hessian.add(sample.data(), tokens);
    hessian_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    hessian_cpu += static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  }
  GptqGrid g;
  g.layout = GptqGrid::Layout::PerColumn;
  for (int64_t c = 0; c < n; ++c) {
    float m = 0;
    for (int64_t i = 0; i < k; ++i) m = std::max(m, std::fabs(w[i * n + c]));
    g.scale.push_back(m / 127.0f);
    g.zero_point.push_back(0);
  }
  const auto middle = std::chrono::steady_clock::now();
  const std::clock_t cpu_middle = std::clock();
  const GptqResult r = gptq_quantize(hessian.matrix(), w.data(), k, n, g, GptqOptions{});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - middle).count();
  const double cpu = static_cast<double>(std::clock() - cpu_middle) / CLOCKS_PER_SEC;
  std::printf(
      "GPTQ 4096x4096, 128 x 512 tokens: wall Hessian %.2f s, GPTQ %.2f s, total %.2f s; CPU Hessian %.2f s, "
      "GPTQ %.2f s, total %.2f s; error %.4g -> %.4g\n",
      hessian_seconds, seconds, hessian_seconds + seconds, hessian_cpu, cpu, hessian_cpu + cpu, r.error_nearest,
      r.error_gptq);
  EXPECT_LT(r.error_gptq, r.error_nearest);
}

}  // namespace
}  // namespace onnxptq::finetune
