// The layer trainer of fast finetune: AdaRound's formulas against their closed forms, the Gemm /
// MatMul layer and the activations against finite differences, and training one built layer:
// AdaRound's rounding must beat rounding to nearest, AdaQuant's weights AdaRound's.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "finetune/activation.h"
#include "finetune/layer_op.h"
#include "finetune/layer_trainer.h"
#include "finetune/rounding.h"
#include "ir/float16.h"
#include "ir/graph.h"
#include "onnxptq/error.h"
#include "support/finetune_support.h"
#include "support/one_node.h"

namespace onnxptq::finetune {
namespace {

using testing::random_values;

// `values` as one sample each.
SharedStore store_of(const std::vector<ir::Tensor>& values) {
  auto store = std::make_shared<SampleStore>(values.size());
  for (size_t i = 0; i < values.size(); ++i) store->set(i, values[i]);
  return store;
}

// A graph holding one node of `op` with inputs x, w (and b), and attributes set by `with`.
struct OneNode {
  OneNode(const std::string& op, bool with_bias) {
    std::vector<ir::Value*> in = {graph.add_value("x"), graph.add_value("w")};
    if (with_bias) in.push_back(graph.add_value("b"));
    node = graph.add_node(op, in, {graph.add_value("y")}, "layer");
  }
  OneNode& with(ir::Attribute a) {
    node->set_attribute(std::move(a));
    return *this;
  }
  ir::Graph graph;
  ir::Node* node = nullptr;
};

TEST(AdaRoundFormulas, MatchTheirClosedForms) {
  // h(alpha) starts at the weight's fractional part.
  for (double f : {0.0, 0.1, 0.25, 0.5, 0.75, 0.999}) EXPECT_NEAR(rectified_sigmoid(initial_alpha(f)), f, 1e-12) << f;
  EXPECT_EQ(rectified_sigmoid(50.0), 1.0);
  EXPECT_EQ(rectified_sigmoid(-50.0), 0.0);
  EXPECT_EQ(rectified_sigmoid_gradient(50.0), 0.0);  // clamped: no gradient
  for (double a : {-2.0, -0.3, 0.0, 0.7, 2.0}) {
    double h = 1e-6;
    double numeric = (rectified_sigmoid(a + h) - rectified_sigmoid(a - h)) / (2 * h);
    EXPECT_NEAR(rectified_sigmoid_gradient(a), numeric, 1e-7) << a;
  }
  // beta: beta_start until the warm start ends, beta_end at the last iteration, the mean halfway.
  EXPECT_DOUBLE_EQ(annealed_beta(0, 1000, 0.2, 20, 2), 20);
  EXPECT_DOUBLE_EQ(annealed_beta(200, 1000, 0.2, 20, 2), 20);
  EXPECT_NEAR(annealed_beta(600, 1000, 0.2, 20, 2), 11, 1e-12);
  EXPECT_NEAR(annealed_beta(1000, 1000, 0.2, 20, 2), 2, 1e-12);
  // 1 - |2h - 1|^beta: 1 at one half, 0 at 0 and 1; its derivative against a difference.
  EXPECT_DOUBLE_EQ(rounding_regularizer(0.5, 20.0), 1);
  EXPECT_DOUBLE_EQ(rounding_regularizer(0.0, 2.0), 0);
  EXPECT_DOUBLE_EQ(rounding_regularizer(1.0, 2.0), 0);
  for (double h : {0.1, 0.4, 0.6, 0.9}) {
    double d = 1e-7;
    double numeric = (rounding_regularizer(h + d, 3.0) - rounding_regularizer(h - d, 3.0)) / (2 * d);
    EXPECT_NEAR(rounding_regularizer_gradient(h, 3.0), numeric, 1e-5) << h;
  }
}

TEST(AdaRoundFormulas, FloatFormsMatchTheDoubleOnes) {
  // The trainer's float forms (vectorisable exp and log) against the double ones.
  for (double alpha = -12; alpha <= 12; alpha += 0.01) {
    SoftRounding<double> d = soft_rounding(alpha);
    SoftRounding<float> f = soft_rounding(static_cast<float>(alpha));
    EXPECT_NEAR(f.h, d.h, 3e-7) << alpha;
    EXPECT_NEAR(f.gradient, d.gradient, 3e-7) << alpha;
  }
  for (double beta : {1.0, 2.0, 3.7, 11.0, 20.0}) {
    for (double h = 0; h <= 1; h += 1.0 / 1024) {
      Regularizer<double> d = rounding_regularizer_terms(h, beta);
      Regularizer<float> f = rounding_regularizer_terms(static_cast<float>(h), static_cast<float>(beta));
      EXPECT_NEAR(f.value, d.value, 2e-6) << h << " " << beta;
      EXPECT_NEAR(f.gradient, d.gradient, 2e-6 * std::max(1.0, std::abs(d.gradient))) << h << " " << beta;
    }
  }
}

// L = sum(dy * y) is linear in w and b: central differences are exact up to rounding.
void expect_gradients_match(const LayerOp& op, const std::vector<int64_t>& x_dims, uint32_t seed) {
  const int64_t xn = ir::element_count(x_dims);
  std::vector<float> x = random_values(static_cast<size_t>(xn), seed);
  std::vector<float> w = random_values(op.weight_size(), seed + 1), b = random_values(op.bias_size(), seed + 2);
  std::vector<int64_t> y_dims = op.output_dims(x_dims);
  const int64_t yn = ir::element_count(y_dims);
  std::vector<float> dy = random_values(static_cast<size_t>(yn), seed + 3), y(static_cast<size_t>(yn));
  auto loss = [&](const std::vector<float>& wv, const std::vector<float>& bv) {
    op.forward(x.data(), x_dims, wv.data(), bv.empty() ? nullptr : bv.data(), y.data());
    double l = 0;
    for (int64_t i = 0; i < yn; ++i) l += static_cast<double>(dy[i]) * y[i];
    return l;
  };
  std::vector<float> dw(w.size()), db(b.size());
  op.backward(x.data(), x_dims, w.data(), dy.data(), dw.data(), b.empty() ? nullptr : db.data());
  const float h = 0.25f;  // exact in float: w +- h changes no other bit than needed
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<float> up = w, down = w;
    up[i] += h;
    down[i] -= h;
    double numeric = (loss(up, b) - loss(down, b)) / (static_cast<double>(up[i]) - down[i]);
    EXPECT_NEAR(dw[i], numeric, 1e-3 * (1 + std::abs(numeric))) << "w[" << i << "]";
  }
  for (size_t i = 0; i < b.size(); ++i) {
    std::vector<float> up = b, down = b;
    up[i] += h;
    down[i] -= h;
    double numeric = (loss(w, up) - loss(w, down)) / (static_cast<double>(up[i]) - down[i]);
    EXPECT_NEAR(db[i], numeric, 1e-3 * (1 + std::abs(numeric))) << "b[" << i << "]";
  }
}

TEST(LinearLayer, GemmAndMatMulGradientsMatchDifferences) {
  OneNode gemm("Gemm", true);
  gemm.with(ir::Attribute::of_int("transB", 1)).with(ir::Attribute::of_float("alpha", 0.5f));
  gemm.with(ir::Attribute::of_float("beta", 2.0f));
  auto op = make_layer_op(*gemm.node, {5, 7}, 5, 1);  // B [N=5, K=7]
  EXPECT_EQ(op->output_dims({3, 7}), (std::vector<int64_t>{3, 5}));
  expect_gradients_match(*op, {3, 7}, 10);
  OneNode plain("Gemm", true);
  expect_gradients_match(*make_layer_op(*plain.node, {7, 4}, 1, 2), {6, 7}, 20);  // scalar C
  OneNode matmul("MatMul", false);
  auto mm = make_layer_op(*matmul.node, {4, 3}, 0, 2);
  EXPECT_EQ(mm->output_dims({2, 5, 4}), (std::vector<int64_t>{2, 5, 3}));
  expect_gradients_match(*mm, {2, 5, 4}, 30);
}

TEST(LinearLayer, ForwardIsTheProduct) {
  OneNode gemm("Gemm", true);
  gemm.with(ir::Attribute::of_int("transB", 1));
  auto op = make_layer_op(*gemm.node, {2, 3}, 2, 1);
  std::vector<float> x = {1, 2, 3, -1, 0, 1}, w = {1, 0, 2, 0.5f, 1, -1}, b = {10, 20}, y(4);
  op->forward(x.data(), {2, 3}, w.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{1 + 6 + 10, 0.5f + 2 - 3 + 20, -1 + 2 + 10, -0.5f - 1 + 20}));
}

TEST(LinearLayer, RefusesWhatItCannotTrain) {
  OneNode trans_a("Gemm", false);
  trans_a.with(ir::Attribute::of_int("transA", 1));
  EXPECT_THROW(make_layer_op(*trans_a.node, {3, 3}, 0, 1), Error);
  OneNode gemm("Gemm", true);
  EXPECT_THROW(make_layer_op(*gemm.node, {3, 4}, 3, 1), Error);  // a bias of 3 for 4 columns
  auto op = make_layer_op(*gemm.node, {3, 4}, 4, 1);
  EXPECT_THROW(op->output_dims({2, 5}), Error);
  EXPECT_THROW(op->output_dims({2, 2, 3}), Error);
  OneNode relu("Relu", false);
  EXPECT_THROW(make_layer_op(*relu.node, {1}, 0, 1), Error);
}

// Conv and ConvTranspose cases: the forward pass against the engine's kernels (oneDNN, checked
// against ONNX Runtime elsewhere), the gradients against differences.
struct ConvLayerCase {
  std::string op;
  std::vector<int64_t> x, w;
  bool bias;
  std::function<std::vector<ir::Attribute>()> attrs;
};

std::vector<ConvLayerCase> conv_cases() {
  using A = ir::Attribute;
  return {
      {"Conv", {2, 3, 7, 6}, {4, 3, 3, 3}, true, [] { return std::vector<A>{}; }},
      {"Conv",
       {2, 4, 9, 8},
       {6, 2, 3, 2},
       false,
       [] {
         std::vector<A> a;
         a.push_back(A::of_int("group", 2));
         a.push_back(A::of_ints("strides", {2, 1}));
         a.push_back(A::of_ints("dilations", {1, 2}));
         a.push_back(A::of_ints("pads", {1, 0, 2, 1}));
         return a;
       }},
      {"Conv",
       {2, 4, 6, 6},
       {4, 1, 3, 3},
       true,
       [] {  // depthwise, SAME_UPPER
         std::vector<A> a;
         a.push_back(A::of_int("group", 4));
         a.push_back(A::of_string("auto_pad", "SAME_UPPER"));
         a.push_back(A::of_ints("strides", {2, 2}));
         return a;
       }},
      {"Conv",
       {1, 2, 7, 5},
       {3, 2, 2, 3},
       true,
       [] {
         std::vector<A> a;
         a.push_back(A::of_string("auto_pad", "SAME_LOWER"));
         return a;
       }},
      {"Conv",
       {3, 2, 11},
       {4, 2, 3},
       true,
       [] {  // 1-D
         std::vector<A> a;
         a.push_back(A::of_ints("pads", {1, 1}));
         return a;
       }},
      {"Conv", {2, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, true, [] { return std::vector<A>{}; }},  // 3-D
      {"ConvTranspose",
       {2, 4, 4, 3},
       {4, 3, 3, 3},
       true,
       [] {
         std::vector<A> a;
         a.push_back(A::of_ints("strides", {2, 2}));
         a.push_back(A::of_ints("pads", {1, 0, 0, 1}));
         a.push_back(A::of_ints("output_padding", {1, 1}));
         return a;
       }},
      {"ConvTranspose",
       {2, 4, 3, 3},
       {4, 2, 2, 2},
       false,
       [] {
         std::vector<A> a;
         a.push_back(A::of_int("group", 2));
         a.push_back(A::of_ints("strides", {2, 2}));
         a.push_back(A::of_ints("output_shape", {5, 6}));
         return a;
       }},
  };
}

TEST(ConvLayer, ForwardIsTheEnginesConvolution) {
  for (const ConvLayerCase& c : conv_cases()) {
    SCOPED_TRACE(c.op + " x " + ir::dims_to_string(c.x) + " w " + ir::dims_to_string(c.w));
    OneNode node(c.op, c.bias);
    for (ir::Attribute& a : c.attrs()) node.with(std::move(a));
    const int64_t out_channels = c.op == "Conv" ? c.w[0] : c.w[1] * node.node->attr_int("group", 1);
    auto op = make_layer_op(*node.node, c.w, c.bias ? static_cast<size_t>(out_channels) : 0, 2);
    const int64_t xn = ir::element_count(c.x), wn = ir::element_count(c.w);
    std::vector<float> x = random_values(static_cast<size_t>(xn), 1), w = random_values(static_cast<size_t>(wn), 2);
    std::vector<float> b = random_values(c.bias ? static_cast<size_t>(out_channels) : 0, 3);
    std::vector<testing::NodeInput> inputs = {{"x", ir::Tensor::from_values<float>(c.x, x)},
                                              {"w", ir::Tensor::from_values<float>(c.w, w), true}};
    if (c.bias) inputs.push_back({"b", ir::Tensor::from_values<float>({out_channels}, b), true});
    ir::Tensor want = testing::run_node(c.op, "", 13, inputs, c.attrs())[0];
    ASSERT_EQ(op->output_dims(c.x), want.dims());
    std::vector<float> y(want.values<float>().size());
    op->forward(x.data(), c.x, w.data(), c.bias ? b.data() : nullptr, y.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want.values<float>()[i], 1e-4) << i;
    expect_gradients_match(*op, c.x, 40);
  }
}

TEST(ConvLayer, RefusesWhatDoesNotFit) {
  OneNode conv("Conv", true);
  EXPECT_THROW(make_layer_op(*conv.node, {4, 3, 3, 3}, 5, 1), Error);  // a bias of 5 for 4 channels
  EXPECT_THROW(make_layer_op(*conv.node, {4, 3}, 0, 1), Error);        // no spatial dims
  auto op = make_layer_op(*conv.node, {4, 3, 3, 3}, 4, 1);
  EXPECT_THROW(op->output_dims({1, 2, 8, 8}), Error);  // 2 channels for a weight of 3
  EXPECT_THROW(op->output_dims({1, 3, 8}), Error);     // rank
  EXPECT_THROW(op->output_dims({1, 3, 2, 2}), Error);  // smaller than the kernel
  OneNode grouped("Conv", false);
  grouped.with(ir::Attribute::of_int("group", 3));
  EXPECT_THROW(make_layer_op(*grouped.node, {4, 1, 3, 3}, 0, 1), Error);  // 4 outputs in 3 groups
}

// Every kind of activation, on y of dims [2, 3, ...]: Clip to [-1, 1], PRelu with one slope per
// channel, Softmax along dim 1.
std::vector<Activation> every_activation() {
  using K = Activation::Kind;
  std::vector<Activation> all;
  for (K kind :
       {K::None, K::Relu, K::PRelu, K::LeakyRelu, K::Gelu, K::GeluTanh, K::Tanh, K::Clip, K::Sigmoid, K::Softmax}) {
    Activation act;
    act.kind = kind;
    act.min = -1;
    act.max = 1;
    act.slope = {0.1f, 0.2f, 0.3f};
    act.axis = 1;
    all.push_back(act);
  }
  return all;
}

TEST(Activation, GradientsMatchDifferences) {
  std::vector<int64_t> dims = {2, 3, 4};
  std::vector<float> y = random_values(24, 5, -3, 3);
  for (float& v : y)
    if (std::abs(v) < 0.05f || std::abs(std::abs(v) - 1) < 0.05f) v += 0.2f;  // away from kinks
  std::vector<float> da = random_values(24, 6);
  for (Activation act : every_activation()) {
    const Activation::Kind kind = act.kind;
    std::vector<float> a(24), dy(24);
    activation_forward(act, dims, y.data(), a.data());
    activation_backward(act, dims, y.data(), a.data(), da.data(), dy.data());
    for (size_t i = 0; i < y.size(); ++i) {
      const double h = 1e-3;
      std::vector<float> up = y, down = y, au(24), ad(24);
      up[i] += static_cast<float>(h);
      down[i] -= static_cast<float>(h);
      activation_forward(act, dims, up.data(), au.data());
      activation_forward(act, dims, down.data(), ad.data());
      double numeric = 0;
      for (size_t j = 0; j < 24; ++j) numeric += da[j] * (static_cast<double>(au[j]) - ad[j]);
      numeric /= static_cast<double>(up[i]) - down[i];
      EXPECT_NEAR(dy[i], numeric, 2e-3) << static_cast<int>(kind) << " at " << i;
    }
  }
}

TEST(Activation, ErrorAndItsGradientInOnePassMatchForwardAndBackward) {
  // Large enough for several chunks and threads; the sum must not depend on the thread count.
  std::vector<int64_t> dims = {2, 3, 9000};
  const size_t n = 54000;
  std::vector<float> y = random_values(n, 7, -3, 3), target = random_values(n, 8, -2, 2);
  for (Activation act : every_activation()) {
    const Activation::Kind kind = act.kind;
    for (bool output_qdq : {false, true}) {
      // OutputQDQ: int8 steps of 1/16 after the activation; values outside [-8, 7.9375] clamp.
      if (output_qdq) act.output = OutputQuant{0.0625f, 0, -128, 127};
      std::vector<float> a(n), d(n), want_dy(n), dy(n);
      activation_forward(act, dims, y.data(), a.data());
      double want = 0;
      for (size_t i = 0; i < n; ++i) {
        float out = a[i], pass = 1;
        if (output_qdq) {
          float level = std::nearbyint(a[i] / 0.0625f);
          pass = level >= -128 && level <= 127 ? 1.0f : 0.0f;
          out = std::clamp(level, -128.0f, 127.0f) * 0.0625f;
        }
        double diff = static_cast<double>(out) - target[i];
        want += diff * diff;
        d[i] = 0.5f * static_cast<float>(diff) * pass;
      }
      activation_backward(act, dims, y.data(), a.data(), d.data(), want_dy.data());
      const double got = activation_error(act, dims, y.data(), target.data(), 0.5f, dy.data(), 2);
      // Each difference is taken in float: at most 2^-24 relative off, its square 2^-23.
      EXPECT_NEAR(got, want, 0x1p-23 * want) << static_cast<int>(kind) << " " << output_qdq;
      EXPECT_EQ(activation_error(act, dims, y.data(), target.data(), 0.5f, nullptr, 1), got) << static_cast<int>(kind);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(dy[i], want_dy[i], 1e-6f) << static_cast<int>(kind) << " " << output_qdq << " at " << i;
    }
  }
}

// A Gemm layer whose weight is quantized per tensor with `weight_scale` on `range` (by default a
// coarse 4-bit grid, so rounding matters), its inputs as a quantized model gives them (the float
// ones quantized with `input_step`, or plus noise), its targets the float layer's outputs after a
// Relu.
struct CoarseLayer {
  explicit CoarseLayer(float weight_scale = 0.125f, qmath::QRange range = {-8, 7}, float input_step = 0)
      : node("Gemm", true) {
    node.with(ir::Attribute::of_int("transB", 1));
    op = make_layer_op(*node.node, {8, 16}, 8, 1);
    weight = random_values(8 * 16, 7);
    bias = random_values(8, 8, -0.1f, 0.1f);
    quant.scale = {weight_scale};
    quant.zero_point = {0};
    quant.range = range;
    activation.kind = Activation::Kind::Relu;
    std::mt19937 rng(9);
    std::normal_distribution<float> noise(0.0f, 0.02f);
    for (int s = 0; s < 32; ++s) {
      std::vector<float> x = random_values(4 * 16, 100 + s);
      ir::Tensor f = ir::Tensor::from_values<float>({4, 16}, x);
      for (float& v : x) v = input_step > 0 ? std::nearbyint(v / input_step) * input_step : v + noise(rng);
      ir::Tensor q = ir::Tensor::from_values<float>({4, 16}, x);
      std::vector<float> y(4 * 8);
      op->forward(f.values<float>().data(), {4, 16}, weight.data(), bias.data(), y.data());
      activation_forward(activation, {4, 8}, y.data(), y.data());
      float_inputs.push_back(f);
      quantized_inputs.push_back(q);
      float_outputs.push_back(ir::Tensor::from_values<float>({4, 8}, y));
    }
    samples = {store_of(quantized_inputs), store_of(float_inputs), store_of(float_outputs)};
  }
  std::vector<float> dequantized(const std::vector<int64_t>& q) const {
    std::vector<float> w;
    for (int64_t v : q) w.push_back(static_cast<float>(v) * quant.scale[0]);
    return w;
  }
  OneNode node;
  std::unique_ptr<LayerOp> op;
  std::vector<float> weight, bias;
  WeightQuant quant;
  Activation activation;
  std::vector<ir::Tensor> quantized_inputs, float_inputs, float_outputs;
  LayerSamples samples;
};

// int8 weights (scale 1/64) and inputs quantized with a step of 0.1: AdaRound can only pick up
// or down, AdaQuant moves the weights by several steps to make up for the inputs' error.
TEST(LayerTrainer, AdaRoundBeatsNearestAndAdaQuantBeatsAdaRound) {
  const float scale = 1.0f / 64;
  CoarseLayer layer(scale, {-128, 127}, 0.1f);
  TrainOptions o;
  o.algorithm = Algorithm::AdaRound;
  o.iterations = 1000;
  o.learning_rate = 0.1;
  o.batch_size = 4;
  LayerResult round =
      train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, layer.samples, o);
  // The loss before is the one of the weight rounded to nearest, computed independently.
  std::vector<int64_t> nearest;
  for (float w : layer.weight) nearest.push_back(std::clamp<int64_t>(std::lrint(w / scale), -128, 127));
  EXPECT_DOUBLE_EQ(round.loss_before, reconstruction_loss(*layer.op, layer.activation, layer.dequantized(nearest),
                                                          layer.bias, layer.samples));
  EXPECT_TRUE(round.improved);
  EXPECT_LT(round.loss_after, 0.95 * round.loss_before);
  // AdaRound only chooses up or down from floor(w / s).
  for (size_t i = 0; i < nearest.size(); ++i) {
    auto floor_q = static_cast<int64_t>(std::floor(layer.weight[i] / scale));
    EXPECT_TRUE(round.quantized_weight[i] == floor_q || round.quantized_weight[i] == floor_q + 1) << i;
  }
  EXPECT_DOUBLE_EQ(round.loss_after,
                   reconstruction_loss(*layer.op, layer.activation, layer.dequantized(round.quantized_weight),
                                       layer.bias, layer.samples));
  o.algorithm = Algorithm::AdaQuant;
  o.learning_rate = 1e-4;
  o.update_bias = true;
  LayerResult quant =
      train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, layer.samples, o);
  EXPECT_TRUE(quant.improved);
  EXPECT_LT(quant.loss_after, 0.95 * round.loss_after);
  EXPECT_NE(quant.bias, layer.bias);
  EXPECT_DOUBLE_EQ(quant.loss_after,
                   reconstruction_loss(*layer.op, layer.activation, layer.dequantized(quant.quantized_weight),
                                       quant.bias, layer.samples));
}

TEST(LayerTrainer, SameSeedSameResultAndEarlyStop) {
  CoarseLayer layer;
  TrainOptions o;
  o.iterations = 300;
  o.batch_size = 2;
  o.drop_ratio = 0.5;
  LayerResult a =
      train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, layer.samples, o);
  LayerResult b =
      train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, layer.samples, o);
  EXPECT_EQ(a.quantized_weight, b.quantized_weight);
  EXPECT_EQ(a.loss_after, b.loss_after);
  EXPECT_EQ(a.iterations_run, 300);
  o.early_stop = true;
  o.algorithm = Algorithm::AdaQuant;
  o.learning_rate = 1e-5;  // too small to gain: the windows stop improving
  o.window = 10;
  LayerResult stopped =
      train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, layer.samples, o);
  EXPECT_LT(stopped.iterations_run, 300);
}

// A bfloat16 weight, per channel with scales that are not powers of two (so each value's channel
// matters): AdaQuant trains the float weight through the cast (straight through) and lowers the
// loss; the losses are those of the weights cast channel by channel here; AdaRound is refused.
TEST(LayerTrainer, AdaQuantTrainsAFloatWeightThroughTheCast) {
  CoarseLayer layer(0.125f, {-8, 7}, 0.1f);
  WeightQuant cast;
  for (int c = 0; c < 8; ++c) {
    cast.scale.push_back(0.3f + 0.1f * static_cast<float>(c));
    cast.zero_point.push_back(0);
  }
  cast.axis = 0;
  auto bf16 = [&](const float* x, size_t n, size_t c, float* y) {
    for (size_t i = 0; i < n; ++i)
      y[i] = ir::bfloat16_to_float(ir::float_to_bfloat16(x[i] / cast.scale[c])) * cast.scale[c];
  };
  cast.float_cast = bf16;
  auto cast_all = [&](const std::vector<float>& w) {
    std::vector<float> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) bf16(&w[i], 1, i / 16, &out[i]);  // [8, 16]: channel = row
    return out;
  };
  TrainOptions o;
  o.algorithm = Algorithm::AdaQuant;
  o.iterations = 500;
  o.learning_rate = 1e-3;
  o.batch_size = 4;
  o.threads = 2;
  LayerResult r = train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, cast, layer.samples, o);
  EXPECT_TRUE(r.quantized_weight.empty());
  ASSERT_EQ(r.float_weight.size(), layer.weight.size());
  EXPECT_DOUBLE_EQ(r.loss_before,
                   reconstruction_loss(*layer.op, layer.activation, cast_all(layer.weight), layer.bias, layer.samples));
  EXPECT_TRUE(r.improved);
  EXPECT_LT(r.loss_after, 0.95 * r.loss_before);
  EXPECT_DOUBLE_EQ(r.loss_after, reconstruction_loss(*layer.op, layer.activation, cast_all(r.float_weight), layer.bias,
                                                     layer.samples));
  o.algorithm = Algorithm::AdaRound;
  EXPECT_THROW(train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, cast, layer.samples, o),
               Error);
}

TEST(LayerTrainer, RefusesSamplesThatDoNotFit) {
  CoarseLayer layer;
  TrainOptions o;
  o.iterations = 1;
  LayerSamples wrong = layer.samples;
  std::vector<ir::Tensor> outputs = layer.float_outputs;
  outputs.pop_back();
  wrong.float_outputs = store_of(outputs);
  EXPECT_THROW(train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, wrong, o),
               Error);
  outputs = layer.float_outputs;
  outputs[0] = ir::Tensor::from_values<float>({4, 7}, std::vector<float>(28));
  wrong.float_outputs = store_of(outputs);
  EXPECT_THROW(train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, layer.quant, wrong, o),
               Error);
  WeightQuant per_channel = layer.quant;
  per_channel.scale = {0.1f, 0.2f, 0.3f};
  per_channel.zero_point = {0, 0, 0};
  EXPECT_THROW(
      train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, layer.bias, per_channel, layer.samples, o),
      Error);
  EXPECT_THROW(train_layer(*layer.op, layer.activation, layer.weight, {8, 16}, {}, layer.quant, layer.samples, o),
               Error);
}

}  // namespace
}  // namespace onnxptq::finetune
