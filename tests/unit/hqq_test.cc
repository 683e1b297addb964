// MatMulNBits' Algorithm HQQ. The integers against a numpy implementation of the paper are in
// python/tests/test_hqq.py; here: the solver only ever lowers a block's error from its min-max
// start, on the PP-OCRv4 recognizer's MatMul weights HQQ reconstructs them better than round to
// nearest (DEFAULT, symmetric and asymmetric), and ONNX Runtime runs the written model (float
// zero points) as the engine does.
#include "quant/hqq.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "passes/pipeline.h"
#include "quant/config_keys.h"
#include "quant/matmul_nbits.h"
#include "quant/presets.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/pass_check.h"
#include "support/test_paths.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;

// W [K, N] as MatMulNBits reads the weight back: the engine's kernel on A = I.
std::vector<float> hqq_test_dequantized(const NBitsWeight& q, int64_t k, int64_t n, int64_t block) {
  std::vector<float> eye(static_cast<size_t>(k * k), 0.f);
  for (int64_t i = 0; i < k; ++i) eye[static_cast<size_t>(i * (k + 1))] = 1.f;
  std::vector<testing::NodeInput> inputs = {
      {"a", ir::Tensor::from_values<float>({k, k}, eye), false}, {"b", q.b, true}, {"s", q.scales, true}};
  if (q.zero_points) inputs.push_back({"zp", *q.zero_points, true});
  ir::Tensor w = testing::run_node(
      "MatMulNBits", "com.microsoft", 21, inputs,
      testing::attrs(ir::Attribute::of_int("K", k), ir::Attribute::of_int("N", n), ir::Attribute::of_int("bits", 4),
                     ir::Attribute::of_int("block_size", block)))[0];
  return {w.values<float>().begin(), w.values<float>().end()};
}

struct HqqTestErrors {
  double abs = 0, squared = 0;
};

HqqTestErrors hqq_test_errors(const ir::Tensor& w, const std::vector<float>& wq) {
  HqqTestErrors e;
  std::span<const float> wf = w.values<float>();
  for (size_t i = 0; i < wq.size(); ++i) {
    const double d = static_cast<double>(wf[i]) - wq[i];
    e.abs += std::fabs(d);
    e.squared += d * d;
  }
  return e;
}

// Each block's mean |w - dequantized| is at most that of its first iterate, rounding on the
// min-max grid with the zero point round(-min / scale), worked out here from those two rules.
TEST(Hqq, NeverWorseThanItsMinMaxStart) {
  const int64_t k = 72, n = 9, block = 32, k_blocks = 3;  // a last block of 8 rows
  ir::Tensor w = testing::random_float({k, n}, 5, -1.f, 1.f);
  std::span<float> wv = w.mutable_values<float>();
  for (int64_t c = 0; c < n; ++c) wv[static_cast<size_t>(3 * n + c)] = 4.f;  // an outlier in each first block
  const HqqWeight h = hqq_quantize(w, 4, block);
  bool moved = false;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t j = 0; j < k_blocks; ++j) {
      const int64_t begin = j * block, end = std::min(k, begin + block);
      float lo = FLT_MAX, hi = -FLT_MAX;
      for (int64_t i = begin; i < end; ++i) lo = std::min(lo, wv[i * n + c]), hi = std::max(hi, wv[i * n + c]);
      const double s = 15.0 / (static_cast<double>(hi) - lo), z0 = std::nearbyint(-lo * s);
      const size_t p = static_cast<size_t>(c * k_blocks + j);
      EXPECT_NEAR(h.scales[p], 1.0 / s, 1e-7 / s);
      double start = 0, solved = 0;
      for (int64_t i = begin; i < end; ++i) {
        const double v = wv[i * n + c];
        start += std::fabs(v - (std::clamp(std::nearbyint(v * s + z0), 0.0, 15.0) - z0) / s);
        solved += std::fabs(v - (h.codes[static_cast<size_t>(i * n + c)] - static_cast<double>(h.zeros[p])) *
                                    static_cast<double>(h.scales[p]));
      }
      EXPECT_LE(solved, start * (1 + 1e-6)) << c << " " << j;
      moved = moved || h.zeros[p] != static_cast<float>(z0);
    }
  EXPECT_TRUE(moved);  // the solver did something
}

// The recognizer's MatMul weights (SVTR's attention, MLP and neck): HQQ's dequantized weights are
// closer to the float ones than round to nearest's, in |.| (what HQQ's lp prior aims at) and in
// squares, for the whole of them and for most of the weights one by one.
TEST(Hqq, PpOcrRecognizerWeightsCloserThanNearest) {
  ir::Model model = ir::load_model(testing::kOcr / "ch_PP-OCRv4_rec_infer.onnx");
  passes::prepare(model, {});  // its weights are Constant nodes: initializers after this
  QuantConfig config;
  apply_extra_option(config, "UseMatMulNBits", true);
  const int64_t block = 32;
  HqqTestErrors hqq, sym, asym;
  int weights = 0, hqq_best = 0;
  for (ir::Node* node : matmul_nbits_targets(*model.graph, config)) {
    const ir::Tensor& w = node->input(1)->initializer();
    const int64_t k = w.dims()[0], n = w.dims()[1];
    const HqqTestErrors h = hqq_test_errors(w, hqq_test_dequantized(hqq_nbits_weight(w, 4, block), k, n, block));
    const HqqTestErrors s =
        hqq_test_errors(w, hqq_test_dequantized(quantize_nbits_weight(w, 4, block, true), k, n, block));
    const HqqTestErrors a =
        hqq_test_errors(w, hqq_test_dequantized(quantize_nbits_weight(w, 4, block, false), k, n, block));
    ++weights;
    hqq_best += h.abs < a.abs && h.abs < s.abs && h.squared < a.squared && h.squared < s.squared;
    for (auto [sum, e] : {std::pair{&hqq, h}, std::pair{&sym, s}, std::pair{&asym, a}}) {
      sum->abs += e.abs;
      sum->squared += e.squared;
    }
  }
  std::printf(
      "PP-OCRv4 rec, %d MatMul weights, 4-bit blocks of %lld: sum |e| HQQ %.5g, nearest symmetric %.5g, "
      "asymmetric %.5g; sum e^2 HQQ %.5g, %.5g, %.5g; HQQ best on %d\n",
      weights, static_cast<long long>(block), hqq.abs, sym.abs, asym.abs, hqq.squared, sym.squared, asym.squared,
      hqq_best);
  EXPECT_GE(weights, 9);
  EXPECT_LT(hqq.abs, asym.abs);
  EXPECT_LT(hqq.abs, sym.abs);
  EXPECT_LT(hqq.squared, asym.squared);
  EXPECT_LT(hqq.squared, sym.squared);
  EXPECT_GE(2 * hqq_best, weights);
}

// x [2, 3, K] -> MatMul(W [K, N]) -> y, quantize_static with Algorithm HQQ: one MatMulNBits with
// float zero points; ONNX Runtime's output equals the engine's within float32 summation.
TEST(Hqq, OrtRunsTheWrittenModelAsTheEngineDoes) {
  const int64_t k = 72, n = 24, block = 16;  // K not a multiple of the block: a padded last block
  ir::Model model;
  model.set_opset("", 21);
  ir::Graph& g = *model.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {2, 3, k});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, testing::random_float({k, n}, 11, -1.f, 1.f));
  ir::Value* y = g.add_value("y");
  y->type = ir::ValueType::tensor(ir::DataType::Float, {2, 3, n});
  g.add_node("MatMul", {x, w}, {y}, "mm");
  g.add_output(y);
  QuantConfig config;
  apply_extra_option(config, "UseMatMulNBits", true);
  apply_extra_option(config, "MatMulNBitsParams", {{"Algorithm", "HQQ"}, {"GroupSize", block}});
  check_config(config);
  MatMulNBitsResult r = write_matmul_nbits(model, config);
  ASSERT_EQ(testing::count_ops(r.model, "MatMulNBits"), 1u);
  const ir::Node* node = r.model.graph->find_value("y")->producer();
  ASSERT_EQ(node->inputs().size(), 4u);
  EXPECT_EQ(node->input(3)->name(), "w_zero_points");
  EXPECT_EQ(node->input(3)->initializer().dtype(), ir::DataType::Float);  // as ONNX Runtime's HQQ writes them
  EXPECT_EQ(node->input(3)->initializer().dims(), (std::vector<int64_t>{n * 5}));
  EXPECT_EQ(node->find_attribute("accuracy_level"), nullptr);
  const std::vector<float> wq = hqq_test_dequantized(
      NBitsWeight{node->input(1)->initializer(), node->input(2)->initializer(), node->input(3)->initializer()}, k, n,
      block);

  fs::path dir = testing::fresh_dir("hqq_ort");
  ir::save_model(r.model, dir / "q.onnx");
  for (uint32_t seed : {3u, 4u}) {
    std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir / std::to_string(seed));
    std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
    ASSERT_EQ(ort.size(), 1u);
    std::span<const float> xa = feeds.at("x").values<float>(), a = ort[0].values<float>(),
                           b = engine[0].values<float>();
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t c = 0; c < n; ++c) {
        double sum = 0;  // two float32 sums of K products differ by at most 2 K eps sum |x w|
        for (int64_t i = 0; i < k; ++i) sum += std::fabs(xa[row * k + i] * wq[static_cast<size_t>(i * n + c)]);
        EXPECT_LE(std::fabs(a[row * n + c] - b[row * n + c]), 2.0 * k * FLT_EPSILON * sum + 1e-7) << row << " " << c;
      }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(Hqq, RefusedByName) {
  QuantConfig c;
  apply_extra_option(c, "UseMatMulNBits", true);
  for (const nlohmann::json& params :
       {nlohmann::json{{"Algorithm", "HQQ"}, {"Bits", 8}}, nlohmann::json{{"Bits", 8}, {"Algorithm", "HQQ"}}}) {
    const std::string e = testing::error_of([&] { apply_extra_option(c, "MatMulNBitsParams", params); });
    EXPECT_NE(e.find("MatMulNBitsParams Algorithm HQQ with Bits 8"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
  const std::string e = testing::error_of([&] {
    apply_extra_option(c, "MatMulNBitsParams", {{"Algorithm", "HQQ"}, {"Symmetric", true}});
  });
  EXPECT_NE(e.find("MatMulNBitsParams Algorithm HQQ with Symmetric true"), std::string::npos) << e;
  // Symmetric true from the preset gives way to HQQ's asymmetric blocks.
  QuantConfig preset;
  apply_preset(preset, "MATMUL_NBITS");
  EXPECT_NO_THROW(apply_extra_option(preset, "MatMulNBitsParams", {{"Algorithm", "HQQ"}}));
  EXPECT_NO_THROW(check_config(preset));
}

}  // namespace
}  // namespace onnxptq::quant
