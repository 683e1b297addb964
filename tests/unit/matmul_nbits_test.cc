// UseMatMulNBits: MatMuls to com.microsoft MatMulNBits. The packed blocks against values worked
// out by hand from ONNX Runtime's contrib operator documentation (codes low bits first along K,
// (code - zero point) * scale) and its quantizer's rules (range2scale / range2scalezp); ONNX
// Runtime runs the written models as the engine does, and reads the same weights as a blocked
// int4 DequantizeLinear-21 (the ONNX specification's form of them) does.
#include "quant/matmul_nbits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>

#include "calib/data_reader.h"
#include "qmath/quantize.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/pass_check.h"
#include "support/test_paths.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> nbits_bytes(const ir::Tensor& t) {
  std::vector<uint8_t> out(t.byte_size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(t.bytes().data()[i]);
  return out;
}

// W [20, 2]: column 0 has a block of 16 with codes 0..15 and a block of 4 (padded to 16);
// column 1 is zero.
ir::Tensor nbits_hand_weight() {
  std::vector<float> w(40, 0.f);
  for (int k = 0; k < 16; ++k) w[k * 2] = static_cast<float>(k - 8) / 10.f;  // -0.8 .. 0.7
  const float tail[4] = {0.f, 0.3f, -0.6f, 0.9f};
  for (int k = 0; k < 4; ++k) w[(16 + k) * 2] = tail[k];
  return ir::Tensor::from_values<float>({20, 2}, w);
}

TEST(MatMulNBits, SymmetricBlocksAsOrtPacksThem) {
  NBitsWeight q = quantize_nbits_weight(nbits_hand_weight(), 4, 16, true);
  EXPECT_EQ(q.b.dims(), (std::vector<int64_t>{2, 2, 8}));  // [N, k_blocks, blob_size]
  EXPECT_FALSE(q.zero_points);
  // Block 0 of column 0: -0.8 has the largest magnitude, scale -0.8 / -8 = 0.1, codes v / 0.1 + 8.
  // Block 1: 0.9 the largest, scale -0.1125: 0 -> 8, 0.3 -> 5.33 -> 5, -0.6 -> 13.3 -> 13, 0.9 -> 0;
  // past K the zero point's code 8. Column 1 (zeros): code 8 everywhere.
  std::vector<uint8_t> expected = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
                                   0x58, 0x0D, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
  expected.insert(expected.end(), 16, 0x88);
  EXPECT_EQ(nbits_bytes(q.b), expected);
  std::span<const float> s = q.scales.values<float>();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_FLOAT_EQ(s[0], 0.1f);
  EXPECT_FLOAT_EQ(s[1], -0.1125f);
  EXPECT_EQ(s[2], 0.f);
}

TEST(MatMulNBits, AsymmetricBlocksPackZeroPointsPerColumn) {
  NBitsWeight q = quantize_nbits_weight(nbits_hand_weight(), 4, 16, false);
  // Block 0: [-0.8, 0.7], scale 1.5 / 15 = 0.1, zero point 8: the same codes. Block 1: [-0.6, 0.9],
  // scale 0.1, zero point 6: 0 -> 6, 0.3 -> 9, -0.6 -> 0, 0.9 -> 15, padding 6. Column 1: [0, 0],
  // scale 0, zero point 0, codes 0.
  std::vector<uint8_t> expected = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
                                   0x96, 0xF0, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66};
  expected.insert(expected.end(), 16, 0x00);
  EXPECT_EQ(nbits_bytes(q.b), expected);
  ASSERT_TRUE(q.zero_points);
  EXPECT_EQ(nbits_bytes(*q.zero_points), (std::vector<uint8_t>{0x68, 0x00}));  // one byte a column
  // Three blocks a column: the fourth nibble of each column's second byte is the midpoint 8.
  std::vector<float> tall(48 * 1, 0.25f);
  NBitsWeight three = quantize_nbits_weight(ir::Tensor::from_values<float>({48, 1}, tall), 4, 16, false);
  ASSERT_TRUE(three.zero_points);
  EXPECT_EQ(nbits_bytes(*three.zero_points), (std::vector<uint8_t>{0x00, 0x80}));
}

// The engine's MatMulNBits on A = I gives W as the operator defines it: (code - zero point) * scale.
TEST(MatMulNBits, KernelDequantizesAsTheOperatorDefines) {
  for (bool symmetric : {true, false}) {
    NBitsWeight q = quantize_nbits_weight(nbits_hand_weight(), 4, 16, symmetric);
    std::vector<float> eye(20 * 20, 0.f);
    for (int i = 0; i < 20; ++i) eye[i * 21] = 1.f;
    std::vector<testing::NodeInput> inputs = {
        {"a", ir::Tensor::from_values<float>({20, 20}, eye), false}, {"b", q.b, true}, {"s", q.scales, true}};
    if (q.zero_points) inputs.push_back({"zp", *q.zero_points, true});
    std::vector<ir::Tensor> y =
        testing::run_node("MatMulNBits", "com.microsoft", 21, inputs,
                          testing::attrs(ir::Attribute::of_int("K", 20), ir::Attribute::of_int("N", 2),
                                         ir::Attribute::of_int("bits", 4), ir::Attribute::of_int("block_size", 16)));
    std::span<const float> w = y[0].values<float>();
    // Column 0, block 0: (k - 8) * 0.1 (codes 0..15, zero point 8).
    for (int k = 0; k < 16; ++k) EXPECT_FLOAT_EQ(w[k * 2], static_cast<float>(k - 8) * 0.1f) << k;
    const std::vector<float> tail = symmetric ? std::vector<float>{0.f, -3 * -0.1125f, 5 * -0.1125f, -8 * -0.1125f}
                                              : std::vector<float>{0.f, 0.3f, -0.6f, 0.9f};
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(w[(16 + k) * 2], tail[k], 1e-6) << k;
    for (int k = 0; k < 20; ++k) EXPECT_EQ(w[k * 2 + 1], 0.f);
    // The optional bias (input 5, after zero_points and g_idx) is added to each row.
    if (!q.zero_points) inputs.push_back({"", {}, false});
    inputs.push_back({"", {}, false});
    inputs.push_back({"bias", ir::Tensor::from_values<float>({2}, std::vector<float>{0.5f, -2.f}), true});
    std::vector<ir::Tensor> with_bias =
        testing::run_node("MatMulNBits", "com.microsoft", 21, inputs,
                          testing::attrs(ir::Attribute::of_int("K", 20), ir::Attribute::of_int("N", 2),
                                         ir::Attribute::of_int("bits", 4), ir::Attribute::of_int("block_size", 16)));
    std::span<const float> wb = with_bias[0].values<float>();
    for (int k = 0; k < 20; ++k) {
      EXPECT_EQ(wb[k * 2], w[k * 2] + 0.5f) << k;
      EXPECT_EQ(wb[k * 2 + 1], -2.f) << k;
    }
  }
}

// x [2, 3, K] -> MatMul(W [K, N]) -> Add(c) -> y.
ir::Model nbits_model(int64_t k, int64_t n) {
  ir::Model m;
  m.set_opset("", 21);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {2, 3, k});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, testing::random_float({k, n}, 11, -1.f, 1.f));
  ir::Value* c = g.add_value("c");
  g.set_initializer(c, testing::random_float({n}, 12, -1.f, 1.f));
  g.add_node("MatMul", {x, w}, {g.add_value("mm")}, "mm");
  ir::Value* y = g.add_value("y");
  y->type = ir::ValueType::tensor(ir::DataType::Float, {2, 3, n});
  g.add_node("Add", {g.find_value("mm"), c}, {y}, "add");
  g.add_output(y);
  return m;
}

// |a - b| within what two float32 sums of K products may differ by in any order: 2 K eps sum |a w|.
// y - c for a [.., N] output y and the bias c [N] the test models add: the products alone, for the
// summation bound.
ir::Tensor without_bias(const ir::Tensor& c, const ir::Tensor& y) {
  ir::Tensor out = y;
  std::span<float> v = out.mutable_values<float>();
  std::span<const float> bias = c.values<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] -= bias[i % bias.size()];
  return out;
}

void expect_within_sum_bound(const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor& x, const ir::Tensor& w,
                             const std::string& what) {
  const int64_t k = w.dims()[0], n = w.dims()[1], rows = x.size() / k;
  std::span<const float> xa = x.values<float>(), wa = w.values<float>(), av = a.values<float>(), bv = b.values<float>();
  ASSERT_EQ(av.size(), static_cast<size_t>(rows * n));
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += std::abs(xa[r * k + i] * wa[i * n + c]);
      const double bound = 2.0 * static_cast<double>(k) * FLT_EPSILON * sum + 1e-7;
      const double diff = std::abs(av[r * n + c] - bv[r * n + c]);
      worst = std::max(worst, diff / bound);
      EXPECT_LE(diff, bound) << what << " at " << r << ", " << c;
    }
  std::cout << what << ": worst |difference| is " << worst << " of the bound\n";
}

struct NBitsCase {
  const char* label;
  int64_t bits, block;
  bool symmetric;
  int64_t accuracy_level;
};

class NBitsOrt : public ::testing::TestWithParam<NBitsCase> {};

TEST_P(NBitsOrt, OrtRunsTheWrittenModelAsTheEngineDoes) {
  const NBitsCase& p = GetParam();
  const int64_t k = 72, n = 24;  // K not a multiple of the block: the last block is padded
  ir::Model model = nbits_model(k, n);
  QuantConfig config;
  apply_extra_option(config, "UseMatMulNBits", nlohmann::json(true));
  apply_extra_option(
      config, "MatMulNBitsParams",
      {{"GroupSize", p.block}, {"Symmetric", p.symmetric}, {"Bits", p.bits}, {"AccuracyLevel", p.accuracy_level}});
  check_config(config);
  MatMulNBitsResult r = write_matmul_nbits(model, config);
  EXPECT_EQ(r.quantized_nodes, std::vector<std::string>{"mm"});
  EXPECT_EQ(testing::count_ops(r.model, "MatMul"), 0u);
  ASSERT_EQ(testing::count_ops(r.model, "MatMulNBits"), 1u);
  const ir::Node* node = r.model.graph->find_value("mm")->producer();
  EXPECT_EQ(node->name, "mm_Q" + std::to_string(p.bits));
  EXPECT_EQ(node->domain, "com.microsoft");
  EXPECT_EQ(node->attr_int("K", 0), k);
  EXPECT_EQ(node->attr_int("N", 0), n);
  EXPECT_EQ(node->attr_int("bits", 0), p.bits);
  EXPECT_EQ(node->attr_int("block_size", 0), p.block);
  EXPECT_EQ(node->find_attribute("accuracy_level") != nullptr, p.accuracy_level != 0);
  EXPECT_EQ(node->input(1)->name(), "w_Q" + std::to_string(p.bits));
  EXPECT_EQ(node->inputs().size(), p.symmetric ? 3u : 4u);
  EXPECT_EQ(r.model.graph->find_value("w"), nullptr);  // the float weight is gone
  EXPECT_EQ(r.model.opset("com.microsoft"), 1);

  fs::path dir = testing::fresh_dir(std::string("nbits_") + p.label);
  ir::save_model(r.model, dir / "q.onnx");
  // The dequantized weights, as the engine reads them (checked against hand values above).
  const ir::Node& nb = *node;
  std::vector<float> eye(k * k, 0.f);
  for (int64_t i = 0; i < k; ++i) eye[i * (k + 1)] = 1.f;
  std::vector<testing::NodeInput> inputs = {{"a", ir::Tensor::from_values<float>({k, k}, eye), false},
                                            {"b", nb.input(1)->initializer(), true},
                                            {"s", nb.input(2)->initializer(), true}};
  if (!p.symmetric) inputs.push_back({"zp", nb.input(3)->initializer(), true});
  ir::Tensor w = testing::run_node(
      "MatMulNBits", "com.microsoft", 21, inputs,
      testing::attrs(ir::Attribute::of_int("K", k), ir::Attribute::of_int("N", n),
                     ir::Attribute::of_int("bits", p.bits), ir::Attribute::of_int("block_size", p.block)))[0];
  // Every weight within half a step of its block (the rounding), but for ORT's symmetric clip.
  std::span<const float> wq = w.values<float>(), wf = model.graph->find_value("w")->initializer().values<float>();
  std::span<const float> scales = nb.input(2)->initializer().values<float>();
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i) {
      const double step = std::abs(scales[c * ((k + p.block - 1) / p.block) + i / p.block]);
      EXPECT_LE(std::abs(wq[i * n + c] - wf[i * n + c]), p.symmetric ? 1.001 * step : 0.501 * step) << c << " " << i;
    }

  for (uint32_t seed : {3u, 4u}) {
    std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir / std::to_string(seed));
    std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
    ASSERT_EQ(ort.size(), 1u);
    ir::Tensor c = model.graph->find_value("c")->initializer();
    expect_within_sum_bound(without_bias(c, ort[0]), without_bias(c, engine[0]), feeds.at("x"), w,
                            std::string(p.label) + " ORT vs onnxptq");
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Params, NBitsOrt,
                         ::testing::Values(NBitsCase{"b4_sym_32", 4, 32, true, 0},
                                           NBitsCase{"b4_asym_16_acc1", 4, 16, false, 1},
                                           NBitsCase{"b8_sym_32", 8, 32, true, 0},
                                           NBitsCase{"b8_asym_64", 8, 64, false, 0}),
                         [](const auto& info) { return std::string(info.param.label); });

// The symmetric 4-bit weights written as the ONNX specification's blocked int4 DequantizeLinear-21
// (int4 code - 8, block along K): ONNX Runtime's MatMul on them equals its MatMulNBits, and the
// engine's blocked DequantizeLinear gives the engine's MatMulNBits weights bit for bit.
TEST(MatMulNBits, SameWeightsAsABlockedInt4DequantizeLinear) {
  const int64_t k = 72, n = 24, block = 32, k_blocks = 3;
  ir::Model model = nbits_model(k, n);
  QuantConfig config;
  config.use_matmul_nbits = true;
  config.matmul_nbits.group_size = block;
  MatMulNBitsResult r = write_matmul_nbits(model, config);
  const ir::Node& nb = *r.model.graph->find_value("mm")->producer();
  const ir::Tensor& b = nb.input(1)->initializer();
  std::span<const float> s = nb.input(2)->initializer().values<float>();
  // int4 [K, N] = code - 8 (row major), scales [k_blocks, N].
  std::vector<int8_t> codes(k * n);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i) {
      const uint8_t byte = b.values<uint8_t>()[(c * k_blocks + i / block) * (block / 2) + (i % block) / 2];
      codes[i * n + c] = static_cast<int8_t>(((i % 2 == 0) ? (byte & 0x0F) : (byte >> 4)) - 8);
    }
  ir::Tensor q(ir::DataType::Int4, {k, n});
  qmath::pack_4bit(codes.data(), k * n, q.mutable_bytes());
  std::vector<float> st(k_blocks * n);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t j = 0; j < k_blocks; ++j) st[j * n + c] = s[c * k_blocks + j];

  ir::Model dq = ir::clone_model(model);
  ir::Graph& g = *dq.graph;
  ir::Value* qv = g.add_value("w_int4");
  g.set_initializer(qv, q);
  ir::Value* sv = g.add_value("w_scale");
  g.set_initializer(sv, ir::Tensor::from_values<float>({k_blocks, n}, st));
  ir::Value* wd = g.add_value("w_dq");
  ir::Node* d = g.add_node("DequantizeLinear", {qv, sv}, {wd}, "w_DequantizeLinear");
  d->set_attribute(ir::Attribute::of_int("axis", 0));
  d->set_attribute(ir::Attribute::of_int("block_size", block));
  g.set_node_input(g.find_value("mm")->producer(), 1, wd);
  g.remove_value(g.find_value("w"));
  g.sort_nodes();

  fs::path dir = testing::fresh_dir("nbits_blocked_dq");
  ir::save_model(r.model, dir / "nbits.onnx");
  ir::save_model(dq, dir / "dq.onnx");
  std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, 5);
  std::vector<ir::Tensor> ort_nbits = testing::ort_run(dir / "nbits.onnx", r.model, feeds, dir / "a");
  std::vector<ir::Tensor> ort_dq = testing::ort_run(dir / "dq.onnx", dq, feeds, dir / "b", true);
  // The engine's weights of either form: x = I.
  std::vector<float> eye(k * k, 0.f);
  for (int64_t i = 0; i < k; ++i) eye[i * (k + 1)] = 1.f;
  ir::Tensor w_nbits = testing::run_node(
      "MatMulNBits", "com.microsoft", 21,
      {{"a", ir::Tensor::from_values<float>({k, k}, eye), false},
       {"b", b, true},
       {"s", nb.input(2)->initializer(), true}},
      testing::attrs(ir::Attribute::of_int("K", k), ir::Attribute::of_int("N", n), ir::Attribute::of_int("bits", 4),
                     ir::Attribute::of_int("block_size", block)))[0];
  ir::Tensor w_dq = testing::run_node(
      "DequantizeLinear", "", 21, {{"x", q, true}, {"s", ir::Tensor::from_values<float>({k_blocks, n}, st), true}},
      testing::attrs(ir::Attribute::of_int("axis", 0), ir::Attribute::of_int("block_size", block)))[0];
  testing::expect_bit_equal({w_nbits}, {w_dq}, "MatMulNBits and blocked DequantizeLinear weights");
  ir::Tensor c = model.graph->find_value("c")->initializer();
  expect_within_sum_bound(without_bias(c, ort_nbits[0]), without_bias(c, ort_dq[0]), feeds.at("x"), w_dq,
                          "ORT MatMulNBits vs ORT DequantizeLinear + MatMul");
  std::vector<ir::Tensor> engine_dq = testing::run_model(dq, feeds);
  expect_within_sum_bound(without_bias(c, ort_dq[0]), without_bias(c, engine_dq[0]), feeds.at("x"), w_dq,
                          "ORT vs onnxptq on the blocked DequantizeLinear");
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(MatMulNBits, KeysAndRefusals) {
  QuantConfig c;
  apply_preset(c, "MATMUL_NBITS");
  EXPECT_TRUE(c.use_matmul_nbits);
  EXPECT_EQ(c.matmul_nbits.group_size, 128);
  EXPECT_EQ(c.matmul_nbits.accuracy_level, 1);
  EXPECT_NO_THROW(check_config(c));
  QuantConfig hqq;
  std::string e = testing::error_of([&] {
    apply_extra_option(hqq, "MatMulNBitsParams", {{"Algorithm", "HQQ"}, {"Bits", 8}});
  });
  EXPECT_NE(e.find("Algorithm HQQ with Bits 8"), std::string::npos) << e;
  QuantConfig gptq;
  apply_extra_option(gptq, "UseMatMulNBits", true);
  apply_extra_option(gptq, "MatMulNBitsParams", {{"Algorithm", "GPTQ"}});
  EXPECT_EQ(gptq.matmul_nbits.algorithm, "GPTQ");
  EXPECT_NO_THROW(check_config(gptq));
  EXPECT_TRUE(has_post_quantization(gptq));  // GPTQ runs above the quantizer, which needs the refiner
  apply_extra_option(gptq, "GPTQParams", {{"PerChannel", true}});
  EXPECT_NE(testing::error_of([&] { check_config(gptq); }).find("PerChannel true with UseMatMulNBits"),
            std::string::npos);
  QuantConfig bad;
  EXPECT_NE(testing::error_of([&] {
              apply_extra_option(bad, "MatMulNBitsParams", {{"GroupSize", 100}});
            }).find("GroupSize: expected a power of 2 of at least 16"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              apply_extra_option(bad, "MatMulNBitsParams", {{"Bits", 3}});
            }).find("Bits: expected 4 or 8"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              apply_extra_option(bad, "MatMulNBitsParams", {{"BlockSize", 32}});
            }).find("MatMulNBitsParams has no key BlockSize"),
            std::string::npos);
  QuantConfig params_only;
  apply_extra_option(params_only, "MatMulNBitsParams", {{"Bits", 8}});
  EXPECT_NE(testing::error_of([&] { check_config(params_only); }).find("takes effect only with UseMatMulNBits"),
            std::string::npos);
  QuantConfig with_ft = c;
  with_ft.include_fast_ft = true;
  EXPECT_NE(testing::error_of([&] { check_config(with_ft); }).find("UseMatMulNBits"), std::string::npos);
}

// The PP-OCRv4 recognizer (SVTR: its attention and MLP MatMuls have constant weights) through
// quantize_static with the MATMUL_NBITS preset: ONNX Runtime runs it, as the engine does.
TEST(MatMulNBits, PpOcrRecognizerRunsInOrt) {
  const fs::path rec = testing::kOcr / "ch_PP-OCRv4_rec_infer.onnx";
  ir::Model model = ir::load_model(rec);
  QuantConfig config;
  apply_preset(config, "MATMUL_NBITS");
  calib::RandomReaderOptions ro;
  ro.shapes = {{"x", {1, 3, 48, 160}}};
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  QuantizeResult r = quantize_static(model, *reader, config);
  const size_t nbits = testing::count_ops(r.model, "MatMulNBits");
  std::cout << "PP-OCRv4 rec: " << nbits << " MatMulNBits, " << testing::count_ops(r.model, "MatMul")
            << " MatMuls left\n";
  EXPECT_GT(nbits, 0u);
  EXPECT_EQ(nbits, r.plan.quantized_nodes.size());
  fs::path dir = testing::fresh_dir("nbits_ppocr_rec");
  ir::save_model(r.model, dir / "q.onnx");
  std::map<std::string, ir::Tensor> feeds = testing::seeded_feeds(model, 9, ro.shapes);
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir);
  std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
  // The float model's engine-vs-ORT difference on this input is the measure of float32 noise at
  // this depth; the written model must not differ more than the float model does, times two.
  ir::save_model(model, dir / "float.onnx");
  std::vector<ir::Tensor> ort_float = testing::ort_run(dir / "float.onnx", model, feeds, dir / "f");
  std::vector<ir::Tensor> engine_float = testing::run_model(model, feeds);
  const double noise = testing::relative_diff(ort_float, engine_float);
  const double diff = testing::relative_diff(ort, engine);
  std::cout << "PP-OCRv4 rec: |ORT - onnxptq| / range " << diff << " (float model: " << noise << ")\n";
  EXPECT_LE(diff, std::max(1e-5, 2 * noise));
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq::quant
