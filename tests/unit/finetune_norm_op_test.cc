// The normalizations as trained layers: InstanceNormalization and LayerNormalization forward
// against the ONNX operator specification's formulas computed here in double (and against the
// engine's kernels, checked against ONNX Runtime in kernels_norm_pool_test.cc), their scale and
// bias gradients against differences, the same bits on any thread count, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "finetune/layer_op.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "onnxptq/error.h"
#include "support/finetune_support.h"
#include "support/one_node.h"

namespace onnxptq::finetune {
namespace {

using Dims = std::vector<int64_t>;
using testing::random_values;
using testing::unravel;

// A graph of one normalization node "norm": inputs x, scale (and B of `bias_dims`, its type
// set, since its dims decide how it broadcasts), outputs y (and Mean, InvStdDev).
struct NormNode {
  NormNode(const std::string& op, const Dims* bias_dims, size_t outputs = 1) {
    std::vector<ir::Value*> in = {graph.add_value("x"), graph.add_value("scale")};
    if (bias_dims) {
      in.push_back(graph.add_value("B"));
      in.back()->type = ir::ValueType::tensor(ir::DataType::Float, *bias_dims);
    }
    std::vector<ir::Value*> out = {graph.add_value("y")};
    if (outputs > 1) out.push_back(graph.add_value("mean"));
    if (outputs > 2) out.push_back(graph.add_value("inv_std_dev"));
    node = graph.add_node(op, in, out, "norm");
  }
  NormNode& with(ir::Attribute a) {
    node->set_attribute(std::move(a));
    return *this;
  }
  ir::Graph graph;
  ir::Node* node = nullptr;
};

// The index into a tensor of `dims` that ONNX's unidirectional broadcasting reads for the
// element of `index` in a tensor of `to` (dims aligned on the right, a dim of 1 repeated).
int64_t broadcast_index(const Dims& index, const Dims& to, const Dims& dims) {
  int64_t at = 0;
  const size_t skip = to.size() - dims.size();
  for (size_t d = 0; d < dims.size(); ++d) at = at * dims[d] + (dims[d] == 1 ? 0 : index[skip + d]);
  return at;
}

// The specification's formulas in double: x standardized over the dims from `axis` on (the
// population variance), then Scale and B broadcast to x, multiplied and added.
std::vector<double> norm_reference(const std::vector<float>& x, const Dims& x_dims, int64_t axis,
                                   const std::vector<float>& scale, const Dims& scale_dims,
                                   const std::vector<float>& bias, const Dims& bias_dims, double epsilon) {
  const int64_t total = ir::element_count(x_dims), rows = ir::element_count(Dims(x_dims.begin(), x_dims.begin() + axis));
  const int64_t length = total / rows;
  std::vector<double> y(static_cast<size_t>(total));
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < length; ++j) mean += x[r * length + j];
    mean /= static_cast<double>(length);
    for (int64_t j = 0; j < length; ++j) var += (x[r * length + j] - mean) * (x[r * length + j] - mean);
    var /= static_cast<double>(length);
    for (int64_t j = 0; j < length; ++j) {
      const int64_t i = r * length + j;
      const Dims index = unravel(i, x_dims);
      double v = (x[i] - mean) / std::sqrt(var + epsilon) * scale[broadcast_index(index, x_dims, scale_dims)];
      if (!bias.empty()) v += bias[broadcast_index(index, x_dims, bias_dims)];
      y[i] = v;
    }
  }
  return y;
}

void expect_near_relative(const std::vector<float>& actual, const std::vector<double>& expected,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i]))) << what << " [" << i << "]";
}

struct ForwardCase {
  std::string what;
  std::string op;
  Dims x, scale;
  std::optional<Dims> bias;
  int64_t axis = -1;      // LayerNormalization
  bool set_axis = false;  // else the default
  float epsilon = 0;      // 0: the default
  size_t outputs = 1;
};

std::vector<ForwardCase> forward_cases() {
  return {
      {"instance 1-D", "InstanceNormalization", {2, 3, 7}, {3}, Dims{3}},
      {"instance 2-D, epsilon", "InstanceNormalization", {3, 4, 5, 3}, {4}, Dims{4}, -1, false, 1e-2f},
      {"instance 3-D", "InstanceNormalization", {2, 2, 3, 4, 2}, {2}, Dims{2}},
      {"layer axis -1", "LayerNormalization", {3, 4, 6}, {6}, Dims{6}},
      {"layer default axis, 2-D", "LayerNormalization", {5, 8}, {8}, Dims{8}, -1, true},
      {"layer, no bias, Mean, InvStdDev", "LayerNormalization", {3, 4, 6}, {6}, std::nullopt, -1, false, 0, 3},
      {"layer axis 1 of 4-D", "LayerNormalization", {2, 3, 4, 5}, {3, 4, 5}, Dims{3, 4, 5}, 1, true, 1e-3f},
      {"layer axis 1, suffix scale and bias", "LayerNormalization", {2, 3, 4, 5}, {4, 5}, Dims{5}, 1, true},
      {"layer axis 1, suffix scale, full bias", "LayerNormalization", {2, 3, 4, 5}, {5}, Dims{3, 4, 5}, 1, true},
      {"layer axis -2, leading 1", "LayerNormalization", {3, 2, 4, 5}, {1, 5}, Dims{1, 5}, -2, true},
      {"layer axis 2, one scale value, no bias", "LayerNormalization", {2, 3, 4, 5}, {1}, std::nullopt, 2, true},
  };
}

// The node of case `c` (NormNode holds its graph: built in place, not returned).
void set_attributes(NormNode& n, const ForwardCase& c) {
  if (c.set_axis) n.with(ir::Attribute::of_int("axis", c.axis));
  if (c.epsilon > 0) n.with(ir::Attribute::of_float("epsilon", c.epsilon));
}

TEST(NormLayer, ForwardIsTheSpecificationsFormula) {
  for (const ForwardCase& c : forward_cases()) {
    NormNode n(c.op, c.bias ? &*c.bias : nullptr, c.outputs);
    set_attributes(n, c);
    const size_t bias_size = c.bias ? static_cast<size_t>(ir::element_count(*c.bias)) : 0;
    auto op = make_layer_op(*n.node, c.scale, bias_size, 2);
    EXPECT_EQ(op->output_dims(c.x), c.x) << c.what;
    ASSERT_EQ(op->weight_size(), static_cast<size_t>(ir::element_count(c.scale))) << c.what;
    ASSERT_EQ(op->bias_size(), bias_size) << c.what;
    std::vector<float> x = random_values(static_cast<size_t>(ir::element_count(c.x)), 100, -1, 1, 7);
    std::vector<float> w = random_values(op->weight_size(), 101, -2, 2);
    std::vector<float> b = random_values(bias_size, 102, -1, 1);
    std::vector<float> y(x.size());
    op->forward(x.data(), c.x, w.data(), b.empty() ? nullptr : b.data(), y.data());
    // InstanceNormalization is the case of axis 2 with scale and B [C, 1, ...].
    const bool instance = c.op == "InstanceNormalization";
    const int64_t rank = static_cast<int64_t>(c.x.size());
    const int64_t axis = instance ? 2 : (c.axis < 0 ? c.axis + rank : c.axis);
    Dims channel(c.x.size() - 1, 1);
    channel[0] = c.x[1];
    const double epsilon = c.epsilon > 0 ? c.epsilon : 1e-5f;
    expect_near_relative(y,
                         norm_reference(x, c.x, axis, w, instance ? channel : c.scale, b,
                                        instance ? channel : c.bias.value_or(Dims{}), epsilon),
                         c.what);
  }
}

// The engine's kernels compute the same nodes (a second, independent reference).
TEST(NormLayer, ForwardMatchesTheEngine) {
  for (const ForwardCase& c : forward_cases()) {
    NormNode n(c.op, c.bias ? &*c.bias : nullptr, c.outputs);
    set_attributes(n, c);
    const size_t bias_size = c.bias ? static_cast<size_t>(ir::element_count(*c.bias)) : 0;
    auto op = make_layer_op(*n.node, c.scale, bias_size, 1);
    std::vector<float> x = random_values(static_cast<size_t>(ir::element_count(c.x)), 200, -1, 1, 5);
    std::vector<float> w = random_values(op->weight_size(), 201, -2, 2);
    std::vector<float> b = random_values(bias_size, 202, -1, 1);
    std::vector<float> y(x.size());
    op->forward(x.data(), c.x, w.data(), b.empty() ? nullptr : b.data(), y.data());
    std::vector<testing::NodeInput> inputs = {{"x", ir::Tensor::from_values<float>(c.x, x)},
                                              {"scale", ir::Tensor::from_values<float>(c.scale, w), true}};
    if (c.bias) inputs.push_back({"B", ir::Tensor::from_values<float>(*c.bias, b), true});
    std::vector<ir::Attribute> attrs;
    for (const ir::Attribute& a : n.node->attributes)
      attrs.push_back(a.type == ir::AttrType::Int ? ir::Attribute::of_int(a.name, a.i)
                                                  : ir::Attribute::of_float(a.name, a.f));
    std::vector<ir::Tensor> engine =
        testing::run_node(c.op, "", c.op == "InstanceNormalization" ? 6 : 17, inputs, std::move(attrs), 1, 1);
    std::span<const float> expected = engine[0].values<float>();
    ASSERT_EQ(expected.size(), y.size()) << c.what;
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], expected[i], 1e-5 * std::max(1.0f, std::abs(expected[i]))) << c.what << " [" << i << "]";
  }
}

// L = sum(dy * y) is linear in the scale and the bias: central differences are exact up to rounding.
void expect_norm_gradients_match(const LayerOp& op, const Dims& x_dims, uint32_t seed, const std::string& what) {
  std::vector<float> x = random_values(static_cast<size_t>(ir::element_count(x_dims)), seed, -1, 1, 6);
  std::vector<float> w = random_values(op.weight_size(), seed + 1, -2, 2), b = random_values(op.bias_size(), seed + 2);
  std::vector<float> dy = random_values(x.size(), seed + 3), y(x.size());
  auto loss = [&](const std::vector<float>& wv, const std::vector<float>& bv) {
    op.forward(x.data(), x_dims, wv.data(), bv.empty() ? nullptr : bv.data(), y.data());
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(dy[i]) * y[i];
    return l;
  };
  std::vector<float> dw(w.size()), db(b.size());
  op.backward(x.data(), x_dims, w.data(), dy.data(), dw.data(), b.empty() ? nullptr : db.data());
  double scale = 0;  // of the gradients: the tolerance is relative to it
  for (float g : dw) scale = std::max(scale, static_cast<double>(std::abs(g)));
  for (float g : db) scale = std::max(scale, static_cast<double>(std::abs(g)));
  const float h = 0.25f;  // exact in float
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<float> up = w, down = w;
    up[i] += h;
    down[i] -= h;
    double numeric = (loss(up, b) - loss(down, b)) / (static_cast<double>(up[i]) - down[i]);
    EXPECT_NEAR(dw[i], numeric, 1e-3 * std::max(1.0, scale)) << what << ": scale[" << i << "]";
  }
  for (size_t i = 0; i < b.size(); ++i) {
    std::vector<float> up = b, down = b;
    up[i] += h;
    down[i] -= h;
    double numeric = (loss(w, up) - loss(w, down)) / (static_cast<double>(up[i]) - down[i]);
    EXPECT_NEAR(db[i], numeric, 1e-3 * std::max(1.0, scale)) << what << ": B[" << i << "]";
  }
}

TEST(NormLayer, GradientsMatchDifferences) {
  uint32_t seed = 300;
  for (const ForwardCase& c : forward_cases()) {
    NormNode n(c.op, c.bias ? &*c.bias : nullptr, c.outputs);
    set_attributes(n, c);
    auto op = make_layer_op(*n.node, c.scale, c.bias ? static_cast<size_t>(ir::element_count(*c.bias)) : 0, 2);
    expect_norm_gradients_match(*op, c.x, seed += 10, c.what);
  }
}

// Only what is wanted is written: a null dw or db is not touched.
TEST(NormLayer, BackwardWritesOnlyWhatIsWanted) {
  const Dims bias_dims = {6}, x_dims = {3, 4, 6};
  NormNode n("LayerNormalization", &bias_dims);
  auto op = make_layer_op(*n.node, {6}, 6, 2);
  std::vector<float> x = random_values(72, 1), w = random_values(6, 2), dy = random_values(72, 3);
  std::vector<float> both_w(6), both_b(6), only_w(6), only_b(6);
  op->backward(x.data(), x_dims, w.data(), dy.data(), both_w.data(), both_b.data());
  op->backward(x.data(), x_dims, w.data(), dy.data(), only_w.data(), nullptr);
  op->backward(x.data(), x_dims, w.data(), dy.data(), nullptr, only_b.data());
  EXPECT_EQ(both_w, only_w);
  EXPECT_EQ(both_b, only_b);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(NormLayer, SameBitsOnAnyThreadCount) {
  struct Case {
    std::string op;
    Dims x, scale, bias;
    int64_t axis;
  };
  // Large enough (2^16 values) for every thread count tried to be used.
  const std::vector<Case> cases = {
      {"InstanceNormalization", {4, 8, 32, 64}, {8}, {8}, 0},
      {"LayerNormalization", {64, 32, 32}, {32}, {32}, -1},
      {"LayerNormalization", {4, 4, 64, 64}, {64, 64}, {64}, 1},
      {"LayerNormalization", {4, 4, 64, 64}, {1}, {1}, 1},
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    std::vector<std::vector<float>> results;
    const std::vector<float> x = random_values(static_cast<size_t>(ir::element_count(c.x)), seed += 10, -1, 1, 11);
    const std::vector<float> w = random_values(static_cast<size_t>(ir::element_count(c.scale)), seed + 1, -2, 2);
    const std::vector<float> b = random_values(static_cast<size_t>(ir::element_count(c.bias)), seed + 2);
    const std::vector<float> dy = random_values(x.size(), seed + 3);
    for (int threads : {1, 2, 3}) {
      NormNode n(c.op, &c.bias);
      if (c.op == "LayerNormalization") n.with(ir::Attribute::of_int("axis", c.axis));
      auto op = make_layer_op(*n.node, c.scale, b.size(), threads);
      std::vector<float> y(x.size()), dw(w.size()), db(b.size());
      op->forward(x.data(), c.x, w.data(), b.data(), y.data());
      op->backward(x.data(), c.x, w.data(), dy.data(), dw.data(), db.data());
      if (results.empty()) {
        results = {y, dw, db};
        continue;
      }
      EXPECT_TRUE(same_bits(results[0], y)) << c.op << " forward, " << threads << " threads";
      EXPECT_TRUE(same_bits(results[1], dw)) << c.op << " dscale, " << threads << " threads";
      EXPECT_TRUE(same_bits(results[2], db)) << c.op << " dB, " << threads << " threads";
    }
  }
}

// The message of the Error `fn` throws names the node; "" when it throws none.
std::string error_naming_norm(const std::function<void()>& fn) {
  std::string message = testing::error_of(fn);
  if (!message.empty()) {
    EXPECT_NE(message.find("'norm'"), std::string::npos) << message;
  }
  return message;
}

TEST(NormLayer, RefusesWhatDoesNotFit) {
  const Dims c3 = {3}, d5 = {5};
  // InstanceNormalization: a scale for other channels, not 1-D, a missing or wrong B, x of rank 2.
  NormNode instance("InstanceNormalization", &c3);
  auto in_op = make_layer_op(*instance.node, {3}, 3, 1);
  EXPECT_NE(error_naming_norm([&] { in_op->output_dims({2, 4, 5}); }).find("channels"), std::string::npos);
  EXPECT_NE(error_naming_norm([&] { in_op->output_dims({2, 3}); }).find("[N, C, D1, ...]"), std::string::npos);
  std::vector<float> x(6), w(3), b(3), y(6);
  EXPECT_NE(error_naming_norm([&] { in_op->forward(x.data(), {2, 3}, w.data(), b.data(), y.data()); }), "");
  EXPECT_NE(error_naming_norm([&] { in_op->backward(x.data(), {2, 3}, w.data(), y.data(), w.data(), b.data()); }), "");
  EXPECT_NE(error_naming_norm([&] {
              make_layer_op(*instance.node, {3, 1}, 3, 1);
            }).find("per channel"),
            std::string::npos);
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*instance.node, {3}, 4, 1); }).find("B holds 4"), std::string::npos);
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*instance.node, {3}, 0, 1); }).find("B holds 0"), std::string::npos);
  NormNode no_bias("InstanceNormalization", nullptr);
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*no_bias.node, {3}, 0, 1); }).find("requires"), std::string::npos);
  NormNode negative("InstanceNormalization", &c3);
  negative.with(ir::Attribute::of_float("epsilon", -1));
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*negative.node, {3}, 3, 1); }).find("epsilon"), std::string::npos);

  // LayerNormalization: a scale or B that is not a suffix of the normalized dims.
  NormNode layer("LayerNormalization", &d5);
  auto wrong_scale = make_layer_op(*layer.node, {4}, 5, 1);
  EXPECT_NE(error_naming_norm([&] {
              wrong_scale->output_dims({2, 3, 5});
            }).find("the scale has dims [4]"),
            std::string::npos);
  auto ok = make_layer_op(*layer.node, {5}, 5, 1);
  EXPECT_EQ(ok->output_dims({2, 3, 5}), (Dims{2, 3, 5}));
  EXPECT_NE(error_naming_norm([&] { ok->output_dims({2, 3, 4}); }), "");
  NormNode axis1("LayerNormalization", &d5);
  axis1.with(ir::Attribute::of_int("axis", 1));
  auto not_suffix = make_layer_op(*axis1.node, {3, 1}, 5, 1);  // broadcasts, but along dim 2 of x
  EXPECT_NE(error_naming_norm([&] { not_suffix->output_dims({2, 3, 5}); }).find("suffix"), std::string::npos);
  auto too_long = make_layer_op(*axis1.node, {1, 1, 5}, 5, 1);  // more dims than the normalized
  EXPECT_NE(error_naming_norm([&] { too_long->output_dims({2, 3, 5}); }).find("suffix"), std::string::npos);
  const Dims b4 = {4};
  NormNode wrong_bias("LayerNormalization", &b4);
  auto wrong_b = make_layer_op(*wrong_bias.node, {5}, 4, 1);
  EXPECT_NE(error_naming_norm([&] { wrong_b->output_dims({2, 3, 5}); }).find("B has dims [4]"), std::string::npos);
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*layer.node, {5}, 3, 1); }).find("3 values"), std::string::npos);
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*layer.node, {5}, 0, 1); }).find("not a constant"),
            std::string::npos);
  NormNode unknown_bias("LayerNormalization", &d5);
  unknown_bias.node->input(2)->type = ir::ValueType{};
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*unknown_bias.node, {5}, 5, 1); }).find("not known"),
            std::string::npos);
  NormNode no_b("LayerNormalization", nullptr);
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*no_b.node, {5}, 5, 1); }).find("no B"), std::string::npos);

  // The batch dim is never normalized: axis 0, or a negative axis reaching it, or x of rank 1.
  NormNode axis0("LayerNormalization", nullptr);
  axis0.with(ir::Attribute::of_int("axis", 0));
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*axis0.node, {5}, 0, 1); }).find("batch"), std::string::npos);
  NormNode axis_m2("LayerNormalization", nullptr);
  axis_m2.with(ir::Attribute::of_int("axis", -2));
  auto m2 = make_layer_op(*axis_m2.node, {5}, 0, 1);
  EXPECT_EQ(m2->output_dims({2, 3, 5}), (Dims{2, 3, 5}));
  EXPECT_NE(error_naming_norm([&] { m2->output_dims({3, 5}); }).find("batch"), std::string::npos);
  NormNode last("LayerNormalization", nullptr);
  auto last_op = make_layer_op(*last.node, {5}, 0, 1);
  EXPECT_NE(error_naming_norm([&] { last_op->output_dims({5}); }).find("batch"), std::string::npos);
  EXPECT_NE(error_naming_norm([&] { last_op->output_dims({}); }).find("out of range"), std::string::npos);
  NormNode axis_far("LayerNormalization", nullptr);
  axis_far.with(ir::Attribute::of_int("axis", 3));
  auto far = make_layer_op(*axis_far.node, {5}, 0, 1);
  EXPECT_NE(error_naming_norm([&] { far->output_dims({2, 3, 5}); }).find("out of range"), std::string::npos);

  // Attributes it does not compute.
  NormNode stash("LayerNormalization", nullptr);
  stash.with(ir::Attribute::of_int("stash_type", 0));
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*stash.node, {5}, 0, 1); }).find("stash_type"), std::string::npos);
  NormNode typed("LayerNormalization", nullptr);
  typed.with(ir::Attribute::of_float("axis", 1.0f));
  EXPECT_NE(error_naming_norm([&] { make_layer_op(*typed.node, {5}, 0, 1); }).find("axis"), std::string::npos);
}

}  // namespace
}  // namespace onnxptq::finetune
