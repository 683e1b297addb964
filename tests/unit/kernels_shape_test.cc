// The shape kernels on what the ONNX backend tests leave out: opset variants, awkward sizes and
// thread splits against naive multi-index references written here, negative axes and steps,
// empty tensors, strings, zero-copy views, and error messages. Resize cases the backend data
// lacks (antialias, axes, keep_aspect_ratio_policy, half_pixel_symmetric...) are checked against
// values from a NumPy transcription of the ONNX reference algorithm, or computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
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
using kernel_test::Attr;
using kernel_test::f32;
using kernel_test::floats;
using kernel_test::i32;
using kernel_test::i64;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::run_all;
using kernel_test::run_op;

Tensor i64s(std::vector<int64_t> v) {
  auto n = static_cast<int64_t>(v.size());
  return i64({n}, std::move(v));
}

// 0, 1, 2, ... in the given shape.
Tensor iota(Dims dims) {
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  std::iota(v.begin(), v.end(), 0.0f);
  return f32(std::move(dims), v);
}

Tensor random_floats(Dims dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-10, 10);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& x : v) x = dist(rng);
  return f32(std::move(dims), v);
}

std::vector<int64_t> ints(const Tensor& t) {
  auto v = t.values<int64_t>();
  return {v.begin(), v.end()};
}

void expect_floats(const Tensor& t, const Dims& dims, const std::vector<float>& expected, float tol = 1e-5f) {
  ASSERT_EQ(t.dtype(), DataType::Float);
  ASSERT_EQ(t.dims(), dims);
  auto v = t.values<float>();
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(v[i], expected[i], tol * std::max(1.0f, std::fabs(expected[i]))) << "element " << i;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.dims(), b.dims());
  ASSERT_EQ(a.byte_size(), b.byte_size());
  EXPECT_EQ(std::memcmp(a.bytes().data(), b.bytes().data(), a.byte_size()), 0);
}

// Element `index` (a multi-index) of a row-major tensor of `dims`.
int64_t flat(const Dims& dims, const Dims& index) {
  int64_t f = 0;
  for (size_t i = 0; i < dims.size(); ++i) f = f * dims[i] + index[i];
  return f;
}

// Calls fn(multi-index) over every element of `dims` in row-major order.
template <class F>
void for_each_index(const Dims& dims, F&& fn) {
  Dims index(dims.size(), 0);
  for (int64_t n = 0; n < ir::element_count(dims); ++n) {
    fn(index);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++index[k] < dims[k]) break;
      index[k] = 0;
    }
  }
}

// ------------------------------------------------------------------ views (no copy)

TEST(ShapeKernels, ReshapeSqueezeUnsqueezeFlattenShareTheInputData) {
  Tensor x = iota({2, 1, 3});
  auto shares = [&](const Tensor& y) { return y.bytes().same_storage(x.bytes()); };
  EXPECT_TRUE(shares(run_op({"Reshape", 14}, {x, i64s({3, -1})})));
  EXPECT_TRUE(shares(run_op({"Squeeze", 13}, {x, i64s({1})})));
  EXPECT_TRUE(shares(run_op({"Unsqueeze", 13}, {x, i64s({0})})));
  EXPECT_TRUE(shares(run_op({"Flatten", 13}, {x})));
  // Views that change nothing share too.
  EXPECT_TRUE(shares(run_op({"Transpose", 13, {{"perm", Dims{1, 0, 2}}}}, {x})));
  EXPECT_TRUE(shares(run_op({"Slice", 13}, {x, i64s({0}), i64s({100})})));
  EXPECT_TRUE(shares(run_op({"Expand", 13}, {x, i64s({1, 1})})));
}

TEST(ShapeKernels, ReshapeZeroCopiesAndMinusOneInfers) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(run_op({"Reshape", 13}, {x, i64s({0, -1})}).dims(), (Dims{2, 12}));
  EXPECT_EQ(run_op({"Reshape", 13}, {x, i64s({-1, 0, 2})}).dims(), (Dims{4, 3, 2}));
  EXPECT_EQ(run_op({"Reshape", 13}, {f32({1, 1}, {5}), i64({0}, {})}).dims(), (Dims{}));
  // allowzero (opset 14): a 0 is a real size; the element counts must then agree.
  Tensor empty = Tensor(DataType::Float, {0, 3});
  EXPECT_EQ(run_op({"Reshape", 14, {{"allowzero", int64_t{1}}}}, {empty, i64s({3, 0})}).dims(), (Dims{3, 0}));
  EXPECT_EQ(run_op({"Reshape", 14}, {empty, i64s({0, 3})}).dims(), (Dims{0, 3}));
  // Before opset 14 allowzero does not exist: 0 copies.
  EXPECT_EQ(run_op({"Reshape", 13, {{"allowzero", int64_t{1}}}}, {x, i64s({0, 12})}).dims(), (Dims{2, 12}));
  // Opset 1 took the shape as an attribute.
  EXPECT_EQ(run_op({"Reshape", 1, {{"shape", Dims{4, -1}}}}, {x}).dims(), (Dims{4, 6}));
  // Strings are copied, not shared.
  Tensor s = Tensor::from_strings({2, 2}, {"a", "b", "c", "d"});
  Tensor rs = run_op({"Reshape", 14}, {s, i64s({4})});
  EXPECT_EQ(rs.dims(), (Dims{4}));
  EXPECT_EQ(rs.string_values(), s.string_values());
}

TEST(ShapeKernels, ReshapeErrors) {
  Tensor x = iota({2, 3});
  EXPECT_NE(op_error({"Reshape", 14}, {x, i64s({-1, -1})}).find("more than one -1"), std::string::npos);
  EXPECT_NE(op_error({"Reshape", 14}, {x, i64s({4, 2})}).find("cannot reshape [2,3] (6 elements) to [4,2]"),
            std::string::npos);
  EXPECT_NE(op_error({"Reshape", 14}, {x, i64s({4, -1})}).find("cannot be inferred"), std::string::npos);
  EXPECT_NE(op_error({"Reshape", 14}, {x, i64s({-2, 3})}).find("negative size"), std::string::npos);
  EXPECT_NE(op_error({"Reshape", 14}, {x, i64s({1, 6, 0})}).find("no such dimension"), std::string::npos);
  // With allowzero a 0 beside a -1 leaves nothing to infer from.
  EXPECT_NE(op_error({"Reshape", 14, {{"allowzero", int64_t{1}}}}, {x, i64s({0, -1})}).find("cannot be inferred"),
            std::string::npos);
}

TEST(ShapeKernels, SqueezeAndUnsqueezeAcrossOpsets) {
  Tensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(run_op({"Squeeze", 11, {{"axes", Dims{-2}}}}, {x}).dims(), (Dims{1, 3, 2}));
  EXPECT_EQ(run_op({"Squeeze", 1, {{"axes", Dims{0}}}}, {x}).dims(), (Dims{3, 1, 2}));
  EXPECT_EQ(run_op({"Squeeze", 13}, {x, i64s({0, -2})}).dims(), (Dims{3, 2}));
  EXPECT_EQ(run_op({"Squeeze", 13}, {x}).dims(), (Dims{3, 2}));  // no axes: every 1
  EXPECT_EQ(run_op({"Squeeze", 13}, {x, i64({0}, {})}).dims(), (Dims{3, 2}));
  EXPECT_EQ(run_op({"Squeeze", 11}, {x}).dims(), (Dims{3, 2}));
  EXPECT_NE(op_error({"Squeeze", 13}, {x, i64s({1})}).find("cannot squeeze axis 1 of shape [1,3,1,2]"),
            std::string::npos);
  EXPECT_NE(op_error({"Squeeze", 13}, {x, i64s({4})}).find("out of range"), std::string::npos);

  Tensor y = iota({3, 2});
  EXPECT_EQ(run_op({"Unsqueeze", 11, {{"axes", Dims{0, -1}}}}, {y}).dims(), (Dims{1, 3, 2, 1}));
  EXPECT_EQ(run_op({"Unsqueeze", 13}, {y, i64s({3, 1})}).dims(), (Dims{3, 1, 2, 1}));
  EXPECT_EQ(run_op({"Unsqueeze", 13}, {Tensor(DataType::Float, {}), i64s({0})}).dims(), (Dims{1}));
  EXPECT_NE(op_error({"Unsqueeze", 13}, {y, i64s({1, -3})}).find("twice"), std::string::npos);
  EXPECT_NE(op_error({"Unsqueeze", 13}, {y, i64s({4})}).find("out of range"), std::string::npos);
  EXPECT_NE(op_error({"Unsqueeze", 11}, {y}).find("axes attribute is required"), std::string::npos);
}

TEST(ShapeKernels, FlattenAxisMayEqualTheRank) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(run_op({"Flatten", 13, {{"axis", int64_t{3}}}}, {x}).dims(), (Dims{24, 1}));
  EXPECT_EQ(run_op({"Flatten", 13, {{"axis", int64_t{0}}}}, {x}).dims(), (Dims{1, 24}));
  EXPECT_EQ(run_op({"Flatten", 13, {{"axis", int64_t{-3}}}}, {x}).dims(), (Dims{1, 24}));
  EXPECT_EQ(run_op({"Flatten", 13, {{"axis", int64_t{-1}}}}, {x}).dims(), (Dims{6, 4}));
  EXPECT_EQ(run_op({"Flatten", 13, {{"axis", int64_t{0}}}}, {Tensor(DataType::Float, {})}).dims(), (Dims{1, 1}));
  EXPECT_NE(op_error({"Flatten", 13, {{"axis", int64_t{4}}}}, {x}).find("axis 4 is out of range for rank 3"),
            std::string::npos);
}

TEST(ShapeKernels, ShapeStartEndAndSize) {
  Tensor x = iota({2, 3, 4, 5});
  EXPECT_EQ(ints(run_op({"Shape", 13}, {x})), (Dims{2, 3, 4, 5}));
  EXPECT_EQ(ints(run_op({"Shape", 15, {{"start", int64_t{-3}}, {"end", int64_t{-1}}}}, {x})), (Dims{3, 4}));
  EXPECT_EQ(ints(run_op({"Shape", 15, {{"start", int64_t{3}}, {"end", int64_t{1}}}}, {x})), (Dims{}));
  EXPECT_EQ(ints(run_op({"Shape", 15, {{"start", int64_t{-100}}, {"end", int64_t{100}}}}, {x})), (Dims{2, 3, 4, 5}));
  // start and end do not exist before opset 15.
  EXPECT_EQ(ints(run_op({"Shape", 13, {{"start", int64_t{2}}}}, {x})), (Dims{2, 3, 4, 5}));
  EXPECT_EQ(ints(run_op({"Shape", 15}, {Tensor(DataType::Float, {})})), (Dims{}));
  Tensor size = run_op({"Size", 13}, {x});
  EXPECT_EQ(size.dims(), (Dims{}));
  EXPECT_EQ(ints(size), (Dims{120}));
  EXPECT_EQ(ints(run_op({"Size", 13}, {Tensor(DataType::Float, {3, 0})})), (Dims{0}));
}

// ------------------------------------------------------------------ Transpose

Tensor naive_transpose(const Tensor& x, const Dims& perm) {
  Dims dims;
  for (int64_t p : perm) dims.push_back(x.dims()[p]);
  std::vector<float> out(static_cast<size_t>(x.size()));
  auto in = x.values<float>();
  for_each_index(x.dims(), [&](const Dims& i) {
    Dims o;
    for (int64_t p : perm) o.push_back(i[p]);
    out[flat(dims, o)] = in[flat(x.dims(), i)];
  });
  return f32(dims, out);
}

TEST(ShapeKernels, TransposeMatchesNaiveOnAwkwardShapesAndThreads) {
  struct Case {
    Dims dims, perm;
  };
  std::vector<Case> cases = {
      {{13, 127}, {1, 0}},               // tiled 2-D with ragged tiles
      {{2, 37, 41, 3}, {0, 3, 1, 2}},    // NHWC -> NCHW
      {{2, 3, 37, 41}, {0, 2, 3, 1}},    // NCHW -> NHWC
      {{1, 2, 9, 50}, {0, 2, 3, 1}},     // 2 and 4 channels: the narrow paths
      {{1, 4, 33, 17}, {0, 2, 3, 1}},
      {{3, 5, 7, 2}, {3, 1, 0, 2}},
      {{4, 1, 5, 1, 6}, {4, 3, 2, 1, 0}},
      {{2, 3, 4, 5, 6, 7}, {0, 1, 4, 2, 5, 3}},
      {{64, 64, 33}, {2, 1, 0}},
      {{7}, {0}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (int threads : {1, 4}) {
      Tensor x = random_floats(c.dims, seed++);
      Tensor y = run_op({"Transpose", 13, {{"perm", c.perm}}, 1, threads}, {x});
      expect_same(y, naive_transpose(x, c.perm));
    }
  // Default: the reversed order.
  Tensor x = random_floats({2, 3, 4}, 99);
  expect_same(run_op({"Transpose", 13}, {x}), naive_transpose(x, {2, 1, 0}));
  Tensor scalar = f32({}, {5});
  expect_same(run_op({"Transpose", 13}, {scalar}), scalar);
}

TEST(ShapeKernels, TransposeMovesAnyElementWidth) {
  Tensor s = Tensor::from_strings({2, 3}, {"a", "b", "c", "d", "e", "f"});
  Tensor t = run_op({"Transpose", 13}, {s});
  EXPECT_EQ(t.dims(), (Dims{3, 2}));
  EXPECT_EQ(t.string_values(), (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
  Tensor h = Tensor::from_values<uint16_t>({2, 2}, std::vector<uint16_t>{1, 2, 3, 4});
  Tensor half(DataType::Float16, {2, 2}, h.bytes());
  Tensor ht = run_op({"Transpose", 13}, {half});
  EXPECT_EQ(ht.dtype(), DataType::Float16);
  EXPECT_EQ(std::vector<uint16_t>(ht.values<uint16_t>().begin(), ht.values<uint16_t>().end()),
            (std::vector<uint16_t>{1, 3, 2, 4}));
  Tensor d = Tensor::from_values<double>({1, 3}, std::vector<double>{1.5, 2.5, 3.5});
  EXPECT_EQ(run_op({"Transpose", 13}, {d}).dims(), (Dims{3, 1}));
  EXPECT_NE(op_error({"Transpose", 13, {{"perm", Dims{0, 0}}}}, {iota({2, 2})}).find("not a permutation"),
            std::string::npos);
  EXPECT_NE(
      op_error({"Transpose", 13, {{"perm", Dims{1, 0}}}}, {iota({2, 2, 2})}).find("does not fit input float[2,2,2]"),
      std::string::npos);
}

// ------------------------------------------------------------------ Concat and Split

TEST(ShapeKernels, ConcatAlongEveryAxisWithThreads) {
  for (int threads : {1, 4})
    for (int64_t axis : {0, 1, 2, -1}) {
      Tensor a = random_floats({3, 40, 50}, 7), b = random_floats({3, 40, 50}, 8);
      Dims da = a.dims(), db = b.dims();
      int64_t ax = axis < 0 ? axis + 3 : axis;
      // Make the inputs differ along the axis.
      db[ax] = 7;
      b = random_floats(db, 9);
      Tensor y = run_op({"Concat", 13, {{"axis", axis}}, 1, threads}, {a, b});
      Dims dy = da;
      dy[ax] += 7;
      ASSERT_EQ(y.dims(), dy);
      auto va = a.values<float>(), vb = b.values<float>(), vy = y.values<float>();
      for_each_index(dy, [&](const Dims& i) {
        Dims j = i;
        float expected;
        if (i[ax] < da[ax]) expected = va[flat(da, i)];
        else {
          j[ax] -= da[ax];
          expected = vb[flat(db, j)];
        }
        ASSERT_EQ(vy[flat(dy, i)], expected);
      });
    }
}

TEST(ShapeKernels, ConcatEmptyInputsStringsAndErrors) {
  Tensor y = run_op({"Concat", 13, {{"axis", int64_t{0}}}}, {Tensor(DataType::Float, {0, 2}), f32({1, 2}, {1, 2})});
  expect_floats(y, {1, 2}, {1, 2});
  Tensor s = run_op({"Concat", 13, {{"axis", int64_t{1}}}},
                    {Tensor::from_strings({2, 1}, {"a", "b"}), Tensor::from_strings({2, 2}, {"c", "d", "e", "f"})});
  EXPECT_EQ(s.string_values(), (std::vector<std::string>{"a", "c", "d", "b", "e", "f"}));
  EXPECT_NE(op_error({"Concat", 13, {{"axis", int64_t{1}}}}, {iota({2, 2}), iota({3, 2})})
                .find("does not fit float[2,2] along axis 1"),
            std::string::npos);
  EXPECT_NE(op_error({"Concat", 13}, {iota({2})}).find("axis attribute is required"), std::string::npos);
  // Concat-1 defaulted the axis to 1.
  EXPECT_EQ(run_op({"Concat", 1}, {iota({2, 2}), iota({2, 1})}).dims(), (Dims{2, 3}));
}

TEST(ShapeKernels, SplitAcrossOpsets) {
  Tensor x = iota({2, 7});
  auto parts = [&](const Op& op, const std::vector<std::optional<Tensor>>& in) {
    std::vector<Dims> dims;
    for (const Tensor& t : run_all(op, in)) dims.push_back(t.dims());
    return dims;
  };
  EXPECT_EQ(parts({"Split", 11, {{"axis", int64_t{-1}}, {"split", Dims{3, 4}}}, 2}, {x}),
            (std::vector<Dims>{{2, 3}, {2, 4}}));
  EXPECT_EQ(parts({"Split", 13, {{"axis", int64_t{1}}}, 3}, {x, i64s({0, 5, 2})}),
            (std::vector<Dims>{{2, 0}, {2, 5}, {2, 2}}));
  // num_outputs (opset 18): the last part takes what is left of ceil(7 / 3) = 3 each.
  EXPECT_EQ(parts({"Split", 18, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}}, 3}, {x}),
            (std::vector<Dims>{{2, 3}, {2, 3}, {2, 1}}));
  EXPECT_EQ(parts({"Split", 13, {}, 2}, {x}), (std::vector<Dims>{{1, 7}, {1, 7}}));
  std::vector<Tensor> v = run_all({"Split", 13, {{"axis", int64_t{1}}}, 2}, {x, i64s({2, 5})});
  expect_floats(v[0], {2, 2}, {0, 1, 7, 8});
  expect_floats(v[1], {2, 5}, {2, 3, 4, 5, 6, 9, 10, 11, 12, 13});
  EXPECT_NE(op_error({"Split", 13, {{"axis", int64_t{1}}}, 2}, {x}).find("cannot split size 7 into 2 equal parts"),
            std::string::npos);
  EXPECT_NE(op_error({"Split", 13, {{"axis", int64_t{1}}}, 2}, {x, i64s({3, 3})}).find("does not divide axis 1"),
            std::string::npos);
  EXPECT_NE(op_error({"Split", 18, {{"num_outputs", int64_t{3}}}, 2}, {x})
                .find("num_outputs is 3 but the node has 2 outputs"),
            std::string::npos);
  EXPECT_NE(op_error({"Split", 18, {{"axis", int64_t{1}}, {"num_outputs", int64_t{4}}}, 4}, {iota({2, 5})})
                .find("into 4 parts"),
            std::string::npos);
}

// ------------------------------------------------------------------ Slice

TEST(ShapeKernels, SliceStepsClampingAndLimits) {
  Tensor x = iota({10});
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  auto slice = [&](int64_t start, int64_t end, int64_t step) {
    return floats(run_op({"Slice", 13}, {x, i64s({start}), i64s({end}), i64s({0}), i64s({step})}));
  };
  EXPECT_EQ(slice(2, 8, 3), (std::vector<float>{2, 5}));
  EXPECT_EQ(slice(-1, kMin, -1), (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(slice(kMax, -11, -4), (std::vector<float>{9, 5, 1}));
  EXPECT_EQ(slice(0, kMax, kMax), (std::vector<float>{0}));
  EXPECT_EQ(slice(9, 0, kMin), (std::vector<float>{9}));
  EXPECT_EQ(slice(-100, 3, 1), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(slice(5, 5, 1), (std::vector<float>{}));
  EXPECT_EQ(slice(3, 7, -1), (std::vector<float>{}));
  EXPECT_EQ(slice(20, 30, 1), (std::vector<float>{}));
  // Opsets before 10 took starts, ends and axes as attributes.
  Tensor m = iota({3, 4});
  expect_floats(run_op({"Slice", 9, {{"starts", Dims{1, -3}}, {"ends", Dims{100, -1}}, {"axes", Dims{0, 1}}}}, {m}),
                {2, 2}, {5, 6, 9, 10});
  expect_floats(run_op({"Slice", 1, {{"starts", Dims{1}}, {"ends", Dims{2}}}}, {m}), {1, 4}, {4, 5, 6, 7});
  // Negative axes, and int32 inputs.
  expect_floats(run_op({"Slice", 13}, {m, i32({1}, {-1}), i32({1}, {-5}), i32({1}, {-1}), i32({1}, {-2})}), {3, 2},
                {3, 1, 7, 5, 11, 9});
}

TEST(ShapeKernels, SliceMatchesNaiveOnA4DTensor) {
  Tensor x = random_floats({5, 6, 7, 9}, 3);
  Dims starts = {-1, 1, 0, 8}, ends = {-100, 5, 7, -100}, axes = {0, 1, 2, 3}, steps = {-2, 3, 1, -3};
  for (int threads : {1, 3}) {
    Tensor y = run_op({"Slice", 13, {}, 1, threads}, {x, i64s(starts), i64s(ends), i64s(axes), i64s(steps)});
    // Selected indices per axis, written out by hand from the slice rules.
    std::vector<Dims> picks = {{4, 2, 0}, {1, 4}, {0, 1, 2, 3, 4, 5, 6}, {8, 5, 2}};
    Dims dims = {3, 2, 7, 3};
    ASSERT_EQ(y.dims(), dims);
    auto vx = x.values<float>(), vy = y.values<float>();
    for_each_index(dims, [&](const Dims& i) {
      Dims src = {picks[0][i[0]], picks[1][i[1]], picks[2][i[2]], picks[3][i[3]]};
      ASSERT_EQ(vy[flat(dims, i)], vx[flat(x.dims(), src)]);
    });
  }
}

TEST(ShapeKernels, SliceErrors) {
  Tensor x = iota({4, 4});
  EXPECT_NE(op_error({"Slice", 13}, {x, i64s({0}), i64s({1}), i64s({0}), i64s({0})}).find("steps cannot be 0"),
            std::string::npos);
  EXPECT_NE(op_error({"Slice", 13}, {x, i64s({0, 0}), i64s({1, 1}), i64s({1, -1})}).find("twice"), std::string::npos);
  EXPECT_NE(op_error({"Slice", 13}, {x, i64s({0, 0}), i64s({1})}).find("different lengths"), std::string::npos);
  EXPECT_NE(op_error({"Slice", 13}, {x, i64s({0}), i64s({1}), i64s({2})}).find("out of range"), std::string::npos);
  EXPECT_NE(op_error({"Slice", 9}, {x}).find("starts and ends attributes are required"), std::string::npos);
}

// ------------------------------------------------------------------ Expand, Tile, DepthToSpace

TEST(ShapeKernels, ExpandBroadcastsBothWays) {
  Tensor x = f32({3, 1}, {1, 2, 3});
  expect_floats(run_op({"Expand", 13}, {x, i64s({2, 1, 2})}), {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  // A shape of lower rank or with 1s keeps the input's sizes.
  expect_floats(run_op({"Expand", 8}, {x, i64s({1})}), {3, 1}, {1, 2, 3});
  expect_floats(run_op({"Expand", 13}, {f32({}, {7}), i64s({2, 2})}), {2, 2}, {7, 7, 7, 7});
  EXPECT_EQ(run_op({"Expand", 13}, {f32({1, 3}, {1, 2, 3}), i64s({0, 1})}).dims(), (Dims{0, 3}));
  EXPECT_NE(op_error({"Expand", 13}, {x, i64s({2, 2})}).find("cannot be broadcast"), std::string::npos);
}

TEST(ShapeKernels, TileRepeatsEveryAxis) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  expect_floats(run_op({"Tile", 13}, {x, i64s({2, 3})}), {4, 6},
                {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  EXPECT_EQ(run_op({"Tile", 6}, {x, i64s({0, 2})}).dims(), (Dims{0, 4}));
  EXPECT_NE(op_error({"Tile", 13}, {x, i64s({2})}).find("does not fit input float[2,2]"), std::string::npos);
  EXPECT_NE(op_error({"Tile", 13}, {x, i64s({2, -1})}).find("negative"), std::string::npos);
}

TEST(ShapeKernels, DepthToSpaceModesAndSpaceToDepthInverse) {
  // Written from the definitions: y[n, c, h*b + i, w*b + j] = x[n, channel(c, i, j), h, w].
  Dims dims = {2, 12, 3, 5};
  int64_t b = 2;
  Tensor x = random_floats(dims, 11);
  for (std::string mode : {"DCR", "CRD"}) {
    Tensor y = run_op({"DepthToSpace", 13, {{"blocksize", b}, {"mode", mode}}}, {x});
    Dims yd = {2, 3, 6, 10};
    ASSERT_EQ(y.dims(), yd);
    auto vx = x.values<float>(), vy = y.values<float>();
    for_each_index(yd, [&](const Dims& o) {
      int64_t i = o[2] % b, j = o[3] % b;
      int64_t channel = mode == "DCR" ? (i * b + j) * 3 + o[1] : o[1] * b * b + i * b + j;
      ASSERT_EQ(vy[flat(yd, o)], vx[flat(dims, {o[0], channel, o[2] / b, o[3] / b})]);
    });
    if (mode == "DCR") {
      Tensor back = run_op({"SpaceToDepth", 13, {{"blocksize", b}}}, {y});
      expect_same(back, x);
    }
  }
  // Opset 1 had DCR only; the mode attribute is ignored there.
  expect_same(run_op({"DepthToSpace", 1, {{"blocksize", b}}}, {x}),
              run_op({"DepthToSpace", 13, {{"blocksize", b}}}, {x}));
  EXPECT_NE(op_error({"DepthToSpace", 13, {{"blocksize", int64_t{5}}}}, {x}).find("multiple of blocksize^2 = 25"),
            std::string::npos);
  EXPECT_NE(
      op_error({"DepthToSpace", 13, {{"blocksize", int64_t{2}}, {"mode", std::string("XYZ")}}}, {x}).find("mode 'XYZ'"),
      std::string::npos);
  EXPECT_NE(op_error({"SpaceToDepth", 13, {{"blocksize", int64_t{2}}}}, {x}).find("multiples of blocksize 2"),
            std::string::npos);
  EXPECT_NE(op_error({"SpaceToDepth", 13}, {x}).find("blocksize must be positive"), std::string::npos);
}

// ------------------------------------------------------------------ Pad

TEST(ShapeKernels, PadModesAgainstNumPy) {
  Tensor x = f32({3}, {1, 2, 3});
  auto pad = [&](const std::string& mode, int64_t before, int64_t after) {
    return floats(run_op({"Pad", 19, {{"mode", mode}}}, {x, i64s({before, after})}));
  };
  // numpy.pad([1, 2, 3], (5, 5), "reflect") and so on.
  EXPECT_EQ(pad("reflect", 5, 5), (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(pad("wrap", 5, 4), (std::vector<float>{2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(pad("edge", 2, 2), (std::vector<float>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(pad("constant", 1, 2), (std::vector<float>{0, 1, 2, 3, 0, 0}));
  // Negative pads crop first; the mode then pads what is left.
  EXPECT_EQ(pad("constant", -1, 1), (std::vector<float>{2, 3, 0}));
  EXPECT_EQ(pad("edge", -2, 2), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(pad("reflect", 1, -1), (std::vector<float>{2, 1, 2}));
  EXPECT_EQ(floats(run_op({"Pad", 19, {{"mode", std::string("reflect")}}}, {f32({1}, {7}), i64s({2, 2})})),
            (std::vector<float>{7, 7, 7, 7, 7}));
}

TEST(ShapeKernels, PadConstantValueAxesAndOpsets) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  expect_floats(run_op({"Pad", 13}, {x, i64s({0, 1, 1, 0}), f32({}, {9})}), {3, 3}, {9, 1, 2, 9, 3, 4, 9, 9, 9});
  // Opset 2 took pads and value as attributes.
  expect_floats(run_op({"Pad", 2, {{"pads", Dims{1, 0, 0, 0}}, {"value", 5.0f}}}, {x}), {3, 2}, {5, 5, 1, 2, 3, 4});
  // Opset 18: axes name the padded axes; pads hold begins then ends.
  expect_floats(run_op({"Pad", 18}, {x, i64s({1, 2}), std::nullopt, i64s({-1})}), {2, 5},
                {0, 1, 2, 0, 0, 0, 3, 4, 0, 0});
  Tensor ints = i32({2, 2}, {1, 2, 3, 4});
  Tensor pi = run_op({"Pad", 13, {{"mode", std::string("edge")}}}, {ints, i64s({1, 0, 0, 1})});
  EXPECT_EQ(std::vector<int32_t>(pi.values<int32_t>().begin(), pi.values<int32_t>().end()),
            (std::vector<int32_t>{1, 2, 2, 1, 2, 2, 3, 4, 4}));
  Tensor s =
      run_op({"Pad", 13}, {Tensor::from_strings({2}, {"a", "b"}), i64s({1, 1}), Tensor::from_strings({}, {"z"})});
  EXPECT_EQ(s.string_values(), (std::vector<std::string>{"z", "a", "b", "z"}));
  EXPECT_NE(op_error({"Pad", 18, {{"mode", std::string("wrap")}}}, {x, i64s({0, 0, 0, 0})}).find("mode 'wrap'"),
            std::string::npos);
  EXPECT_NE(op_error({"Pad", 13}, {x, i64s({1, 1})}).find("should have 4 values"), std::string::npos);
  EXPECT_NE(op_error({"Pad", 13}, {x, i64s({0, -3, 0, 0})}).find("crop more than axis 1"), std::string::npos);
  EXPECT_NE(
      op_error({"Pad", 13, {{"mode", std::string("edge")}}}, {Tensor(DataType::Float, {0, 2}), i64s({1, 0, 0, 0})})
          .find("nothing is left to repeat"),
      std::string::npos);
  EXPECT_NE(op_error({"Pad", 13}, {x, i64s({1, 1, 1, 1}), Tensor::from_values<double>({}, std::vector<double>{1})})
                .find("not of the input's type"),
            std::string::npos);
}

TEST(ShapeKernels, PadMatchesNaiveOn4DWithThreads) {
  Dims dims = {2, 3, 17, 13};
  Tensor x = random_floats(dims, 21);
  Dims pads = {0, 1, 2, -3, 1, 0, 5, 4};  // begins then ends
  for (std::string mode : {"constant", "edge", "reflect", "wrap"})
    for (int threads : {1, 4}) {
      Tensor y = run_op({"Pad", 19, {{"mode", mode}}, 1, threads}, {x, i64s(pads), f32({}, {-1})});
      Dims yd = {3, 4, 24, 14};
      ASSERT_EQ(y.dims(), yd);
      auto vx = x.values<float>(), vy = y.values<float>();
      for_each_index(yd, [&](const Dims& o) {
        Dims src(4);
        bool constant = false;
        for (int a = 0; a < 4; ++a) {
          int64_t crop = std::max<int64_t>(-pads[a], 0), kept = dims[a] - crop - std::max<int64_t>(-pads[a + 4], 0);
          int64_t j = o[a] - std::max<int64_t>(pads[a], 0);
          if (j < 0 || j >= kept) {
            if (mode == "constant") constant = true;
            else if (mode == "edge") j = j < 0 ? 0 : kept - 1;
            else if (mode == "wrap") j = ((j % kept) + kept) % kept;
            else {  // reflect, stepping back and forth
              while (j < 0 || j >= kept) j = j < 0 ? -j : 2 * (kept - 1) - j;
            }
          }
          src[a] = j + crop;
        }
        float expected = constant ? -1.0f : vx[flat(dims, src)];
        ASSERT_EQ(vy[flat(yd, o)], expected) << mode;
      });
    }
}

// ------------------------------------------------------------------ gathers and scatters

TEST(ShapeKernels, GatherAxesIndicesAndErrors) {
  Tensor x = iota({3, 4});
  expect_floats(run_op({"Gather", 13, {{"axis", int64_t{1}}}}, {x, i64({2, 2}, {0, -1, 3, 1})}), {3, 2, 2},
                {0, 3, 3, 1, 4, 7, 7, 5, 8, 11, 11, 9});
  expect_floats(run_op({"Gather", 13, {{"axis", int64_t{-2}}}}, {x, i32({}, {-1})}), {4}, {8, 9, 10, 11});
  expect_floats(run_op({"Gather", 1}, {x, i64({0}, {})}), {0, 4}, {});
  Tensor s = run_op({"Gather", 13}, {Tensor::from_strings({3}, {"a", "b", "c"}), i64s({2, 0, 2})});
  EXPECT_EQ(s.string_values(), (std::vector<std::string>{"c", "a", "c"}));
  EXPECT_NE(op_error({"Gather", 13}, {x, i64s({3})}).find("index 3 is out of range for a dimension of size 3"),
            std::string::npos);
  EXPECT_NE(op_error({"Gather", 13}, {x, i64s({-4})}).find("index -4 is out of range"), std::string::npos);
  EXPECT_NE(op_error({"Gather", 13}, {x, f32({1}, {0})}).find("must be int32 or int64"), std::string::npos);
}

TEST(ShapeKernels, GatherElementsAndGatherND) {
  Tensor x = iota({2, 3});
  expect_floats(run_op({"GatherElements", 13, {{"axis", int64_t{-1}}}}, {x, i64({2, 2}, {2, -3, 1, 1})}), {2, 2},
                {2, 0, 4, 4});
  EXPECT_NE(op_error({"GatherElements", 13}, {x, i64({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0})}).find("do not fit data"),
            std::string::npos);
  EXPECT_NE(op_error({"GatherElements", 13}, {x, i64({1, 1}, {2})}).find("index 2 is out of range"), std::string::npos);

  Tensor d = iota({2, 3, 4});
  // Full tuples pick elements; batch_dims 1 indexes inside each batch.
  expect_floats(run_op({"GatherND", 13}, {d, i64({2, 3}, {1, 2, 3, 0, -1, 0})}), {2}, {23, 8});
  expect_floats(run_op({"GatherND", 13, {{"batch_dims", int64_t{1}}}}, {d, i64({2, 1, 1}, {2, 0})}), {2, 1, 4},
                {8, 9, 10, 11, 12, 13, 14, 15});
  expect_floats(run_op({"GatherND", 12, {{"batch_dims", int64_t{2}}}}, {d, i64({2, 3, 1}, {0, 1, 2, 3, 2, 1})}), {2, 3},
                {0, 5, 10, 15, 18, 21});
  EXPECT_NE(op_error({"GatherND", 13}, {d, i64({1, 4}, {0, 0, 0, 0})}).find("do not address data"), std::string::npos);
  EXPECT_NE(
      op_error({"GatherND", 13, {{"batch_dims", int64_t{1}}}}, {d, i64({3, 1}, {0, 0, 0})}).find("batch dimensions"),
      std::string::npos);
}

TEST(ShapeKernels, ScatterReductionsAcrossOpsets) {
  Tensor data = f32({4}, {1, 2, 3, 4});
  Tensor idx = i64({3, 1}, {1, 1, -1});
  Tensor upd = f32({3}, {10, 20, 5});
  expect_floats(run_op({"ScatterND", 16, {{"reduction", std::string("add")}}}, {data, idx, upd}), {4}, {1, 32, 3, 9});
  expect_floats(run_op({"ScatterND", 16, {{"reduction", std::string("mul")}}}, {data, idx, upd}), {4}, {1, 400, 3, 20});
  expect_floats(run_op({"ScatterND", 18, {{"reduction", std::string("max")}}}, {data, idx, upd}), {4}, {1, 20, 3, 5});
  expect_floats(run_op({"ScatterND", 18, {{"reduction", std::string("min")}}}, {data, idx, upd}), {4}, {1, 2, 3, 4});
  EXPECT_NE(op_error({"ScatterND", 16, {{"reduction", std::string("max")}}}, {data, idx, upd}).find("reduction 'max'"),
            std::string::npos);
  // Before opset 16 there is no reduction: the attribute is not read.
  expect_floats(run_op({"ScatterND", 13}, {data, i64({1, 1}, {2}), f32({1}, {7})}), {4}, {1, 2, 7, 4});
  // Slices: index tuples shorter than the rank replace whole rows.
  expect_floats(run_op({"ScatterND", 13}, {iota({2, 2}), i64({1, 1}, {1}), f32({1, 2}, {8, 9})}), {2, 2}, {0, 1, 8, 9});
  EXPECT_NE(op_error({"ScatterND", 13}, {data, idx, f32({2}, {1, 2})}).find("should have shape [3]"),
            std::string::npos);

  // float16 reductions go through float.
  auto half = [](std::vector<float> v) {
    std::vector<uint16_t> h;
    for (float f : v) h.push_back(ir::float_to_half(f));
    Tensor t = Tensor::from_values<uint16_t>({static_cast<int64_t>(h.size())}, h);
    return Tensor(DataType::Float16, t.dims(), t.bytes());
  };
  Tensor hr = run_op({"ScatterElements", 16, {{"reduction", std::string("add")}}},
                     {half({1, 2}), i64s({0, 0}), half({0.5f, 0.25f})});
  EXPECT_EQ(hr.dtype(), DataType::Float16);
  EXPECT_EQ(ir::half_to_float(hr.values<uint16_t>()[0]), 1.75f);

  Tensor m = iota({2, 3});
  expect_floats(run_op({"ScatterElements", 18, {{"axis", int64_t{1}}, {"reduction", std::string("mul")}}},
                       {m, i64({2, 2}, {-1, 0, 1, 1}), f32({2, 2}, {2, 3, 4, 5})}),
                {2, 3}, {0, 1, 4, 3, 80, 5});
  expect_floats(run_op({"Scatter", 10, {{"axis", int64_t{0}}}}, {m, i64({1, 3}, {1, 0, 1}), f32({1, 3}, {7, 8, 9})}),
                {2, 3}, {0, 8, 2, 7, 4, 9});
  EXPECT_NE(op_error({"ScatterElements", 16, {{"reduction", std::string("add")}}},
                     {Tensor::from_strings({1}, {"a"}), i64s({0}), Tensor::from_strings({1}, {"b"})})
                .find("cannot reduce string"),
            std::string::npos);
  Tensor ss = run_op({"ScatterElements", 13},
                     {Tensor::from_strings({2}, {"a", "b"}), i64s({1}), Tensor::from_strings({1}, {"z"})});
  EXPECT_EQ(ss.string_values(), (std::vector<std::string>{"a", "z"}));
  EXPECT_NE(op_error({"ScatterElements", 13}, {m, i64({1, 1}, {3}), f32({1, 1}, {1})}).find("out of range"),
            std::string::npos);
  EXPECT_NE(op_error({"ScatterElements", 13}, {m, i64({1, 1}, {0}), f32({1, 2}, {1, 2})}).find("differ in shape"),
            std::string::npos);
}

TEST(ShapeKernels, CompressNonZeroReverseSequence) {
  Tensor x = iota({2, 3});
  auto bools = [](std::vector<uint8_t> v) {
    Tensor t = Tensor::from_values<uint8_t>({static_cast<int64_t>(v.size())}, v);
    return Tensor(DataType::Bool, t.dims(), t.bytes());
  };
  expect_floats(run_op({"Compress", 11}, {x, bools({0, 1, 0, 1})}), {2}, {1, 3});             // flattened
  expect_floats(run_op({"Compress", 11, {{"axis", int64_t{-1}}}}, {x, bools({1, 0})}), {2, 1}, {0, 3});  // shorter
  expect_floats(run_op({"Compress", 9, {{"axis", int64_t{1}}}}, {x, bools({1, 0, 1, 0})}), {2, 2}, {0, 2, 3, 5});
  EXPECT_NE(op_error({"Compress", 11, {{"axis", int64_t{0}}}}, {x, bools({0, 0, 1})}).find("past the axis size 2"),
            std::string::npos);

  // -0.0 is zero, NaN is not.
  Tensor nz = run_op({"NonZero", 13}, {f32({2, 3}, {0, -0.0f, std::nanf(""), 1, 0, -2})});
  EXPECT_EQ(nz.dims(), (Dims{2, 3}));
  EXPECT_EQ(ints(nz), (Dims{0, 1, 1, 2, 0, 2}));
  EXPECT_EQ(ints(run_op({"NonZero", 13}, {i32({}, {5})})), (Dims{0}));
  EXPECT_EQ(run_op({"NonZero", 9}, {i32({}, {0})}).dims(), (Dims{1, 0}));
  EXPECT_EQ(run_op({"NonZero", 13}, {Tensor(DataType::Float, {0, 3})}).dims(), (Dims{2, 0}));

  Tensor seq = iota({3, 4, 2});  // [batch, time, feature]
  expect_floats(
      run_op({"ReverseSequence", 10, {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}}}, {seq, i64s({4, 0, 2})}),
      {3, 4, 2}, {6, 7, 4, 5, 2, 3, 0, 1, 8, 9, 10, 11, 12, 13, 14, 15, 18, 19, 16, 17, 20, 21, 22, 23});
  EXPECT_NE(
      op_error({"ReverseSequence", 10, {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}}}, {seq, i64s({5, 0, 2})})
          .find("outside [0, 4]"),
      std::string::npos);
  EXPECT_NE(op_error({"ReverseSequence", 10, {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{1}}}}, {seq, i64s({1})})
                .find("must be 0 and 1"),
            std::string::npos);
}

// ------------------------------------------------------------------ generators

TEST(ShapeKernels, ConstantOfShapeRangeEyeLike) {
  Tensor c = run_op({"ConstantOfShape", 9, {{"value", i64({1}, {7})}}}, {i64s({2, 2})});
  EXPECT_EQ(c.dtype(), DataType::Int64);
  EXPECT_EQ(ints(c), (Dims{7, 7, 7, 7}));
  expect_floats(run_op({"ConstantOfShape", 9}, {i64({0}, {})}), {}, {0});  // an empty shape: a scalar
  EXPECT_EQ(run_op({"ConstantOfShape", 20}, {i64s({3, 0})}).dims(), (Dims{3, 0}));
  EXPECT_NE(op_error({"ConstantOfShape", 9}, {i64s({-1})}).find("negative"), std::string::npos);

  expect_floats(run_op({"Range", 11}, {f32({}, {1}), f32({}, {-1}), f32({}, {-0.5f})}), {4}, {1, 0.5f, 0, -0.5f});
  expect_floats(run_op({"Range", 11}, {f32({}, {3}), f32({}, {1}), f32({}, {1})}), {0}, {});
  constexpr int64_t kBig = int64_t{1} << 62;
  EXPECT_EQ(ints(run_op({"Range", 11}, {i64({}, {-kBig}), i64({}, {kBig}), i64({}, {kBig})})), (Dims{-kBig, 0}));
  EXPECT_EQ(ints(run_op({"Range", 11}, {i64({}, {10}), i64({}, {0}), i64({}, {-3})})), (Dims{10, 7, 4, 1}));
  EXPECT_NE(op_error({"Range", 11}, {i64({}, {0}), i64({}, {1}), i64({}, {0})}).find("delta cannot be 0"),
            std::string::npos);
  EXPECT_NE(op_error({"Range", 11}, {i64({}, {0}), i32({}, {1}), i64({}, {1})}).find("single values of one type"),
            std::string::npos);

  expect_floats(run_op({"EyeLike", 9, {{"k", int64_t{-1}}}}, {Tensor(DataType::Float, {3, 2})}), {3, 2},
                {0, 0, 1, 0, 0, 1});
  Tensor e = run_op({"EyeLike", 9, {{"dtype", int64_t{7}}, {"k", int64_t{5}}}}, {Tensor(DataType::Float, {2, 3})});
  EXPECT_EQ(e.dtype(), DataType::Int64);
  EXPECT_EQ(ints(e), (Dims{0, 0, 0, 0, 0, 0}));
  EXPECT_NE(op_error({"EyeLike", 9}, {iota({2})}).find("must be 2-D"), std::string::npos);
}

TEST(ShapeKernels, TriluBatchesAndExtremeK) {
  Tensor x = iota({2, 3, 4});
  auto trilu = [&](int64_t upper, std::optional<int64_t> k) {
    std::vector<std::optional<Tensor>> in = {x};
    if (k) in.push_back(i64({}, {*k}));
    Tensor y = run_op({"Trilu", 14, {{"upper", upper}}}, in);
    std::vector<float> expected;
    for_each_index(x.dims(), [&](const Dims& i) {
      int64_t d = i[2] - i[1], kk = k.value_or(0);
      bool keep = upper ? d >= kk : d <= kk;
      expected.push_back(keep ? static_cast<float>(flat(x.dims(), i)) : 0.0f);
    });
    expect_floats(y, x.dims(), expected);
  };
  for (int64_t upper : {0, 1})
    for (std::optional<int64_t> k : std::vector<std::optional<int64_t>>{std::nullopt, -2, 1, 3, 100, -100,
                                                                        std::numeric_limits<int64_t>::max(),
                                                                        std::numeric_limits<int64_t>::min()})
      trilu(upper, k);
  EXPECT_NE(op_error({"Trilu", 14}, {iota({3})}).find("at least 2 dimensions"), std::string::npos);
}

TEST(ShapeKernels, OneHotDepthsAxesAndOutOfRange) {
  Tensor values = f32({2}, {-1, 5});
  expect_floats(run_op({"OneHot", 11, {{"axis", int64_t{0}}}}, {i64s({0, -1, 3, -4}), f32({}, {3.7f}), values}), {3, 4},
                {5, -1, -1, -1, -1, -1, -1, -1, -1, 5, -1, -1});
  expect_floats(run_op({"OneHot", 11}, {f32({2}, {1.9f, 0}), i32({1}, {2}), values}), {2, 2}, {-1, 5, 5, -1});
  EXPECT_NE(op_error({"OneHot", 11}, {i64s({0}), i64s({2, 2}), values}).find("depth must be a single value"),
            std::string::npos);
  EXPECT_NE(op_error({"OneHot", 11}, {i64s({0}), i64({}, {2}), f32({3}, {1, 2, 3})}).find("[off, on]"),
            std::string::npos);
}

TEST(ShapeKernels, OutputsTooLargeOrNegativeAreRefused) {
  constexpr int64_t kHuge = int64_t{1} << 40;
  Tensor x = iota({2, 2});
  EXPECT_NE(op_error({"Tile", 13}, {x, i64s({kHuge, kHuge})}).find("too large"), std::string::npos);
  EXPECT_NE(op_error({"Expand", 13}, {f32({1}, {1}), i64s({-1})}).find("negative size"), std::string::npos);
  EXPECT_NE(op_error({"ConstantOfShape", 9}, {i64s({kHuge, kHuge})}).find("too large"), std::string::npos);
  EXPECT_NE(op_error({"Pad", 13}, {x, i64s({kHuge, kHuge, kHuge, kHuge})}).find("too large"), std::string::npos);
  EXPECT_NE(op_error({"OneHot", 11}, {i64({2, 2}, {0, 0, 0, 0}), i64({}, {kHuge * 1024}), f32({2}, {0, 1})})
                .find("too large"),
            std::string::npos);
  EXPECT_NE(op_error({"Range", 11}, {f32({}, {0}), f32({}, {1e20f}), f32({}, {1e-3f})}).find("too many values"),
            std::string::npos);
  EXPECT_NE(op_error({"Reshape", 13}, {x, i64s({kHuge, kHuge, 0})}).find("too large"), std::string::npos);
  EXPECT_NE(op_error({"Resize", 13}, {x, std::nullopt, f32({2}, {1e30f, 1})}).find("too large"), std::string::npos);
  EXPECT_NE(op_error({"Resize", 13}, {x, std::nullopt, std::nullopt, i64s({kHuge, kHuge})}).find("too large"),
            std::string::npos);
}

// ------------------------------------------------------------------ Resize and Upsample

Op resize(int64_t opset, std::vector<Attr> attrs) { return {"Resize", opset, std::move(attrs)}; }

TEST(ShapeKernels, ResizeNearestAndLinearClosedForms) {
  // Upsampling by 2 with asymmetric floor repeats every element twice along each axis.
  Tensor x = random_floats({2, 3, 5, 7}, 5);
  for (int threads : {1, 4}) {
    Op op = resize(13, {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                        {"nearest_mode", std::string("floor")}});
    op.threads = threads;
    Tensor y = run_op(op, {x, std::nullopt, f32({4}, {1, 1, 2, 2})});
    Dims yd = {2, 3, 10, 14};
    ASSERT_EQ(y.dims(), yd);
    auto vx = x.values<float>(), vy = y.values<float>();
    for_each_index(yd, [&](const Dims& o) {
      ASSERT_EQ(vy[flat(yd, o)], vx[flat(x.dims(), {o[0], o[1], o[2] / 2, o[3] / 2})]);
    });
  }
  // half_pixel linear x2 on [1, 2, 3, 4]: edges clamp, inner points at quarter steps.
  expect_floats(
      run_op(resize(13, {{"mode", std::string("linear")}}), {f32({4}, {1, 2, 3, 4}), std::nullopt, f32({1}, {2})}), {8},
      {1, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f, 4});
  // Scale 1 on every axis is the input itself.
  Tensor same = run_op(resize(13, {{"mode", std::string("linear")}}), {x, std::nullopt, f32({4}, {1, 1, 1, 1})});
  EXPECT_TRUE(same.bytes().same_storage(x.bytes()));
}

TEST(ShapeKernels, ResizeAntialias) {
  // Linear, scale 0.5 on [1, 2, 3, 4] (half_pixel): output 0 sits at 0.5, the filter is a triangle
  // twice as wide: taps -1, 0, 1, 2 (the -1 clamped to 0) weigh 1/8, 3/8, 3/8, 1/8:
  // 1/8 + 3/8 + 2*3/8 + 3/8 = 1.625; output 1 at 2.5: 2/8 + 9/8 + 12/8 + 4/8 = 3.375.
  expect_floats(run_op(resize(18, {{"mode", std::string("linear")}, {"antialias", int64_t{1}}}),
                       {f32({4}, {1, 2, 3, 4}), std::nullopt, f32({1}, {0.5f})}),
                {2}, {1.625f, 3.375f});
  Tensor x = iota({1, 1, 4, 4});
  for (float& v : x.mutable_values<float>()) v += 1;
  expect_floats(run_op(resize(18, {{"mode", std::string("cubic")}, {"antialias", int64_t{1}}}),
                       {x, std::nullopt, f32({4}, {1, 1, 0.6f, 0.6f})}),
                {1, 1, 2, 2}, {2.5180721282958984f, 4.285886287689209f, 9.58932876586914f, 11.357142448425293f});
  expect_floats(run_op(resize(18, {{"mode", std::string("linear")}, {"antialias", int64_t{1}}}),
                       {x, std::nullopt, std::nullopt, i64s({1, 1, 3, 2})}),
                {1, 1, 3, 2},
                {2.715909004211426f, 4.465909004211426f, 7.625f, 9.375f, 12.534090995788574f, 14.284090995788574f});
  // Antialias has no effect when growing.
  expect_same(run_op(resize(18, {{"mode", std::string("linear")}, {"antialias", int64_t{1}}}),
                     {x, std::nullopt, f32({4}, {1, 1, 2, 3})}),
              run_op(resize(18, {{"mode", std::string("linear")}}), {x, std::nullopt, f32({4}, {1, 1, 2, 3})}));
}

// Expected values here and in ResizeAntialias come from the algorithm of ONNX's reference
// implementation (onnx/reference/ops/op_resize.py: n nearest neighbours over an edge-padded
// axis, one axis at a time) transcribed to NumPy, with the spec's coordinate 0 for a
// pytorch_half_pixel output of length 1 (the reference uses -0.5; ONNX Runtime uses 0).
TEST(ShapeKernels, ResizeCoordinateModesAgainstTheReference) {
  Tensor x = iota({1, 1, 4, 4});
  for (float& v : x.mutable_values<float>()) v += 1;
  expect_floats(run_op(resize(19, {{"mode", std::string("linear")},
                                   {"coordinate_transformation_mode", std::string("half_pixel_symmetric")}}),
                       {f32({1, 1, 2, 3}, {1, 2, 4, 3, 7, 5}), std::nullopt, f32({4}, {1, 1, 1.5f, 1.7f})}),
                {1, 1, 3, 5},
                {1.0f, 1.4117647409439087f, 2.0f, 3.1764705181121826f, 4.0f, 2.0f, 3.029411792755127f, 4.5f, 4.5f, 4.5f,
                 3.0f, 4.647058963775635f, 7.0f, 5.823529243469238f, 5.0f});
  // tf_crop_and_resize with scales, axes in reverse order and an extrapolation value.
  expect_floats(
      run_op(resize(18, {{"mode", std::string("linear")},
                         {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                         {"axes", Dims{3, 2}},
                         {"extrapolation_value", -1.0f}}),
             {x, f32({4}, {0.2f, 0.3f, 0.9f, 1.1f}), f32({2}, {0.8f, 1.4f})}),
      {1, 1, 5, 3},
      {5.200000286102295f, 6.154545783996582f, 7.109090805053711f, 7.286956787109375f, 8.241501808166504f,
       9.19604778289795f, 9.373913764953613f, 10.328458786010742f, 11.283003807067871f, 11.460869789123535f,
       12.41541576385498f, 13.36996078491211f, 13.547826766967773f, 14.502371788024902f, 15.456917762756348f});
  expect_floats(run_op(resize(13, {{"mode", std::string("cubic")},
                                   {"cubic_coeff_a", -0.5f},
                                   {"exclude_outside", int64_t{1}},
                                   {"coordinate_transformation_mode", std::string("align_corners")}}),
                       {x, std::nullopt, std::nullopt, i64s({1, 1, 3, 5})}),
                {1, 1, 3, 5},
                {1.0f, 1.7099236249923706f, 2.5f, 3.29007625579834f, 4.0f, 7.0f, 7.70992374420166f, 8.5f,
                 9.29007625579834f, 10.0f, 13.0f, 13.70992374420166f, 14.5f, 15.29007625579834f, 16.0f});
  expect_floats(run_op(resize(11, {{"mode", std::string("nearest")},
                                   {"coordinate_transformation_mode", std::string("tf_half_pixel_for_nn")},
                                   {"nearest_mode", std::string("round_prefer_ceil")}}),
                       {x, f32({0}, {}), f32({4}, {1, 1, 0.75f, 1.5f})}),
                {1, 1, 3, 6}, {5, 6, 7, 7, 8, 8, 9, 10, 11, 11, 12, 12, 13, 14, 15, 15, 16, 16});
  // pytorch_half_pixel maps an output of length 1 to coordinate 0.
  expect_floats(run_op(resize(13, {{"mode", std::string("cubic")},
                                   {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}}),
                       {x, std::nullopt, std::nullopt, i64s({1, 1, 1, 3})}),
                {1, 1, 1, 3}, {1.1261574029922485f, 2.5f, 3.873842477798462f});
}

TEST(ShapeKernels, ResizeAxesAndKeepAspectRatio) {
  Tensor x = iota({1, 2, 3, 5});
  // not_larger: one scale min(4/3, 4/5) = 0.8 for both axes: [3, 5] -> [2, 4].
  expect_floats(run_op(resize(18, {{"mode", std::string("nearest")},
                                   {"axes", Dims{2, 3}},
                                   {"keep_aspect_ratio_policy", std::string("not_larger")}}),
                       {x, std::nullopt, std::nullopt, i64s({4, 4})}),
                {1, 2, 2, 4}, {0, 1, 3, 4, 5, 6, 8, 9, 15, 16, 18, 19, 20, 21, 23, 24});
  // not_smaller: max(4/3, 4/5) = 4/3: [3, 5] -> [4, 7].
  Tensor y = run_op(resize(18, {{"mode", std::string("linear")},
                                {"axes", Dims{-2, -1}},
                                {"keep_aspect_ratio_policy", std::string("not_smaller")}}),
                    {x, std::nullopt, std::nullopt, i64s({4, 4})});
  ASSERT_EQ(y.dims(), (Dims{1, 2, 4, 7}));
  EXPECT_EQ(floats(y)[1], 0.625f);
  EXPECT_EQ(floats(y)[55], 29.0f);
  EXPECT_NE(op_error(resize(18, {{"axes", Dims{2, 2}}}), {x, std::nullopt, f32({2}, {2, 2})}).find("twice"),
            std::string::npos);
  EXPECT_NE(op_error(resize(18, {{"axes", Dims{2, 3}}}), {x, std::nullopt, f32({4}, {1, 1, 2, 2})})
                .find("scales has 4 values for 2 axes"),
            std::string::npos);
}

TEST(ShapeKernels, ResizeOpset10AndUpsampleUseTheOldNearestRule) {
  // No nearest_mode before opset 11: asymmetric coordinates, ceil when shrinking, truncate when growing.
  Tensor x = f32({1, 4}, {1, 2, 3, 4});
  expect_floats(run_op(resize(10, {{"mode", std::string("nearest")}}), {x, f32({2}, {1, 0.6f})}), {1, 2}, {1, 3});
  expect_floats(run_op(resize(10, {{"mode", std::string("nearest")}}), {x, f32({2}, {1, 1.5f})}), {1, 6},
                {1, 1, 2, 3, 3, 4});
  expect_floats(run_op(resize(10, {{"mode", std::string("linear")}}), {x, f32({2}, {1, 2})}), {1, 8},
                {1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4});
  expect_floats(run_op({"Upsample", 7, {{"scales", std::vector<float>{1, 2}}}}, {x}), {1, 8}, {1, 1, 2, 2, 3, 3, 4, 4});
  expect_floats(run_op({"Upsample", 9, {{"mode", std::string("linear")}}}, {x, f32({2}, {2, 1})}), {2, 4},
                {1, 2, 3, 4, 1, 2, 3, 4});
  EXPECT_NE(op_error({"Upsample", 7}, {x}).find("scales attribute is required"), std::string::npos);
  EXPECT_NE(op_error(resize(10, {{"mode", std::string("cubic")}}), {x, f32({2}, {1, 2})}).find("mode 'cubic'"),
            std::string::npos);
}

TEST(ShapeKernels, ResizeTypesAndErrors) {
  // Nearest moves any type; linear rounds integers.
  Tensor s = run_op(resize(13, {{"mode", std::string("nearest")}}),
                    {Tensor::from_strings({2}, {"a", "b"}), std::nullopt, f32({1}, {2})});
  EXPECT_EQ(s.string_values(), (std::vector<std::string>{"a", "a", "b", "b"}));
  Tensor u8 = Tensor::from_values<uint8_t>({3}, std::vector<uint8_t>{0, 255, 10});
  Tensor r = run_op(
      resize(13, {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}}),
      {u8, std::nullopt, std::nullopt, i64s({5})});
  EXPECT_EQ(std::vector<uint8_t>(r.values<uint8_t>().begin(), r.values<uint8_t>().end()),
            (std::vector<uint8_t>{0, 128, 255, 132, 10}));
  Tensor x = iota({2, 2});
  EXPECT_NE(op_error(resize(13, {}), {x, std::nullopt, f32({2}, {2, 2}), i64s({4, 4})}).find("cannot both be given"),
            std::string::npos);
  EXPECT_NE(op_error(resize(13, {}), {x}).find("neither scales nor sizes"), std::string::npos);
  EXPECT_NE(op_error(resize(13, {}), {x, std::nullopt, f32({2}, {2, -1})}).find("not a positive number"),
            std::string::npos);
  EXPECT_NE(
      op_error(resize(13, {{"mode", std::string("area")}}), {x, std::nullopt, f32({2}, {2, 2})}).find("mode 'area'"),
      std::string::npos);
  EXPECT_NE(op_error(resize(13, {{"coordinate_transformation_mode", std::string("middle")}}),
                     {x, std::nullopt, f32({2}, {2, 2})})
                .find("coordinate_transformation_mode 'middle'"),
            std::string::npos);
  EXPECT_NE(op_error(resize(13, {{"nearest_mode", std::string("up")}}), {x, std::nullopt, f32({2}, {2, 2})})
                .find("nearest_mode 'up'"),
            std::string::npos);
  EXPECT_NE(
      op_error(resize(18, {{"keep_aspect_ratio_policy", std::string("fit")}}), {x, std::nullopt, f32({2}, {2, 2})})
          .find("keep_aspect_ratio_policy 'fit'"),
      std::string::npos);
  EXPECT_EQ(run_op(resize(13, {}), {Tensor(DataType::Float, {0, 2}), std::nullopt, f32({2}, {2, 2})}).dims(),
            (Dims{0, 4}));
}

TEST(ShapeKernels, ResizeLinearMatchesNaiveBilinearWithThreads) {
  // Bilinear half_pixel on NCHW, against the formula written out per output pixel.
  Dims dims = {1, 3, 13, 17};
  Tensor x = random_floats(dims, 31);
  Dims yd = {1, 3, 29, 8};
  for (int threads : {1, 4}) {
    Op op = resize(13, {{"mode", std::string("linear")}});
    op.threads = threads;
    Tensor y = run_op(op, {x, std::nullopt, std::nullopt, i64s(yd)});
    ASSERT_EQ(y.dims(), yd);
    auto vx = x.values<float>(), vy = y.values<float>();
    auto axis = [](int64_t o, int64_t in, int64_t out, int64_t& i0, int64_t& i1, double& f) {
      double c = std::clamp((o + 0.5) * in / out - 0.5, 0.0, static_cast<double>(in - 1));
      i0 = static_cast<int64_t>(std::floor(c));
      i1 = std::min(i0 + 1, in - 1);
      f = c - i0;
    };
    for_each_index(yd, [&](const Dims& o) {
      int64_t y0, y1, x0, x1;
      double fy, fx;
      axis(o[2], dims[2], yd[2], y0, y1, fy);
      axis(o[3], dims[3], yd[3], x0, x1, fx);
      auto at = [&](int64_t h, int64_t w) { return static_cast<double>(vx[flat(dims, {0, o[1], h, w})]); };
      double expected =
          (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) + fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
      ASSERT_NEAR(vy[flat(yd, o)], expected, 1e-4);
    });
  }
}


// ---- Unique (what the backend tests leave out: strings, NaN, first-occurrence order along an
// axis, the four outputs, a scalar with an axis)

TEST(ShapeKernels, UniqueFlattenedStringsAndNaN) {
  std::vector<Tensor> s = run_all({"Unique", 11, {}, 4}, {Tensor::from_strings({5}, {"b", "a", "b", "c", "a"})});
  EXPECT_EQ(s[0].string_values(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ints(s[1]), (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(ints(s[2]), (std::vector<int64_t>{1, 0, 1, 2, 0}));
  EXPECT_EQ(ints(s[3]), (std::vector<int64_t>{2, 2, 1}));
  // NaNs are one value, sorted last; -0 equals 0 (its first occurrence is kept).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Tensor> f = run_all({"Unique", 11, {}, 4}, {f32({6}, {nan, 1.0f, -0.0f, nan, 0.0f, -2.0f})});
  std::vector<float> y = floats(f[0]);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(y[0], -2.0f);
  EXPECT_TRUE(std::signbit(y[1]) && y[1] == 0.0f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(ints(f[3]), (std::vector<int64_t>{1, 2, 1, 2}));
}

TEST(ShapeKernels, UniqueAlongAnAxisInOrderOfFirstOccurrence) {
  // Columns of [[1, 0, 1, 2], [3, 5, 3, 4]]: (1,3), (0,5), (1,3), (2,4).
  Tensor x = i64({2, 4}, {1, 0, 1, 2, 3, 5, 3, 4});
  std::vector<Tensor> u = run_all({"Unique", 11, {{"axis", int64_t{-1}}, {"sorted", int64_t{0}}}, 4}, {x});
  EXPECT_EQ(u[0].dims(), (Dims{2, 3}));
  EXPECT_EQ(ints(u[0]), (std::vector<int64_t>{1, 0, 2, 3, 5, 4}));
  EXPECT_EQ(ints(u[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(ints(u[2]), (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(ints(u[3]), (std::vector<int64_t>{2, 1, 1}));
  std::vector<Tensor> sorted = run_all({"Unique", 11, {{"axis", int64_t{1}}}, 2}, {x});
  EXPECT_EQ(ints(sorted[0]), (std::vector<int64_t>{0, 1, 2, 5, 3, 4}));
  EXPECT_EQ(ints(sorted[1]), (std::vector<int64_t>{1, 0, 3}));
  EXPECT_NE(op_error({"Unique", 11, {{"axis", int64_t{2}}}}, {x}).find("out of range"), std::string::npos);
  EXPECT_NE(op_error({"Unique", 11, {{"sorted", int64_t{3}}}}, {x}).find("sorted must be 0 or 1"), std::string::npos);
  EXPECT_NE(op_error({"Unique", 11, {{"axis", int64_t{0}}}}, {i64({}, {4})}).find("scalar"), std::string::npos);
}

}  // namespace
}  // namespace onnxptq::engine
