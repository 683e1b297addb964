// The reduce family on what the ONNX backend tests leave out: every layout of reduced axes
// (innermost rows, columns, transposed) at awkward sizes and thread splits against a naive
// multi-index reference in double written here; axes as attribute or input by opset,
// noop_with_empty_axes, empty reductions, NaN and infinities, integer and half types;
// Softmax's two axis semantics; ArgMax/TopK ties and NaN; CumSum; and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <variant>

#include "engine/session.h"
#include "ir/float16.h"
#include "onnxptq/error.h"
#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;
using Dims = std::vector<int64_t>;
using kernel_test::expect_near_all;
using kernel_test::f32;
using kernel_test::floats;
using kernel_test::i32;
using kernel_test::i64;
using kernel_test::kInf;
using kernel_test::kNaN;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::random_f32;
using kernel_test::run_all;
using kernel_test::run_op;

std::vector<int64_t> int64s(const Tensor& t) {
  auto v = t.values<int64_t>();
  return {v.begin(), v.end()};
}

// ---- Reductions against a naive reference ----

// The reduction of `x` (dims) over `axes` (empty: all), by multi-index, in double.
std::vector<double> naive_reduce(const std::string& op, const Tensor& x, std::vector<int64_t> axes) {
  const Dims& dims = x.dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) reduced[(a + rank) % rank] = true;
  int64_t groups = 1, count = 1;
  for (int64_t i = 0; i < rank; ++i) (reduced[i] ? count : groups) *= dims[i];
  std::vector<std::vector<double>> members(static_cast<size_t>(groups));
  auto xv = x.values<float>();
  for (int64_t flat = 0; flat < x.size(); ++flat) {
    int64_t rest = flat, group = 0, group_stride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      const int64_t idx = rest % dims[i];
      rest /= dims[i];
      if (!reduced[i]) {
        group += idx * group_stride;
        group_stride *= dims[i];
      }
    }
    members[group].push_back(xv[flat]);
  }
  std::vector<double> out;
  for (const auto& m : members) {
    double r = 0;
    if (op == "ReduceSum" || op == "ReduceMean") {
      for (double v : m) r += v;
      if (op == "ReduceMean") r /= static_cast<double>(count);
    } else if (op == "ReduceMax") {
      r = -INFINITY;
      for (double v : m) r = std::max(r, v);
    } else if (op == "ReduceMin") {
      r = INFINITY;
      for (double v : m) r = std::min(r, v);
    } else if (op == "ReduceProd") {
      r = 1;
      for (double v : m) r *= v;
    } else if (op == "ReduceL1") {
      for (double v : m) r += std::fabs(v);
    } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
      for (double v : m) r += v * v;
      if (op == "ReduceL2") r = std::sqrt(r);
    } else if (op == "ReduceLogSum") {
      for (double v : m) r += v;
      r = std::log(r);
    } else if (op == "ReduceLogSumExp") {
      for (double v : m) r += std::exp(v);
      r = std::log(r);
    }
    out.push_back(r);
  }
  return out;
}

const char* const kReduceOps[] = {"ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",    "ReduceProd",
                                  "ReduceL1",  "ReduceL2",   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};

// Every layout: innermost rows, columns with and without outer part, the transposed fallback,
// everything, and axes with size-1 neighbours.
TEST(KernelsReduce, EveryOpAndLayoutMatchesNaiveReference) {
  const Dims dims = {3, 13, 1, 7};
  const std::vector<std::vector<int64_t>> axis_sets = {{3}, {1}, {0}, {1, 2}, {0, 3}, {0, 1}, {-1, -3}, {}, {2}};
  for (const char* op : kReduceOps) {
    // ReduceLogSum needs positive sums, ReduceProd values near 1.
    const std::string name = op;
    Tensor x = name == "ReduceLogSum" ? random_f32(dims, 7, 0.1f, 2.0f)
               : name == "ReduceProd" ? random_f32(dims, 7, 0.7f, 1.3f)
                                      : random_f32(dims, 7);
    for (const auto& axes : axis_sets)
      for (int64_t keepdims : {0, 1}) {
        SCOPED_TRACE(name + " axes " + ir::dims_to_string(axes) + " keepdims " + std::to_string(keepdims));
        Op o{name, 12, {{"keepdims", keepdims}}};  // axes as an attribute for every op
        if (!axes.empty()) o.attrs.push_back({"axes", axes});
        Tensor y = run_op(o, {x});
        Dims expected_dims;
        for (int64_t i = 0; i < 4; ++i) {
          bool r = axes.empty() || std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return (a + 4) % 4 == i; });
          if (!r) expected_dims.push_back(dims[i]);
          else if (keepdims) expected_dims.push_back(1);
        }
        EXPECT_EQ(y.dims(), expected_dims);
        expect_near_all(naive_reduce(name, x, axes), y, 2e-5, 1e-5);
      }
  }
}

TEST(KernelsReduce, LongRowsAndThreadSplitsMatchNaiveReference) {
  // Rows of 127 and 1000, columns wider than one block, and a scalar result split over threads.
  struct Case {
    Dims dims;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {{{5, 127}, {1}}, {{4, 1000}, {1}}, {{3, 40, 600}, {1}}, {{70000}, {}}, {{2, 3, 40000}, {0, 2}}};
  for (const auto& c : cases)
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp"})
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::string(op) + " " + ir::dims_to_string(c.dims) + " threads " + std::to_string(threads));
        Tensor x = random_f32(c.dims, 11);
        Op o{op, 12, {{"keepdims", int64_t{0}}}, 1, threads};
        if (!c.axes.empty()) o.attrs.push_back({"axes", c.axes});
        expect_near_all(naive_reduce(op, x, c.axes), run_op(o, {x}), 1e-4, 1e-4);
      }
}

TEST(KernelsReduce, AxesInputFromOpset18AndReduceSumFrom13) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(floats(run_op({"ReduceMean", 18}, {x, i64({1}, {1})})), (std::vector<float>{2, 5}));
  EXPECT_EQ(floats(run_op({"ReduceSum", 13}, {x, i64({1}, {-2})})), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(floats(run_op({"ReduceMax", 18}, {x, i32({2}, {0, 1})})), (std::vector<float>{6}));
  // No axes, or empty axes: everything, unless noop_with_empty_axes.
  EXPECT_EQ(floats(run_op({"ReduceProd", 18}, {x})), (std::vector<float>{720}));
  EXPECT_EQ(floats(run_op({"ReduceSum", 13}, {x, i64({0}, {})})), (std::vector<float>{21}));
  Tensor same = run_op({"ReduceL1", 18, {{"noop_with_empty_axes", int64_t{1}}}}, {x, i64({0}, {})});
  EXPECT_EQ(same.dims(), (Dims{2, 3}));
  EXPECT_EQ(floats(same), floats(x));
  // Before opset 18 (13 for ReduceSum) the axes are an attribute.
  EXPECT_EQ(floats(run_op({"ReduceSum", 11, {{"axes", std::vector<int64_t>{1}}}}, {x})), (std::vector<float>{6, 15}));
  EXPECT_NE(op_error({"ReduceMean", 18, {{"axes", std::vector<int64_t>{1}}}}, {x}).find("axes attribute is not allowed"),
            std::string::npos);
}

TEST(KernelsReduce, EmptyReductionsGiveTheIdentityOfTheOp) {
  Tensor x = f32({2, 0}, {});
  const std::map<std::string, float> expected = {{"ReduceSum", 0.0f},     {"ReduceMax", -kInf},  {"ReduceMin", kInf},
                                                 {"ReduceProd", 1.0f},    {"ReduceL2", 0.0f},    {"ReduceLogSumExp", -kInf},
                                                 {"ReduceLogSum", -kInf}, {"ReduceMean", kNaN}};
  for (const auto& [op, value] : expected) {
    SCOPED_TRACE(op);
    Tensor y = run_op({op, 12, {{"axes", std::vector<int64_t>{1}}}}, {x});
    EXPECT_EQ(y.dims(), (Dims{2, 1}));
    expect_near_all({value, value}, y, 1e-5, 1e-6);
  }
  // An empty kept axis gives an empty result.
  EXPECT_EQ(run_op({"ReduceSum", 13, {{"keepdims", int64_t{0}}}}, {f32({0, 3}, {}), i64({1}, {1})}).dims(), (Dims{0}));
}

TEST(KernelsReduce, NanAndInfinities) {
  Tensor x = f32({2, 9}, {1, 2, kNaN, 4, 5, 6, 7, 8, 9, -kInf, 1, 2, 3, 4, 5, 6, 7, kInf});
  Op max{"ReduceMax", 13, {{"axes", std::vector<int64_t>{1}}}};
  auto y = floats(run_op(max, {x}));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], kInf);
  auto m = floats(run_op({"ReduceMin", 13, {{"axes", std::vector<int64_t>{1}}}}, {x}));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], -kInf);
  // Column layout propagates NaN too.
  auto c = floats(run_op({"ReduceMax", 13, {{"axes", std::vector<int64_t>{0}}}}, {x}));
  EXPECT_TRUE(std::isnan(c[2]));
  EXPECT_EQ(c[8], kInf);
  // LogSumExp of huge values does not overflow: log(2 e^1000) = 1000 + log 2.
  auto l = floats(run_op({"ReduceLogSumExp", 13}, {f32({2}, {1000, 1000})}));
  EXPECT_NEAR(l[0], 1000.0 + std::log(2.0), 1e-3);
  auto li = floats(run_op({"ReduceLogSumExp", 13}, {f32({2}, {-kInf, -kInf})}));
  EXPECT_EQ(li[0], -kInf);
}

TEST(KernelsReduce, IntegerBoolAndHalfTypes) {
  Tensor xi = i32({2, 3}, {1, -2, 3, 4, 5, -6});
  Tensor s = run_op({"ReduceSum", 13}, {xi, i64({1}, {1})});
  ASSERT_EQ(s.dtype(), DataType::Int32);
  EXPECT_EQ(s.values<int32_t>()[0], 2);
  EXPECT_EQ(s.values<int32_t>()[1], 3);
  Tensor l1 = run_op({"ReduceL1", 13, {{"axes", std::vector<int64_t>{0}}}}, {xi});
  EXPECT_EQ(std::vector<int32_t>(l1.values<int32_t>().begin(), l1.values<int32_t>().end()), (std::vector<int32_t>{5, 7, 9}));
  Tensor big = i64({3}, {int64_t{1} << 40, 3, -(int64_t{1} << 40)});
  EXPECT_EQ(run_op({"ReduceSum", 13}, {big}).values<int64_t>()[0], 3);
  EXPECT_EQ(run_op({"ReduceMean", 13}, {i64({4}, {1, 2, 3, 5})}).values<int64_t>()[0], 2);  // 11 / 4, truncated

  Tensor flags(DataType::Bool, {2, 2});
  auto fv = flags.mutable_values<bool>();
  fv[1] = true;
  Tensor any = run_op({"ReduceMax", 20}, {flags, i64({1}, {1})});
  ASSERT_EQ(any.dtype(), DataType::Bool);
  EXPECT_TRUE(any.values<bool>()[0]);
  EXPECT_FALSE(any.values<bool>()[1]);
  Tensor all = run_op({"ReduceMin", 20}, {flags});
  EXPECT_FALSE(all.values<bool>()[0]);

  Tensor i8 = Tensor::from_values<int8_t>({4}, std::vector<int8_t>{-128, 5, 127, 0});
  EXPECT_EQ(run_op({"ReduceMin", 13}, {i8}).values<int8_t>()[0], -128);
  EXPECT_EQ(run_op({"ReduceMax", 13}, {i8}).values<int8_t>()[0], 127);

  std::vector<uint16_t> h(4);
  const float hv[4] = {0.5f, 1.5f, 2.5f, 3.5f};
  for (int i = 0; i < 4; ++i) h[i] = ir::float_to_half(hv[i]);
  Tensor half = run_op({"ReduceMean", 13}, {Tensor(DataType::Float16, {4}, ir::Bytes::copy_of(h.data(), 8))});
  ASSERT_EQ(half.dtype(), DataType::Float16);
  EXPECT_EQ(ir::half_to_float(half.values<uint16_t>()[0]), 2.0f);
}

TEST(KernelsReduce, BadAxesAreErrors) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_NE(op_error({"ReduceSum", 13}, {x, i64({2}, {1, -1})}).find("name axis 1 twice"), std::string::npos);
  EXPECT_NE(op_error({"ReduceMean", 13, {{"axes", std::vector<int64_t>{2}}}}, {x}).find("out of range"), std::string::npos);
  EXPECT_NE(op_error({"ReduceMax", 18}, {x, f32({1}, {1})}).find("int64 or int32"), std::string::npos);
  EXPECT_NE(op_error({"ReduceSum", 13}, {f32({}, {1}), i64({1}, {0})}).find("scalar"), std::string::npos);
  Tensor strings = Tensor::from_strings({1}, {"a"});
  EXPECT_NE(op_error({"ReduceMax", 13}, {strings}).find("does not take string"), std::string::npos);
}

// ---- Softmax, LogSoftmax, Hardmax ----

// Softmax (or log) over `n` values at stride `inner`, in double.
std::vector<double> naive_softmax(const std::vector<float>& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY, sum = 0;
      for (int64_t r = 0; r < n; ++r) m = std::max<double>(m, x[(o * n + r) * inner + j]);
      for (int64_t r = 0; r < n; ++r) sum += std::exp(x[(o * n + r) * inner + j] - m);
      for (int64_t r = 0; r < n; ++r) {
        const double v = x[(o * n + r) * inner + j] - m;
        y[(o * n + r) * inner + j] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  return y;
}

TEST(KernelsSoftmax, LastAxisAndOtherAxesMatchNaiveReference) {
  for (int threads : {1, 2})
    for (int64_t n : {1, 13, 127, 1000}) {
      Tensor x = random_f32({3, n}, 5, -20.0f, 20.0f);
      SCOPED_TRACE("n " + std::to_string(n));
      expect_near_all(naive_softmax(floats(x), 3, n, 1, false), run_op({"Softmax", 13, {}, 1, threads}, {x}), 1e-5, 1e-7);
      expect_near_all(naive_softmax(floats(x), 3, n, 1, true), run_op({"LogSoftmax", 13, {}, 1, threads}, {x}), 1e-5, 1e-5);
    }
  // The middle axis of [2, 7, 600] (columns wider than one block).
  Tensor x = random_f32({2, 7, 600}, 9, -10.0f, 10.0f);
  for (int threads : {1, 3}) {
    expect_near_all(naive_softmax(floats(x), 2, 7, 600, false), run_op({"Softmax", 13, {{"axis", int64_t{1}}}, 1, threads}, {x}), 1e-5, 1e-7);
    expect_near_all(naive_softmax(floats(x), 2, 7, 600, true), run_op({"LogSoftmax", 13, {{"axis", int64_t{-2}}}, 1, threads}, {x}), 1e-5, 1e-5);
  }
}

TEST(KernelsSoftmax, BeforeOpset13TheInputIsCoercedTo2D) {
  Tensor x = random_f32({2, 3, 4}, 3);
  // Opset 11, axis 1: each of the 2 rows of 12 values; opset 13, axis 1: along the axis of 3.
  expect_near_all(naive_softmax(floats(x), 2, 12, 1, false), run_op({"Softmax", 11}, {x}), 1e-5, 1e-6);
  expect_near_all(naive_softmax(floats(x), 2, 3, 4, false), run_op({"Softmax", 13, {{"axis", int64_t{1}}}}, {x}), 1e-5,
                  1e-6);
  expect_near_all(naive_softmax(floats(x), 1, 24, 1, true), run_op({"LogSoftmax", 1, {{"axis", int64_t{0}}}}, {x}), 1e-5, 1e-5);
  // Axis = rank: every row holds one value.
  expect_near_all(std::vector<double>(24, 1.0), run_op({"Softmax", 11, {{"axis", int64_t{3}}}}, {x}), 1e-5, 1e-6);
  Tensor h = run_op({"Hardmax", 11}, {f32({2, 2, 2}, {1, 5, 2, 5, 0, 0, 0, 0})});
  EXPECT_EQ(floats(h), (std::vector<float>{0, 1, 0, 0, 1, 0, 0, 0}));  // first maximum of each 2-D row
}

TEST(KernelsSoftmax, MaskedNanAndLargeValues) {
  // -inf (a mask) gives exactly 0; a NaN row gives NaN; large values do not overflow.
  auto y = floats(run_op({"Softmax", 13}, {f32({3, 3}, {0, -kInf, 0, 1, kNaN, 2, 10000, 10001, 10002})}));
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[3]) && std::isnan(y[5]));
  EXPECT_NEAR(y[8], 1.0 / (1.0 + std::exp(-1.0) + std::exp(-2.0)), 1e-6);
  auto l = floats(run_op({"LogSoftmax", 13}, {f32({3}, {10000, 10001, 10002})}));
  EXPECT_NEAR(l[0], -2.0 - std::log(1.0 + std::exp(-1.0) + std::exp(-2.0)), 1e-5);
  // Values far below the maximum underflow to 0, not to garbage.
  auto u = floats(run_op({"Softmax", 13}, {f32({2}, {0, -200})}));
  EXPECT_EQ(u[0], 1.0f);
  EXPECT_EQ(u[1], 0.0f);
}

TEST(KernelsSoftmax, ExpAccuracyOverTheWholeRange) {
  // Pairs (0, -t): the second softmax value is e^-t / (1 + e^-t).
  std::vector<float> v;
  for (float t = 0; t < 87.0f; t += 0.37f) {
    v.push_back(0.0f);
    v.push_back(-t);
  }
  const int64_t rows = static_cast<int64_t>(v.size() / 2);
  auto y = floats(run_op({"Softmax", 13}, {f32({rows, 2}, v)}));
  for (int64_t r = 0; r < rows; ++r) {
    const double e = std::exp(static_cast<double>(v[2 * r + 1]));
    EXPECT_NEAR(y[2 * r + 1], e / (1.0 + e), 3e-7 * e / (1.0 + e)) << "t " << -v[2 * r + 1];
  }
}

TEST(KernelsSoftmax, HardmaxTiesDoubleAndErrors) {
  EXPECT_EQ(floats(run_op({"Hardmax", 13, {{"axis", int64_t{0}}}}, {f32({3, 2}, {1, 3, 4, 3, 4, 0})})),
            (std::vector<float>{0, 1, 1, 0, 0, 0}));
  Tensor d = Tensor::from_values<double>({2}, std::vector<double>{1.0, 2.0});
  Tensor yd = run_op({"Softmax", 13}, {d});
  ASSERT_EQ(yd.dtype(), DataType::Double);
  EXPECT_NEAR(yd.values<double>()[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-12);
  EXPECT_NE(op_error({"Softmax", 13, {{"axis", int64_t{2}}}}, {f32({2, 2}, {1, 2, 3, 4})}).find("out of range"), std::string::npos);
  EXPECT_NE(op_error({"Softmax", 13}, {i64({2}, {1, 2})}).find("does not take int64"), std::string::npos);
  EXPECT_EQ(run_op({"Softmax", 13}, {f32({0, 3}, {})}).dims(), (Dims{0, 3}));
}

// ---- ArgMax, ArgMin ----

TEST(KernelsArg, TiesSelectLastIndexAndNan) {
  Tensor x = f32({2, 4}, {1, 3, 3, 0, 2, 2, 2, 2});
  EXPECT_EQ(int64s(run_op({"ArgMax", 13, {{"axis", int64_t{1}}}}, {x})), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(int64s(run_op({"ArgMax", 13, {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}}}, {x})),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(int64s(run_op({"ArgMin", 12, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}}}, {x})),
            (std::vector<int64_t>{3, 3}));
  Tensor k0 = run_op({"ArgMin", 13, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}}}, {x});
  EXPECT_EQ(k0.dims(), (Dims{4}));
  EXPECT_EQ(int64s(k0), (std::vector<int64_t>{0, 1, 1, 0}));
  // NaN is the extreme value, as in NumPy.
  EXPECT_EQ(int64s(run_op({"ArgMax", 13}, {f32({4}, {1, kNaN, 5, kNaN})})), (std::vector<int64_t>{1}));
  EXPECT_EQ(int64s(run_op({"ArgMin", 13}, {f32({3}, {1, kNaN, -5})})), (std::vector<int64_t>{1}));
  // Integers.
  EXPECT_EQ(int64s(run_op({"ArgMax", 13}, {i32({3}, {-7, 9, 9})})), (std::vector<int64_t>{1}));
  EXPECT_NE(op_error({"ArgMax", 13, {{"axis", int64_t{1}}}}, {f32({2, 0}, {})}).find("size 0"), std::string::npos);
}

TEST(KernelsArg, MiddleAxisWithManyTiesMatchesNaiveScan) {
  // Values 0..3 on [3, 5, 300] (many ties), along axis 1: columns wider than one block.
  std::mt19937 gen(31);
  std::vector<int32_t> v(3 * 5 * 300);
  for (int32_t& e : v) e = static_cast<int32_t>(gen() % 4);
  Tensor x = i32({3, 5, 300}, v);
  for (int64_t last : {0, 1})
    for (bool is_max : {true, false}) {
      auto got = int64s(run_op({is_max ? "ArgMax" : "ArgMin", 13, {{"axis", int64_t{1}}, {"select_last_index", last}}, 1, 2}, {x}));
      ASSERT_EQ(got.size(), 900u);
      for (int64_t o = 0; o < 3; ++o)
        for (int64_t j = 0; j < 300; ++j) {
          int64_t best = 0;
          for (int64_t r = 1; r < 5; ++r) {
            const int32_t a = v[(o * 5 + r) * 300 + j], b = v[(o * 5 + best) * 300 + j];
            if (is_max ? (last ? a >= b : a > b) : (last ? a <= b : a < b)) best = r;
          }
          EXPECT_EQ(got[o * 300 + j], best) << "o " << o << " j " << j;
        }
    }
}

// ---- TopK ----

TEST(KernelsTopK, TiesSmallestMiddleAxisAndK0) {
  Tensor x = f32({2, 5}, {3, 1, 3, 2, 3, 0, 0, 9, -1, 0});
  auto out = run_all({"TopK", 11, {}, 2}, {x, i64({1}, {3})});
  EXPECT_EQ(floats(out[0]), (std::vector<float>{3, 3, 3, 9, 0, 0}));
  EXPECT_EQ(int64s(out[1]), (std::vector<int64_t>{0, 2, 4, 2, 0, 1}));
  auto small = run_all({"TopK", 11, {{"largest", int64_t{0}}}, 2}, {x, i64({1}, {2})});
  EXPECT_EQ(floats(small[0]), (std::vector<float>{1, 2, -1, 0}));
  EXPECT_EQ(int64s(small[1]), (std::vector<int64_t>{1, 3, 3, 0}));
  // Along axis 0 of [3, 2].
  auto mid = run_all({"TopK", 11, {{"axis", int64_t{0}}}, 2}, {f32({3, 2}, {1, 6, 5, 2, 3, 4}), i64({1}, {2})});
  EXPECT_EQ(floats(mid[0]), (std::vector<float>{5, 6, 3, 4}));
  EXPECT_EQ(int64s(mid[1]), (std::vector<int64_t>{1, 0, 2, 2}));
  auto none = run_all({"TopK", 11, {}, 2}, {x, i64({1}, {0})});
  EXPECT_EQ(none[0].dims(), (Dims{2, 0}));
  // Opset 1 takes k as an attribute; NaN ranks above every number.
  auto v1 = run_all({"TopK", 1, {{"k", int64_t{2}}}, 2}, {f32({4}, {1, kNaN, 7, 2})});
  EXPECT_TRUE(std::isnan(floats(v1[0])[0]));
  EXPECT_EQ(int64s(v1[1]), (std::vector<int64_t>{1, 2}));
}

TEST(KernelsTopK, LongRowsMatchSortAndErrors) {
  Tensor x = random_f32({3, 127}, 21);
  auto out = run_all({"TopK", 11, {}, 2, 2}, {x, i64({1}, {50})});
  auto xv = floats(x);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<float> row(xv.begin() + r * 127, xv.begin() + (r + 1) * 127);
    std::sort(row.begin(), row.end(), std::greater<float>());
    for (int64_t i = 0; i < 50; ++i) {
      EXPECT_EQ(floats(out[0])[r * 50 + i], row[i]);
      EXPECT_EQ(xv[r * 127 + int64s(out[1])[r * 50 + i]], row[i]);
    }
  }
  EXPECT_NE(op_error({"TopK", 11, {}, 2}, {f32({3}, {1, 2, 3}), i64({1}, {4})}).find("K = 4 is out of range"), std::string::npos);
  EXPECT_NE(op_error({"TopK", 11, {}, 2}, {f32({3}, {1, 2, 3}), i64({1}, {-1})}).find("out of range"), std::string::npos);
  EXPECT_NE(op_error({"TopK", 1, {}, 2}, {f32({3}, {1, 2, 3})}).find("k attribute"), std::string::npos);
}

// ---- CumSum ----

TEST(KernelsCumSum, DirectionsAxesAndTypes) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(floats(run_op({"CumSum", 14}, {x, i64({}, {1})})), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(floats(run_op({"CumSum", 14}, {x, i32({}, {0})})), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(floats(run_op({"CumSum", 14, {{"exclusive", int64_t{1}}}}, {x, i64({}, {-1})})), (std::vector<float>{0, 1, 3, 0, 4, 9}));
  EXPECT_EQ(floats(run_op({"CumSum", 11, {{"reverse", int64_t{1}}}}, {x, i64({1}, {1})})), (std::vector<float>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(floats(run_op({"CumSum", 14, {{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}}, {x, i64({}, {0})})),
            (std::vector<float>{4, 5, 6, 0, 0, 0}));
  Tensor xi = i64({4}, {int64_t{1} << 40, 1, 2, 3});
  EXPECT_EQ(int64s(run_op({"CumSum", 14}, {xi, i64({}, {0})})),
            (std::vector<int64_t>{int64_t{1} << 40, (int64_t{1} << 40) + 1, (int64_t{1} << 40) + 3, (int64_t{1} << 40) + 6}));
  EXPECT_NE(op_error({"CumSum", 14}, {x, i64({2}, {0, 1})}).find("one value"), std::string::npos);
  EXPECT_NE(op_error({"CumSum", 14}, {x, i64({}, {2})}).find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace onnxptq::engine
