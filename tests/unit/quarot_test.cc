// QuaRot's R1 rotation (quant/quarot.h): the Hadamard transform against the Sylvester matrix, a
// small decoder computing the same logits after the rotation, a residual stream with outlier
// channels quantizing with less error, and what cannot be rotated refused by name.
#include "quant/quarot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/session.h"
#include "ir/file_io.h"
#include "onnxptq/error.h"
#include "quant/config_keys.h"
#include "quant/quantize.h"
#include "support/model_run.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

constexpr int64_t kHidden = 16, kVocab = 20, kTokens = 6;

// x -> an RMS norm decomposed as exporters write it, its scale `name` (seeded) the last Mul's.
ir::Value* rms_norm(ir::Graph& g, ir::Value* x, const std::string& name, uint32_t seed) {
  auto v = [&](const std::string& s) { return g.add_value(name + "_" + s); };
  ir::Value *sq = v("sq"), *ms = v("ms"), *e = v("e"), *r = v("r"), *d = v("d"), *y = v("y");
  g.add_node("Mul", {x, x}, {sq}, name + "_square");
  g.add_node("ReduceMean", {sq}, {ms}, name + "_mean")->set_attribute(ir::Attribute::of_ints("axes", {-1}));
  g.add_node("Add", {ms, testing::scalar(g, name + "_eps", 1e-6f)}, {e}, name + "_add");
  g.add_node("Sqrt", {e}, {r}, name + "_sqrt");
  g.add_node("Div", {x, r}, {d}, name + "_div");
  g.add_node("Mul", {d, testing::add_random_initializer(g, name + ".weight", {kHidden}, seed, 0.5f, 1.5f)}, {y}, name);
  return y;
}

// ids [6] -> embed (Gather, table [20, 16], `outliers` of its channels times 40) -> h0;
// ln1 -> up (MatMul + Add bias) -> Relu -> down (MatMul + Add bias) -> h1 = h0 + down;
// ln2 -> q_proj (Gemm, transB 1) -> Relu -> o_proj (Gemm, transB 1, C) -> h2 = h1 + o_proj;
// ln3 -> lm_head (MatMul) -> logits [6, 20].
ir::Model tiny_decoder(int outliers = 0) {
  ir::Model m;
  m.set_opset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* ids = g.add_value("ids");
  ids->type = ir::ValueType::tensor(ir::DataType::Int64, {kTokens});
  g.add_input(ids);
  ir::Value* table = testing::add_random_initializer(g, "embed.weight", {kVocab, kHidden}, 1);
  if (outliers > 0) {
    std::vector<float> t(table->initializer().values<float>().begin(), table->initializer().values<float>().end());
    for (int64_t r = 0; r < kVocab; ++r)
      for (int c = 0; c < outliers; ++c) t[r * kHidden + 3 + 5 * c] *= 40.0f;
    g.set_initializer(table, ir::Tensor::from_values<float>({kVocab, kHidden}, t));
  }
  ir::Value* h0 = g.add_value("h0");
  g.add_node("Gather", {table, ids}, {h0}, "embed");
  auto linear = [&](const std::string& name, ir::Value* x, std::vector<int64_t> dims, uint32_t seed) {
    ir::Value* y = g.add_value(name + "_out");
    g.add_node("MatMul", {x, testing::add_random_initializer(g, name + ".weight", dims, seed, -0.4f, 0.4f)}, {y}, name);
    return y;
  };
  auto add = [&](const std::string& name, ir::Value* a, ir::Value* b) {
    ir::Value* y = g.add_value(name + "_out");
    g.add_node("Add", {a, b}, {y}, name);
    return y;
  };
  ir::Value* up = add("up_bias", linear("up", rms_norm(g, h0, "ln1", 2), {kHidden, 32}, 3),
                      testing::add_random_initializer(g, "up.bias", {32}, 4));
  ir::Value* relu1 = g.add_value("relu1");
  g.add_node("Relu", {up}, {relu1}, "relu1");
  ir::Value* down = add("down_bias", linear("down", relu1, {32, kHidden}, 5),
                        testing::add_random_initializer(g, "down.bias", {kHidden}, 6));
  ir::Value* h1 = add("residual1", h0, down);
  ir::Value* q = g.add_value("q");
  ir::Node* q_proj = g.add_node(
      "Gemm",
      {rms_norm(g, h1, "ln2", 7), testing::add_random_initializer(g, "q_proj.weight", {8, kHidden}, 8, -0.4f, 0.4f)},
      {q}, "q_proj");
  q_proj->set_attribute(ir::Attribute::of_int("transB", 1));
  ir::Value* relu2 = g.add_value("relu2");
  g.add_node("Relu", {q}, {relu2}, "relu2");
  ir::Value* o = g.add_value("o");
  ir::Node* o_proj =
      g.add_node("Gemm",
                 {relu2, testing::add_random_initializer(g, "o_proj.weight", {kHidden, 8}, 9, -0.4f, 0.4f),
                  testing::add_random_initializer(g, "o_proj.bias", {kHidden}, 10)},
                 {o}, "o_proj");
  o_proj->set_attribute(ir::Attribute::of_int("transB", 1));
  ir::Value* h2 = add("residual2", h1, o);
  ir::Value* logits = linear("lm_head", rms_norm(g, h2, "ln3", 11), {kHidden, kVocab}, 12);
  g.add_output(logits);
  return m;
}

const char* kPairs = R"({"R1_pairs": [
  {"prev_nodes": ["embed"], "next_nodes": ["up"], "norm_node": "ln1"},
  {"prev_nodes": ["down"], "next_nodes": ["q_proj"], "norm_node": "ln2"},
  {"prev_nodes": ["o_proj"], "next_nodes": ["lm_head"], "norm_node": "ln3"}]})";

// The file of `text` in `folder`, as RotationOptions for a stream of kHidden channels.
RotationOptions options_for(const ir::TemporaryFolder& folder, const std::string& text, bool random = false) {
  const std::string path = (folder.path() / "rotation.json").string();
  std::ofstream(path) << text;
  return RotationOptions{kHidden, random, path, true};
}

std::vector<Feed> token_feeds(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Feed> feeds;
  for (size_t i = 0; i < count; ++i) {
    std::vector<int64_t> ids(kTokens);
    for (int64_t& id : ids) id = static_cast<int64_t>(rng() % kVocab);
    feeds.push_back({{"ids", ir::Tensor::from_values<int64_t>({kTokens}, ids)}});
  }
  return feeds;
}

// The largest |a - b| over the feeds, relative to the range of a's logits (testing::relative_diff).
double logit_difference(const ir::Model& a, const ir::Model& b, const std::vector<Feed>& feeds) {
  engine::Session sa(a), sb(b);
  double worst = 0;
  for (const Feed& f : feeds) worst = std::max(worst, testing::relative_diff(sa.run(f), sb.run(f)));
  return worst;
}

TEST(QuaRot, HadamardRotationIsTheSylvesterMatrixOverRootN) {
  constexpr int64_t n = 8;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<double> e(n, 0.0);
    e[j] = 1.0;  // e_j R is row j of R = H / sqrt(n), H[j][i] = (-1)^popcount(i & j)
    hadamard_rotate(e.data(), n, {});
    for (int64_t i = 0; i < n; ++i)
      EXPECT_DOUBLE_EQ(e[i], (std::popcount(static_cast<uint64_t>(i & j)) % 2 ? -1.0 : 1.0) / std::sqrt(8.0))
          << i << ", " << j;
  }
  // Orthogonal with the random signs too: lengths kept.
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  const std::vector<double> signs = random_signs(64);
  EXPECT_EQ(signs, random_signs(64));  // seeded
  std::vector<double> v(64);
  for (double& x : v) x = normal(rng);
  double before = 0, after = 0;
  for (double x : v) before += x * x;
  hadamard_rotate(v.data(), 64, signs);
  for (double x : v) after += x * x;
  EXPECT_NEAR(after, before, 1e-12 * before);
}

TEST(QuaRot, TheRotatedDecoderComputesTheSameLogits) {
  const ir::TemporaryFolder folder("onnxptq_quarot");
  const std::vector<Feed> feeds = token_feeds(8, 1);
  for (bool random : {false, true}) {
    const ir::Model model = tiny_decoder(2);
    ir::Model rotated = ir::clone_model(model);
    std::vector<std::string> lines;
    const QuaRotResult r =
        rotate_r1(rotated, options_for(folder, kPairs, random), [&](const std::string& l) { lines.push_back(l); });
    EXPECT_EQ(r.pairs, 3u);
    EXPECT_EQ(r.rotated_out, 3u);
    EXPECT_EQ(r.rotated_in, 3u);
    EXPECT_EQ(r.norms, 3u);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_LT(logit_difference(model, rotated, feeds), 2e-5) << (random ? "random signs" : "Hadamard");
    // The norms' scales are ones now, the weights and biases changed.
    for (const char* name : {"ln1.weight", "ln3.weight"})
      for (float s : rotated.graph->find_value(name)->initializer().values<float>()) EXPECT_EQ(s, 1.0f) << name;
    for (const char* name :
         {"embed.weight", "up.weight", "down.bias", "o_proj.weight", "o_proj.bias", "lm_head.weight"})
      EXPECT_FALSE(std::ranges::equal(rotated.graph->find_value(name)->initializer().values<float>(),
                                      model.graph->find_value(name)->initializer().values<float>()))
          << name;
  }
}

// With the preparation passes on (optimize_model), which make the MatMuls with a bias Add Gemms
// under the MatMuls' names, the rotation runs on the prepared model and keeps its function; pairs
// that do not cover the stream are caught on the first calibration sample.
TEST(QuaRot, RotatesThePreparedModel) {
  const ir::TemporaryFolder folder("onnxptq_quarot");
  const ir::Model model = tiny_decoder(2);
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.calib.threads = 1;
  c.include_rotation = true;
  c.rotation = options_for(folder, kPairs);
  testing::FeedListReader data(token_feeds(4, 2));
  std::vector<std::string> lines;
  const QuantizeResult r = quantize_static(model, data, c, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(r.prepared.has_value());
  EXPECT_NE(std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("QuaRot: "); }),
            lines.end());
  size_t gemms = 0;
  for (const auto& n : r.prepared->graph->nodes()) gemms += n->op_type == "Gemm";
  EXPECT_EQ(gemms, 4u);  // q_proj, o_proj, and up and down fused with their bias
  EXPECT_LT(logit_difference(model, *r.prepared, token_feeds(8, 5)), 2e-5);

  // Pairs that leave out a writer of the stream change the function: refused, not quantized.
  c.rotation = options_for(folder, R"({"R1_pairs": [
    {"prev_nodes": ["embed"], "next_nodes": ["up"], "norm_node": "ln1"},
    {"prev_nodes": ["down"], "next_nodes": ["q_proj"], "norm_node": "ln2"},
    {"next_nodes": ["lm_head"], "norm_node": "ln3"}]})");
  data.rewind();
  try {
    quantize_static(model, data, c);
    ADD_FAILURE() << "pairs without o_proj accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differs from the float model's by"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the R1_pairs miss a node"), std::string::npos) << e.what();
  }
}

// The embedding's outlier channels dominate the int8 range of the residual stream and of each
// norm's output; rotated, they spread over all 16 channels and the logits lose less.
TEST(QuaRot, OutlierChannelsSpreadAndInt8LosesLess) {
  const ir::TemporaryFolder folder("onnxptq_quarot");
  const ir::Model model = tiny_decoder(2);
  QuantConfig plain;
  plain.optimize_model = false;
  plain.calibrate_method = calib::Method::MinMax;
  plain.calib.threads = 1;
  QuantConfig rotated = plain;
  rotated.include_rotation = true;
  rotated.rotation = options_for(folder, kPairs);
  testing::FeedListReader data(token_feeds(16, 2));
  const QuantizeResult without = quantize_static(model, data, plain);
  data.rewind();
  const QuantizeResult with = quantize_static(model, data, rotated);
  EXPECT_TRUE(with.seconds.count("rotation"));
  const std::vector<Feed> other = token_feeds(16, 3);
  const double error_without = logit_difference(model, without.model, other);
  const double error_with = logit_difference(model, with.model, other);
  EXPECT_LT(error_with, 0.5 * error_without) << error_with << " against " << error_without;
  std::cout << "int8 logits error: " << error_with << " rotated, " << error_without << " not\n";
}

TEST(QuaRot, WhatCannotBeRotatedIsRefusedByName) {
  const ir::TemporaryFolder folder("onnxptq_quarot");
  auto refused = [&](const std::string& text, const std::string& words, ir::Model model = tiny_decoder()) {
    try {
      rotate_r1(model, options_for(folder, text));
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("[1]", "expected an object with R1_pairs");
  refused(R"({"R1_pairs": [], "R2": 1})", "rotates R1_pairs only");
  refused(R"({"R1_pairs": [{"prev_node": ["embed"]}]})", "has key 'prev_node'");
  refused(R"({"R1_pairs": [{"prev_nodes": ["embedding"]}]})", "names 'embedding', which is no node");
  refused(R"({"R1_pairs": [{"prev_nodes": ["embed", "embed"]}]})", "a second time");
  refused(R"({"R1_pairs": [{"prev_nodes": ["relu1"]}]})", "prev_nodes are MatMul, Gemm or an embedding's Gather");
  refused(R"({"R1_pairs": [{"next_nodes": ["down"]}]})", "expected 16 (RMatrixDim) along axis 0");
  refused(R"({"R1_pairs": [{"norm_node": "ln1_square"}]})", "one constant scale");
  refused(R"({"R1_pairs": [{"norm_node": "ln1_div"}]})", "a Div is not an RMS norm");
  // A LayerNormalization subtracts the mean, which a rotation does not keep.
  ir::Model with_layer_norm = tiny_decoder();
  ir::Graph& g = *with_layer_norm.graph;
  g.add_node("LayerNormalization", {g.find_value("h0"), g.find_value("ln1.weight")}, {g.add_value("ln")}, "layer_norm");
  refused(R"({"R1_pairs": [{"norm_node": "layer_norm"}]})", "subtracts the mean", std::move(with_layer_norm));

  QuantConfig c;
  apply_extra_option(c, "RMatrixDim", 16);
  EXPECT_THROW(check_config(c), Error);  // without include_rotation
  c.include_rotation = true;
  EXPECT_THROW(check_config(c), Error);  // without RConfigPath
  apply_extra_option(c, "RConfigPath", "rotation.json");
  check_config(c);
  EXPECT_THROW(apply_extra_option(c, "RMatrixDim", 3072), Error);
  c.use_dynamic_quant = true;
  EXPECT_THROW(check_config(c), Error);
  for (const std::filesystem::path& path : {folder.path() / "absent.json", folder.path()}) {
    ir::Model model = tiny_decoder();
    try {
      rotate_r1(model, RotationOptions{kHidden, false, path.string(), true});
      ADD_FAILURE() << path << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path == folder.path() ? "not a file" : "no such file"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace onnxptq::quant
