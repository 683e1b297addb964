// The random family on what the ONNX backend tests leave out (they cannot compare draws). Bernoulli:
// the mean of many draws against p (within five standard deviations of the binomial's mean), p = 0
// and 1, seeds (the same draws for the same seed, in every run and on any number of threads; fresh
// draws each run without one), dtype, bad input. RandomUniformLike: dtype, the range [low, high)
// and its mean, ranges narrower than one step of the output type, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/session.h"
#include "ir/float16.h"
#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;
using kernel_test::f32;
using kernel_test::i64;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::run_op;

bool random_error_has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

double random_mean(const Tensor& t) {
  double sum = 0;
  if (t.dtype() == DataType::Double)
    for (double v : t.values<double>()) sum += v;
  else
    for (float v : t.values<float>()) sum += v;
  return sum / static_cast<double>(t.size());
}

Tensor random_fill(std::vector<int64_t> dims, float value) {
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)), value);
  return f32(std::move(dims), v);
}

// ---- Bernoulli

TEST(RandomKernels, BernoulliMeanIsNearP) {
  // A count of n draws of probability p has standard deviation sqrt(n p (1 - p)): the mean lies
  // within 5 of them of p but once in 1.7 million.
  const int64_t n = 200000;
  for (float p : {0.3f, 0.02f, 0.5f}) {
    Tensor y = run_op({"Bernoulli", 15, {{"seed", 7.0f}}}, {random_fill({n}, p)});
    ASSERT_EQ(y.dtype(), DataType::Float);
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{n}));
    for (float v : y.values<float>()) ASSERT_TRUE(v == 0 || v == 1) << v;
    EXPECT_NEAR(random_mean(y), p, 5 * std::sqrt(p * (1 - p) / n)) << "p " << p;
  }
  // Each element its own p: the halves of 0.1 and 0.9 each near theirs.
  std::vector<float> p(2 * n);
  for (int64_t i = 0; i < 2 * n; ++i) p[i] = i % 2 ? 0.9f : 0.1f;
  Tensor y = run_op({"Bernoulli", 15, {{"seed", 1.0f}}, 1, 2}, {f32({2 * n}, p)});
  double odd = 0, even = 0;
  for (int64_t i = 0; i < 2 * n; ++i) (i % 2 ? odd : even) += y.values<float>()[i];
  const double sd = std::sqrt(0.09 / n);
  EXPECT_NEAR(odd / n, 0.9, 5 * sd);
  EXPECT_NEAR(even / n, 0.1, 5 * sd);
}

TEST(RandomKernels, BernoulliOfZeroAndOneIsCertain) {
  Tensor y = run_op({"Bernoulli", 15}, {f32({6}, {0, 1, 0, 1, 1, 0})});
  EXPECT_EQ(kernel_test::floats(y), (std::vector<float>{0, 1, 0, 1, 1, 0}));
}

// A model of one Bernoulli node, so that one session runs twice.
ir::Model bernoulli_model(std::optional<float> seed) {
  ir::Model m;
  m.set_opset("", 15);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  ir::Value* y = g.add_value("y");
  g.add_input(x);
  ir::Node* node = g.add_node("Bernoulli", {x}, {y}, "draw");
  if (seed) node->set_attribute(ir::Attribute::of_float("seed", *seed));
  g.add_output(y);
  return m;
}

TEST(RandomKernels, BernoulliSameSeedSameDrawsAndFreshDrawsWithoutOne) {
  const std::map<std::string, Tensor> feed = {{"x", random_fill({1000}, 0.5f)}};
  auto values = [](const Tensor& t) { return kernel_test::floats(t); };
  Session seeded(bernoulli_model(3.0f)), seeded_again(bernoulli_model(3.0f)), other(bernoulli_model(4.0f));
  const std::vector<float> first = values(seeded.run(feed)[0]);
  EXPECT_EQ(values(seeded.run(feed)[0]), first);        // every run of a seeded node
  EXPECT_EQ(values(seeded_again.run(feed)[0]), first);  // and every session
  EXPECT_NE(values(other.run(feed)[0]), first);         // another seed, other draws
  // Four threads draw what one does.
  EXPECT_EQ(values(run_op({"Bernoulli", 15, {{"seed", 3.0f}}, 1, 4}, {random_fill({1000}, 0.5f)})), first);
  Session unseeded(bernoulli_model(std::nullopt));
  EXPECT_NE(values(unseeded.run(feed)[0]), values(unseeded.run(feed)[0]));  // 2^-1000 to fail
}

TEST(RandomKernels, BernoulliDtypeSetsTheOutputType) {
  Tensor p = f32({4}, {0, 1, 1, 0});
  Tensor y = run_op({"Bernoulli", 15, {{"dtype", int64_t{6}}}}, {p});
  ASSERT_EQ(y.dtype(), DataType::Int32);
  EXPECT_EQ(kernel_test::values_of<int32_t>(y), (std::vector<int32_t>{0, 1, 1, 0}));
  Tensor b = run_op({"Bernoulli", 15, {{"dtype", int64_t{9}}}}, {p});
  ASSERT_EQ(b.dtype(), DataType::Bool);
  EXPECT_EQ(kernel_test::values_of<uint8_t>(b), (std::vector<uint8_t>{0, 1, 1, 0}));
  Tensor h = run_op({"Bernoulli", 15, {{"dtype", int64_t{10}}}}, {p});
  ASSERT_EQ(h.dtype(), DataType::Float16);
  EXPECT_EQ(ir::half_to_float(h.values<uint16_t>()[1]), 1.0f);
  Tensor d = run_op({"Bernoulli", 15}, {Tensor::from_values<double>({2}, std::vector<double>{1, 0})});
  ASSERT_EQ(d.dtype(), DataType::Double);
  EXPECT_EQ(kernel_test::values_of<double>(d), (std::vector<double>{1, 0}));
}

TEST(RandomKernels, BernoulliRefusesBadInput) {
  EXPECT_TRUE(random_error_has(op_error({"Bernoulli", 15}, {f32({3}, {0.5f, 1.5f, 0})}),
                                    "input element 1 is 1.500000, not a probability in [0, 1]"));
  EXPECT_TRUE(random_error_has(op_error({"Bernoulli", 15}, {f32({1}, {kernel_test::kNaN})}), "not a probability"));
  EXPECT_TRUE(random_error_has(op_error({"Bernoulli", 15}, {i64({1}, {1})}), "must hold float probabilities"));
  EXPECT_TRUE(random_error_has(op_error({"Bernoulli", 15, {{"dtype", int64_t{8}}}}, {f32({1}, {0.5f})}),
                                    "dtype 8 (string) is not an output type of Bernoulli"));
  EXPECT_TRUE(random_error_has(op_error({"Bernoulli", 15, {{"dtype", int64_t{99}}}}, {f32({1}, {0.5f})}),
                                    "dtype 99 is not an output type"));
}

// ---- RandomUniformLike

TEST(RandomKernels, RandomUniformLikeDrawsInLowHighOfTheDtype) {
  const int64_t n = 100000;
  // dtype double over an int64 input: its shape, not its type.
  Tensor like = i64({n / 1000, 1000}, std::vector<int64_t>(n, 3));
  Tensor y = run_op({"RandomUniformLike", 1, {{"dtype", int64_t{11}}, {"low", -2.0f}, {"high", 5.0f}, {"seed", 0.0f}}},
                    {like});
  ASSERT_EQ(y.dtype(), DataType::Double);
  ASSERT_EQ(y.dims(), like.dims());
  double lo = 1e9, hi = -1e9;
  for (double v : y.values<double>()) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -2.0);
  EXPECT_LT(hi, 5.0);
  EXPECT_LT(lo, -1.99);  // the whole range is drawn from
  EXPECT_GT(hi, 4.99);
  // The uniform's standard deviation is 7 / sqrt(12); its mean 1.5.
  EXPECT_NEAR(random_mean(y), 1.5, 5 * 7 / std::sqrt(12.0 * n));

  // Without dtype, the input's type; the defaults low 0 and high 1.
  Tensor f = run_op({"RandomUniformLike", 1}, {random_fill({500}, 9)});
  ASSERT_EQ(f.dtype(), DataType::Float);
  for (float v : f.values<float>()) ASSERT_TRUE(v >= 0 && v < 1) << v;
  Tensor h = run_op({"RandomUniformLike", 1, {{"low", 10.0f}, {"high", 12.0f}}},
                    {Tensor(DataType::Float16, {300})});
  ASSERT_EQ(h.dtype(), DataType::Float16);
  for (uint16_t v : h.values<uint16_t>()) {
    const float x = ir::half_to_float(v);
    ASSERT_TRUE(x >= 10 && x < 12) << x;
  }
}

TEST(RandomKernels, RandomUniformLikeStaysBelowHighWhenValuesRoundUp) {
  // [1, next float after 1): only 1 is in range; every draw rounding up to high is moved below.
  const float next = std::nextafter(1.0f, 2.0f);
  Tensor f = run_op({"RandomUniformLike", 1, {{"low", 1.0f}, {"high", next}, {"seed", 2.0f}}}, {f32({1000}, std::vector<float>(1000))});
  for (float v : f.values<float>()) ASSERT_EQ(v, 1.0f);
  // float16: [1, 1 + 2^-10) holds only 1; [1.0001, 1.0002) no float16 at all.
  Tensor h = run_op({"RandomUniformLike", 1, {{"dtype", int64_t{10}}, {"low", 1.0f}, {"high", 1.0009765625f}}},
                    {f32({1000}, std::vector<float>(1000))});
  for (uint16_t v : h.values<uint16_t>()) ASSERT_EQ(ir::half_to_float(v), 1.0f);
  EXPECT_TRUE(random_error_has(
      op_error({"RandomUniformLike", 1, {{"dtype", int64_t{10}}, {"low", 1.0001f}, {"high", 1.0002f}}}, {f32({1}, {0})}),
      "no float16 value lies in"));
}

TEST(RandomKernels, RandomUniformLikeRefusesBadInput) {
  EXPECT_TRUE(random_error_has(op_error({"RandomUniformLike", 1}, {i64({2}, {1, 2})}),
                                    "without a dtype attribute the output takes the input's type"));
  EXPECT_TRUE(random_error_has(op_error({"RandomUniformLike", 1, {{"low", 2.0f}, {"high", 2.0f}}}, {f32({1}, {0})}),
                                    "must be finite with low < high"));
  EXPECT_TRUE(random_error_has(op_error({"RandomUniformLike", 1, {{"dtype", int64_t{6}}}}, {f32({1}, {0})}),
                                    "dtype 6 (int32) is not an output type of RandomUniformLike"));
}

}  // namespace
}  // namespace onnxptq::engine
