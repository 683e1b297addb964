// Bias correction (Quark's BiasCorrection): the layer-level shift leaves no mean error in any
// output channel, computed here from the definition; in quantize_static it corrects the Conv
// biases of integer and block-format plans and the constant of the Add after a MatMul, the
// written model carries them, and it lowers the mean error of the output on samples it was not
// measured on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "finetune/fast_finetune.h"
#include "finetune/layer_op.h"
#include "finetune/layer_trainer.h"
#include "onnxptq/error.h"
#include "quant/config_keys.h"
#include "quant/export.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/finetune_support.h"
#include "support/model_run.h"
#include "support/pass_check.h"

namespace onnxptq::finetune {
namespace {

// `count` seeded inputs of `dims`, uniform in [lo, hi): a mean away from zero, so that a
// weight's rounding error shifts the output's mean.
std::vector<ir::Tensor> inputs(size_t count, const std::vector<int64_t>& dims, uint32_t seed, float lo = 0,
                               float hi = 2) {
  const auto n = static_cast<size_t>(ir::element_count(dims));
  const std::vector<float> values = testing::random_values(count * n, seed, lo, hi);
  std::vector<ir::Tensor> out;
  for (size_t i = 0; i < count; ++i)
    out.push_back(ir::Tensor::from_values<float>(
        dims, std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(i * n),
                                 values.begin() + static_cast<std::ptrdiff_t>((i + 1) * n))));
  return out;
}

// The samples `x` as a reader of the input "x".
testing::FeedListReader feeds_of(const std::vector<ir::Tensor>& x) {
  std::vector<Feed> feeds;
  for (const ir::Tensor& t : x) feeds.push_back({{"x", t}});
  return testing::FeedListReader(std::move(feeds));
}

// A Conv of 4 output channels, 3x3 over 3 input channels, padded.
struct ConvLayer {
  ConvLayer() {
    ir::Graph& g = *model.graph;
    ir::Value* x = testing::add_float_value(g, "x", {1, 3, 6, 6});
    ir::Value* w = testing::add_random_initializer(g, "w", {4, 3, 3, 3}, 7);
    ir::Value* b = testing::add_random_initializer(g, "b", {4}, 8);
    node = g.add_node("Conv", {x, w, b}, {g.add_value("y")}, "conv");
    node->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
    op = make_layer_op(*node, {4, 3, 3, 3}, 4, 1);
    weight = testing::random_values(108, 7);
    bias = testing::random_values(4, 8);
  }
  // The layer's samples: `x` as the quantized input, the float weight's outputs as the targets.
  LayerSamples samples(const std::vector<ir::Tensor>& x, const Activation& act) const {
    LayerSamples s;
    s.quantized_inputs = std::make_shared<SampleStore>(x.size());
    s.float_outputs = std::make_shared<SampleStore>(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      s.quantized_inputs->set(i, x[i]);
      ir::Tensor y = ir::Tensor::uninitialized(ir::DataType::Float, op->output_dims(x[i].dims()));
      op->forward(x[i].values<float>().data(), x[i].dims(), weight.data(), bias.data(),
                  y.mutable_values<float>().data());
      activation_forward(act, y.dims(), y.values<float>().data(), y.mutable_values<float>().data());
      s.float_outputs->set(i, y);
    }
    return s;
  }
  ir::Model model;
  ir::Node* node = nullptr;
  std::unique_ptr<LayerOp> op;
  std::vector<float> weight, bias;
};

// Per output channel, the mean of target - y over the samples, y from `w` (already rounded)
// and `b`: the mean error bias correction removes.
std::vector<double> channel_mean_errors(const ConvLayer& l, const std::vector<ir::Tensor>& x, const LayerSamples& s,
                                        const std::vector<float>& w, const std::vector<float>& b) {
  std::vector<double> sums(4, 0.0);
  double per_channel = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<float> y(static_cast<size_t>(ir::element_count(l.op->output_dims(x[i].dims()))));
    l.op->forward(x[i].values<float>().data(), x[i].dims(), w.data(), b.data(), y.data());
    const ir::Tensor t = s.float_outputs->get(i);
    const size_t inner = y.size() / 4;
    for (size_t k = 0; k < y.size(); ++k) sums[k / inner] += t.values<float>()[k] - y[k];
    per_channel += static_cast<double>(inner);
  }
  for (double& v : sums) v /= per_channel;
  return sums;
}

TEST(CorrectBias, LeavesNoMeanErrorInAnyChannelOfALinearLayer) {
  ConvLayer l;
  const std::vector<ir::Tensor> x = inputs(8, {1, 3, 6, 6}, 11);
  const LayerSamples s = l.samples(x, {});
  WeightQuant q;
  q.scale = {0.25f};  // coarse: the rounding shifts each channel's mean
  q.zero_point = {0};
  q.range = {-128, 127};
  std::vector<float> rounded(l.weight.size());
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = std::nearbyint(l.weight[i] / 0.25f) * 0.25f;

  const std::vector<double> before = channel_mean_errors(l, x, s, rounded, l.bias);
  double largest = 0;
  for (double e : before) largest = std::max(largest, std::abs(e));
  ASSERT_GT(largest, 0.02);  // there is a shift to correct

  LayerResult r = correct_bias(*l.op, {}, l.weight, {4, 3, 3, 3}, l.bias, q, s, kBiasCorrectionSteps, 1);
  EXPECT_TRUE(r.improved);
  EXPECT_LT(r.loss_after, r.loss_before);
  for (size_t i = 0; i < rounded.size(); ++i)
    EXPECT_EQ(static_cast<float>(r.quantized_weight[i]) * 0.25f, rounded[i]) << i;  // the weight rounded to nearest
  for (double e : channel_mean_errors(l, x, s, rounded, r.bias)) EXPECT_LT(std::abs(e), 1e-5);
}

TEST(CorrectBias, BehindAReluLowersTheLossAndRefusesALayerWithoutBias) {
  ConvLayer l;
  const std::vector<ir::Tensor> x = inputs(8, {1, 3, 6, 6}, 12, -1, 2);
  Activation relu;
  relu.kind = Activation::Kind::Relu;
  const LayerSamples s = l.samples(x, relu);
  WeightQuant q;
  q.scale = {0.25f};
  q.zero_point = {0};
  q.range = {-128, 127};
  LayerResult r = correct_bias(*l.op, relu, l.weight, {4, 3, 3, 3}, l.bias, q, s, kBiasCorrectionSteps, 1);
  EXPECT_TRUE(r.improved);
  EXPECT_LT(r.loss_after, 0.9 * r.loss_before);
  EXPECT_NE(r.bias, l.bias);

  auto without_bias = make_layer_op(*l.node, {4, 3, 3, 3}, 0, 1);
  EXPECT_THROW(correct_bias(*without_bias, {}, l.weight, {4, 3, 3, 3}, {}, q, s, 1, 1), Error);
}

// x[1,3,8,8] -> conv1 (3x3, bias) -> a -> Relu -> r -> conv2 (1x1, bias) -> y.
ir::Model two_convs() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {1, 3, 8, 8});
  g.add_input(x);
  ir::Node* c1 = g.add_node("Conv",
                            {x, testing::add_random_initializer(g, "w1", {8, 3, 3, 3}, 21),
                             testing::add_random_initializer(g, "b1", {8}, 22)},
                            {g.add_value("a")}, "conv1");
  c1->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("Relu", {g.find_value("a")}, {g.add_value("r")}, "relu");
  g.add_node("Conv",
             {g.find_value("r"), testing::add_random_initializer(g, "w2", {4, 8, 1, 1}, 23),
              testing::add_random_initializer(g, "b2", {4}, 24)},
             {g.add_value("y")}, "conv2");
  g.add_output(g.find_value("y"));
  return m;
}

// The sum over the output's 4 channels (dim 1, or the last dim with `channels_last`) of the
// squared mean error (float output - simulated) on `x`.
double mean_error(const ir::Model& model, const quant::Plan& plan, const quant::QuantConfig& c,
                  const std::vector<ir::Tensor>& x, bool channels_last = false) {
  quant::Simulation simulation(model, plan, c, 1);
  engine::Session float_model(model);
  std::vector<double> sums(4, 0.0);
  size_t per_channel = 0;
  for (const ir::Tensor& t : x) {
    const Feed f{{"x", t}};
    ir::Tensor q = simulation.run(f)[0], r = float_model.run(f)[0];
    const size_t inner = q.values<float>().size() / 4;
    for (size_t k = 0; k < q.values<float>().size(); ++k)
      sums[channels_last ? k % 4 : k / inner] += r.values<float>()[k] - q.values<float>()[k];
    per_channel += inner;
  }
  double squares = 0;
  for (double s : sums) {
    const double mean = s / static_cast<double>(per_channel);
    squares += mean * mean;
  }
  return squares;
}

// The written model, run by the engine, computes what the simulation of its plan does on `x`.
void expect_written_equals_simulation(const ir::Model& model, const quant::QuantizeResult& q,
                                      const quant::QuantConfig& c, const std::vector<ir::Tensor>& x) {
  engine::Session written(q.model);
  quant::Simulation simulation(model, q.plan, c, 1);
  for (const ir::Tensor& t : x) {
    ir::Tensor a = written.run({{"x", t}})[0], b = simulation.run({{"x", t}})[0];
    for (size_t i = 0; i < a.values<float>().size(); ++i) ASSERT_EQ(a.values<float>()[i], b.values<float>()[i]) << i;
  }
}

struct Corrected {
  quant::QuantizeResult plain, corrected;
};
Corrected quantize_both(const ir::Model& model, quant::QuantConfig c) {
  Corrected out;
  testing::FeedListReader reader = feeds_of(inputs(32, {1, 3, 8, 8}, 31));
  out.plain = quant::quantize_static(model, reader, c);
  c.bias_correction = true;
  EXPECT_THROW(quant::quantize_static(model, reader, c), Error);  // no refiner given: not silently skipped
  reader.rewind();
  out.corrected = quant::quantize_static(model, reader, c, {}, post_quantization_refiner(c));
  return out;
}

quant::QuantConfig int8_config() {
  quant::QuantConfig c;
  c.optimize_model = false;
  c.calibrate_method = calib::Method::MinMax;
  c.calib.threads = 1;
  c.per_channel = false;
  return c;
}

TEST(BiasCorrection, CorrectsTheInt8ConvBiasesAndLowersTheMeanErrorOnOtherSamples) {
  const ir::Model model = two_convs();
  const quant::QuantConfig c = int8_config();
  const auto [plain, corrected] = quantize_both(model, c);
  const nlohmann::json report = quant::report(model, corrected);
  ASSERT_TRUE(report.contains("bias_correction"));
  ASSERT_EQ(report["bias_correction"].size(), 2u);
  EXPECT_EQ(report["bias_correction"][0]["node"], "conv1");
  EXPECT_EQ(report["bias_correction"][0]["activation"], "Relu");
  EXPECT_FALSE(report.contains("fast_finetune"));
  bool changed = false;
  for (const char* b : {"b1", "b2"}) {
    const ir::Tensor &before = *plain.plan.find(b)->data, &after = *corrected.plan.find(b)->data;
    EXPECT_EQ(after.dtype(), ir::DataType::Int32);
    changed = changed || !std::equal(before.values<int32_t>().begin(), before.values<int32_t>().end(),
                                     after.values<int32_t>().begin());
  }
  EXPECT_TRUE(changed);
  const std::vector<ir::Tensor> other = inputs(32, {1, 3, 8, 8}, 99);
  EXPECT_LT(mean_error(model, corrected.plan, c, other), 0.5 * mean_error(model, plain.plan, c, other));
  // The written model computes with the corrected biases.
  expect_written_equals_simulation(model, corrected, c, other);
}

// A block-format plan (BFP with few mantissa bits): the corrected float biases go through their
// block nodes, in the simulation and in the written model alike.
TEST(BiasCorrection, BlockFormatBiasesGoThroughTheirBlockNodes) {
  const ir::Model model = two_convs();
  quant::QuantConfig c = int8_config();
  c.format = quant::QuantFormat::ExtendedQDQ;
  c.activation_type = c.weight_type = quant::kQBfp;
  c.bfp.bit_width = 12;
  const auto [plain, corrected] = quantize_both(model, c);
  const quant::TensorPlan* b1 = corrected.plan.find("b1");
  ASSERT_NE(b1, nullptr);
  EXPECT_FALSE(plain.plan.find("b1")->data.has_value());
  ASSERT_TRUE(b1->data.has_value());
  EXPECT_EQ(b1->data->dtype(), ir::DataType::Float);
  const std::vector<ir::Tensor> other = inputs(32, {1, 3, 8, 8}, 99);
  EXPECT_LT(mean_error(model, corrected.plan, c, other), mean_error(model, plain.plan, c, other));
  expect_written_equals_simulation(model, corrected, c, other);
}

// x[1,6,12] -> MatMul (w1 [12,8]) -> Add (b1 [8]) -> Relu -> MatMul (w2 [8,4]) -> Add (b2
// [1,1,4]) -> MatMul (w3 [4,4]) -> y: transformer-style biases, and a MatMul without one.
ir::Model matmul_adds() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {1, 6, 12});
  g.add_input(x);
  g.add_node("MatMul", {x, testing::add_random_initializer(g, "w1", {12, 8}, 41)}, {g.add_value("m1")}, "mm1");
  g.add_node("Add", {g.find_value("m1"), testing::add_random_initializer(g, "b1", {8}, 42)}, {g.add_value("a1")},
             "add1");
  g.add_node("Relu", {g.find_value("a1")}, {g.add_value("r")}, "relu");
  g.add_node("MatMul", {g.find_value("r"), testing::add_random_initializer(g, "w2", {8, 4}, 43)}, {g.add_value("m2")},
             "mm2");
  // The bias first: Add reads it as input 0.
  g.add_node("Add", {testing::add_random_initializer(g, "b2", {1, 1, 4}, 44), g.find_value("m2")}, {g.add_value("a2")},
             "add2");
  g.add_node("MatMul", {g.find_value("a2"), testing::add_random_initializer(g, "w3", {4, 4}, 45)}, {g.add_value("y")},
             "mm3");
  g.add_output(g.find_value("y"));
  return m;
}

TEST(BiasCorrection, CorrectsTheConstantOfTheAddAfterAMatMul) {
  const ir::Model model = matmul_adds();
  const quant::QuantConfig c = int8_config();
  testing::FeedListReader reader = feeds_of(inputs(32, {1, 6, 12}, 51));
  const quant::QuantizeResult plain = quant::quantize_static(model, reader, c);
  quant::QuantConfig bc = c;
  bc.bias_correction = true;
  reader.rewind();
  const quant::QuantizeResult corrected = quant::quantize_static(model, reader, bc, {}, post_quantization_refiner(bc));

  const nlohmann::json report = quant::report(model, corrected)["bias_correction"];
  ASSERT_EQ(report.size(), 3u) << report.dump();
  EXPECT_EQ(report[0]["node"], "mm1");
  EXPECT_EQ(report[0]["activation"], "Relu");  // the layer ends behind the Add's Relu
  EXPECT_EQ(report[1]["node"], "mm2");
  EXPECT_EQ(report[2]["node"], "mm3");
  EXPECT_NE(report[2]["skipped"].get<std::string>().find("no bias"), std::string::npos) << report[2].dump();
  bool changed = false;
  for (const char* b : {"b1", "b2"}) {
    const quant::TensorPlan* before = plain.plan.find(b);
    const quant::TensorPlan* after = corrected.plan.find(b);
    ASSERT_TRUE(before && after && before->data && after->data) << b;
    EXPECT_EQ(after->data->dims(), before->data->dims());
    ASSERT_EQ(after->data->byte_size(), before->data->byte_size());
    changed = changed ||
              std::memcmp(after->data->bytes().data(), before->data->bytes().data(), before->data->byte_size()) != 0;
  }
  EXPECT_TRUE(changed);
  const std::vector<ir::Tensor> other = inputs(32, {1, 6, 12}, 98);
  EXPECT_LT(mean_error(model, corrected.plan, bc, other, true), 0.5 * mean_error(model, plain.plan, c, other, true));
  expect_written_equals_simulation(model, corrected, bc, other);
}

TEST(BiasCorrection, IsAnExtraOptionRefusedWhereNothingIsQuantizedToCorrect) {
  quant::QuantConfig c;
  quant::apply_extra_option(c, "BiasCorrection", nlohmann::json(true));
  EXPECT_TRUE(c.bias_correction);
  EXPECT_THROW(quant::apply_extra_option(c, "BiasCorrection", nlohmann::json("yes")), Error);
  quant::QuantConfig nbits = c;
  nbits.use_matmul_nbits = true;
  try {
    quant::check_config(nbits);
    ADD_FAILURE() << "UseMatMulNBits with BiasCorrection accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BiasCorrection"), std::string::npos) << e.what();
  }
  quant::QuantConfig dynamic = c;
  dynamic.use_dynamic_quant = true;
  EXPECT_THROW(quant::check_config(dynamic), Error);
}

}  // namespace
}  // namespace onnxptq::finetune
