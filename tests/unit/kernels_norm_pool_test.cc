// The norm_pool family on what the ONNX backend tests leave out: pools at odd sizes, in 1-D
// and 3-D, with ceil_mode, dilations, auto_pad, count_include_pad and the Indices output
// against a naive pool written here from the spec; LpPool; global pools with NaN; the
// normalizations (folded and unfolded BatchNormalization, spatial = 0, training mode,
// Instance/Group/Layer/MeanVariance/Lp normalization, LRN) against their formulas in double;
// and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <variant>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;
using Dims = std::vector<int64_t>;
using kernel_test::expect_near_all;
using kernel_test::f32;
using kernel_test::floats;
using kernel_test::kInf;
using kernel_test::kNaN;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::random_f32;
using kernel_test::run_all;
using kernel_test::run_op;

// ---- Pools against a naive pool ----

struct PoolSpec {
  Dims kernel, strides, pads_begin, pads_end, dilations, out;  // out: the expected spatial shape
};

// Max, average (count_include_pad or not) or Lp pool of x (N, C, spatial...) by multi-index.
std::vector<double> naive_pool(const std::string& op, const Tensor& x, const PoolSpec& s, bool include_pad = false, int p = 2) {
  const Dims& d = x.dims();
  const size_t k = s.kernel.size();
  const int64_t planes = d[0] * d[1];
  int64_t in_size = 1, out_size = 1, taps = 1;
  for (size_t i = 0; i < k; ++i) {
    in_size *= d[2 + i];
    out_size *= s.out[i];
    taps *= s.kernel[i];
  }
  auto xv = x.values<float>();
  std::vector<double> y;
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t o = 0; o < out_size; ++o) {
      double best = -INFINITY, sum = 0;
      int64_t valid = 0, padded = 0;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t orest = o, trest = t, offset = 0, stride = 1;
        bool inside = true, inside_padded = true;
        for (size_t i = k; i-- > 0;) {
          const int64_t oi = orest % s.out[i], ti = trest % s.kernel[i];
          orest /= s.out[i];
          trest /= s.kernel[i];
          const int64_t pos = oi * s.strides[i] - s.pads_begin[i] + ti * s.dilations[i];
          inside = inside && pos >= 0 && pos < d[2 + i];
          inside_padded = inside_padded && pos < d[2 + i] + s.pads_end[i];
          offset += pos * stride;
          stride *= d[2 + i];
        }
        padded += inside_padded;
        if (!inside) continue;
        const double v = xv[plane * in_size + offset];
        ++valid;
        best = std::max(best, v);
        sum += op == "LpPool" ? std::pow(std::fabs(v), p) : v;
      }
      if (op == "MaxPool") y.push_back(best);
      else if (op == "AveragePool") y.push_back(sum / static_cast<double>(include_pad ? padded : valid));
      else y.push_back(std::pow(sum, 1.0 / p));
    }
  return y;
}

Op pool_op(const std::string& type, int64_t opset, const PoolSpec& s) {
  Dims pads = s.pads_begin;
  pads.insert(pads.end(), s.pads_end.begin(), s.pads_end.end());
  return {type, opset, {{"kernel_shape", s.kernel}, {"strides", s.strides}, {"pads", pads}, {"dilations", s.dilations}}};
}

TEST(KernelsPool, MaxAndAverageAtOddSizesMatchNaivePool) {
  // 3x3 stride 2 pad 1 on 13x13 (ResNet's MaxPool shape at an odd size): out 7x7.
  const PoolSpec s{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {7, 7}};
  Tensor x = random_f32({2, 3, 13, 13}, 1);
  for (int threads : {1, 3}) {
    Op max = pool_op("MaxPool", 12, s);
    max.threads = threads;
    Tensor y = run_op(max, {x});
    EXPECT_EQ(y.dims(), (Dims{2, 3, 7, 7}));
    expect_near_all(naive_pool("MaxPool", x, s), y);
    for (int64_t include : {0, 1}) {
      Op avg = pool_op("AveragePool", 11, s);
      avg.attrs.push_back({"count_include_pad", include});
      avg.threads = threads;
      expect_near_all(naive_pool("AveragePool", x, s, include != 0), run_op(avg, {x}));
    }
  }
}

TEST(KernelsPool, CeilModeDropsWindowsStartingInThePadding) {
  // 6 wide, kernel 3, stride 2: floor gives 2, ceil gives 3.
  Tensor x = random_f32({1, 1, 6, 6}, 2);
  Op op = pool_op("MaxPool", 12, {{3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, {}});
  op.attrs.push_back({"ceil_mode", int64_t{1}});
  expect_near_all(naive_pool("MaxPool", x, {{3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, {3, 3}}), run_op(op, {x}));
  // 5 wide, kernel 2, stride 2, pads 1 and 1: ceil((5+2-2)/2)+1 = 4, but the 4th window would
  // start at 6 = in the end padding, so 3 remain.
  Tensor x5 = random_f32({1, 2, 5}, 3);
  const PoolSpec s5{{2}, {2}, {1}, {1}, {1}, {3}};
  Op avg = pool_op("AveragePool", 11, s5);
  avg.attrs.push_back({"ceil_mode", int64_t{1}});
  Tensor y = run_op(avg, {x5});
  EXPECT_EQ(y.dims(), (Dims{1, 2, 3}));
  expect_near_all(naive_pool("AveragePool", x5, s5), y);
}

TEST(KernelsPool, DilationsOneAndThreeAxes) {
  Tensor x = random_f32({1, 2, 7, 9}, 4);
  const PoolSpec s{{2, 3}, {1, 2}, {0, 1}, {0, 1}, {2, 2}, {5, 4}};
  expect_near_all(naive_pool("MaxPool", x, s), run_op(pool_op("MaxPool", 12, s), {x}));
  expect_near_all(naive_pool("AveragePool", x, s), run_op(pool_op("AveragePool", 19, s), {x}));
  Tensor x1 = random_f32({2, 3, 11}, 5);
  const PoolSpec s1{{3}, {2}, {1}, {1}, {1}, {6}};
  expect_near_all(naive_pool("MaxPool", x1, s1), run_op(pool_op("MaxPool", 12, s1), {x1}));
  Tensor x3 = random_f32({1, 2, 5, 6, 7}, 6);
  const PoolSpec s3{{2, 3, 2}, {2, 1, 3}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}, {3, 5, 3}};
  expect_near_all(naive_pool("MaxPool", x3, s3), run_op(pool_op("MaxPool", 12, s3), {x3}));
  expect_near_all(naive_pool("AveragePool", x3, s3, true), [&] {
    Op op = pool_op("AveragePool", 11, s3);
    op.attrs.push_back({"count_include_pad", int64_t{1}});
    return run_op(op, {x3});
  }());
}

TEST(KernelsPool, AutoPadSameAndValid) {
  Tensor x = random_f32({1, 1, 5, 6}, 7);
  // SAME: out = ceil(in / stride) = 3 x 3; total pad = (3-1)*2 + 3 - in = 2 and 1.
  Op upper{"AveragePool", 11, {{"kernel_shape", Dims{3, 3}}, {"strides", Dims{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}};
  expect_near_all(naive_pool("AveragePool", x, {{3, 3}, {2, 2}, {1, 0}, {1, 1}, {1, 1}, {3, 3}}), run_op(upper, {x}));
  Op lower{"MaxPool", 12, {{"kernel_shape", Dims{3, 3}}, {"strides", Dims{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}};
  expect_near_all(naive_pool("MaxPool", x, {{3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 1}, {3, 3}}), run_op(lower, {x}));
  Op valid{"MaxPool", 12, {{"kernel_shape", Dims{3, 3}}, {"strides", Dims{2, 2}}, {"auto_pad", std::string("VALID")}}};
  expect_near_all(naive_pool("MaxPool", x, {{3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, {2, 2}}), run_op(valid, {x}));
}

TEST(KernelsPool, MaxPoolIndicesInBothStorageOrders) {
  const Dims dims = {2, 3, 5, 7};
  Tensor x = random_f32(dims, 8);
  auto xv = floats(x);
  for (int64_t order : {0, 1}) {
    Op op = pool_op("MaxPool", 12, {{3, 2}, {2, 2}, {1, 0}, {1, 1}, {1, 1}, {}});
    op.attrs.push_back({"storage_order", order});
    op.outputs = 2;
    auto out = run_all(op, {x});
    ASSERT_EQ(out[1].dtype(), DataType::Int64);
    EXPECT_EQ(out[1].dims(), out[0].dims());
    auto y = floats(out[0]);
    auto idx = out[1].values<int64_t>();
    for (size_t i = 0; i < y.size(); ++i) {
      // Row-major: index = ((n*C + c)*H + h)*W + w; column-major swaps h and w: (n*C + c)*H*W + w*H + h.
      int64_t at = idx[i];
      if (order == 1) {
        const int64_t plane = at / 35, rest = at % 35, h = rest % 5, w = rest / 5;
        at = plane * 35 + h * 7 + w;
      }
      ASSERT_GE(at, 0);
      ASSERT_LT(at, x.size());
      EXPECT_EQ(xv[at], y[i]) << "output " << i;
    }
  }
  // A hand case: ties keep the first in row-major order (the second window holds 4 at 1, 2, 5).
  auto out = run_all({"MaxPool", 12, {{"kernel_shape", Dims{2, 2}}}, 2}, {f32({1, 1, 2, 3}, {1, 4, 4, 0, 2, 4})});
  EXPECT_EQ(floats(out[0]), (std::vector<float>{4, 4}));
  EXPECT_EQ(out[1].values<int64_t>()[0], 1);
  EXPECT_EQ(out[1].values<int64_t>()[1], 1);
}

TEST(KernelsPool, IntegerMaxPoolAndNan) {
  Tensor u8 = Tensor::from_values<uint8_t>({1, 1, 2, 2}, std::vector<uint8_t>{3, 250, 7, 0});
  Tensor y = run_op({"MaxPool", 12, {{"kernel_shape", Dims{2, 2}}}}, {u8});
  ASSERT_EQ(y.dtype(), DataType::UInt8);
  EXPECT_EQ(y.values<uint8_t>()[0], 250);
  Tensor i8 = Tensor::from_values<int8_t>({1, 1, 3}, std::vector<int8_t>{-100, -128, -5});
  Tensor yi = run_op({"MaxPool", 12, {{"kernel_shape", Dims{2}}}}, {i8});
  EXPECT_EQ(yi.values<int8_t>()[0], -100);
  EXPECT_EQ(yi.values<int8_t>()[1], -5);
  // NaN is skipped (as by fmax); a window of NaN only gives -inf.
  auto n = floats(run_op({"MaxPool", 12, {{"kernel_shape", Dims{2}}}}, {f32({1, 1, 4}, {kNaN, 1, kNaN, kNaN})}));
  EXPECT_EQ(n[0], 1.0f);
  EXPECT_EQ(n[1], 1.0f);
  EXPECT_EQ(n[2], -kInf);
  auto wide = floats(run_op({"MaxPool", 12, {{"kernel_shape", Dims{3}}}}, {f32({1, 1, 12}, {0, 1, 2, kNaN, 4, 5, 6, 7, 8, 9, 10, kNaN})}));
  EXPECT_EQ(wide, (std::vector<float>{2, 2, 4, 5, 6, 7, 8, 9, 10, 10}));
}

TEST(KernelsPool, LpPool) {
  Tensor x = random_f32({1, 2, 6, 5}, 9);
  const PoolSpec s{{2, 2}, {2, 1}, {1, 0}, {0, 1}, {1, 1}, {3, 5}};
  for (int64_t p : {1, 2, 3}) {
    Op op = pool_op("LpPool", 18, s);
    op.attrs.push_back({"p", p});
    expect_near_all(naive_pool("LpPool", x, s, false, static_cast<int>(p)), run_op(op, {x}), 1e-5, 1e-5);
  }
  // LpPool-1 takes p as a float.
  Op v1{"LpPool", 1, {{"kernel_shape", Dims{2, 2}}, {"p", 2.0f}}};
  expect_near_all(naive_pool("LpPool", x, {{2, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {5, 4}}), run_op(v1, {x}));
}

TEST(KernelsPool, GlobalPools) {
  Tensor x = random_f32({2, 3, 13, 7}, 10);
  auto xv = floats(x);
  std::vector<double> avg, max;
  for (int64_t plane = 0; plane < 6; ++plane) {
    double s = 0, m = -INFINITY;
    for (int64_t i = 0; i < 91; ++i) {
      s += xv[plane * 91 + i];
      m = std::max<double>(m, xv[plane * 91 + i]);
    }
    avg.push_back(s / 91);
    max.push_back(m);
  }
  Tensor ya = run_op({"GlobalAveragePool", 1}, {x});
  EXPECT_EQ(ya.dims(), (Dims{2, 3, 1, 1}));
  expect_near_all(avg, ya);
  expect_near_all(max, run_op({"GlobalMaxPool", 1, {}, 1, 2}, {x}));
  Tensor x3 = f32({1, 2, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, kNaN, 0, 0, 0, 0, 0, 0, 0, 0, -kInf});
  auto g = floats(run_op({"GlobalMaxPool", 1}, {x3}));
  EXPECT_TRUE(std::isnan(g[0]));
  EXPECT_EQ(g[1], 0.0f);
  Tensor d = Tensor::from_values<double>({1, 1, 3}, std::vector<double>{1, 2, 4});
  EXPECT_NEAR(run_op({"GlobalAveragePool", 1}, {d}).values<double>()[0], 7.0 / 3.0, 1e-12);
}

TEST(KernelsPool, BadAttributesAreErrors) {
  Tensor x = random_f32({1, 1, 4, 4}, 11);
  EXPECT_NE(op_error({"MaxPool", 12}, {x}).find("kernel_shape"), std::string::npos);
  EXPECT_NE(op_error({"MaxPool", 12, {{"kernel_shape", Dims{2, 2}}, {"auto_pad", std::string("SAME")}}}, {x}).find("auto_pad 'SAME'"),
            std::string::npos);
  EXPECT_NE(op_error({"AveragePool", 11, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{0, 1}}}}, {x}).find("strides"),
            std::string::npos);
  EXPECT_NE(op_error({"AveragePool", 11, {{"kernel_shape", Dims{2, 2}}, {"pads", Dims{1, 1}}}}, {x}).find("pads"), std::string::npos);
  EXPECT_NE(op_error({"MaxPool", 12, {{"kernel_shape", Dims{3, 3}}, {"pads", Dims{3, 0, 0, 0}}}}, {x}).find("smaller than the kernel"),
            std::string::npos);
  EXPECT_NE(op_error({"MaxPool", 12, {{"kernel_shape", Dims{5, 5}}}}, {x}).find("larger than the padded input"), std::string::npos);
  EXPECT_NE(op_error({"MaxPool", 12, {{"kernel_shape", Dims{2}}}}, {x}).find("expected rank 3"), std::string::npos);
  EXPECT_NE(op_error({"LpPool", 18, {{"kernel_shape", Dims{2, 2}}, {"p", int64_t{0}}}}, {x}).find("p 0"), std::string::npos);
  EXPECT_NE(op_error({"MaxPool", 12, {{"kernel_shape", Dims{1, 1, 1, 1}}}}, {random_f32({1, 1, 2, 2, 2, 2}, 1)}).find("at most 3"),
            std::string::npos);
  EXPECT_NE(op_error({"GlobalAveragePool", 1}, {f32({3}, {1, 2, 3})}).find("N x C"), std::string::npos);
}

// ---- BatchNormalization ----

TEST(KernelsBatchNorm, FoldedAndRunTimeParametersAgreeWithTheFormula) {
  const int64_t C = 3;
  Tensor x = random_f32({2, C, 5, 3}, 12);
  Tensor scale = f32({C}, {0.5f, -1.0f, 2.0f}), bias = f32({C}, {0.1f, 0.0f, -0.3f});
  Tensor mean = f32({C}, {0.2f, -0.4f, 1.0f}), var = f32({C}, {1.5f, 0.25f, 4.0f});
  const float eps = 1e-3f;
  auto xv = floats(x);
  std::vector<double> expected(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = static_cast<int64_t>(i / 15) % C;
    expected[i] = (xv[i] - floats(mean)[c]) / std::sqrt(floats(var)[c] + double{eps}) * floats(scale)[c] + floats(bias)[c];
  }
  for (bool constant : {false, true})
    for (int64_t opset : {7, 9, 15}) {
      Op op{"BatchNormalization", opset, {{"epsilon", eps}}};
      if (constant) op.constants = {1, 2, 3, 4};
      expect_near_all(expected, run_op(op, {x, scale, bias, mean, var}));
    }
}

TEST(KernelsBatchNorm, SpatialZeroScalesPerActivation) {
  Tensor x = random_f32({2, 2, 3}, 13);
  Tensor scale = random_f32({2, 3}, 14), bias = random_f32({2, 3}, 15);
  Tensor mean = random_f32({2, 3}, 16), var = random_f32({2, 3}, 17, 0.5f, 2.0f);
  auto xv = floats(x);
  std::vector<double> expected(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t p = i % 6;
    expected[i] = (xv[i] - floats(mean)[p]) / std::sqrt(floats(var)[p] + 1e-5) * floats(scale)[p] + floats(bias)[p];
  }
  expect_near_all(expected, run_op({"BatchNormalization", 7, {{"spatial", int64_t{0}}}}, {x, scale, bias, mean, var}));
}

TEST(KernelsBatchNorm, TrainingModeUsesBatchStatistics) {
  Tensor x = f32({2, 1, 2}, {1, 2, 3, 6});  // mean 3, biased variance (4+1+0+9)/4 = 3.5
  Tensor scale = f32({1}, {2}), bias = f32({1}, {1}), mean = f32({1}, {10}), var = f32({1}, {20});
  auto out = run_all({"BatchNormalization", 15, {{"training_mode", int64_t{1}}, {"momentum", 0.75f}, {"epsilon", 0.5f}}, 3},
                     {x, scale, bias, mean, var});
  std::vector<double> y;
  for (double v : {1.0, 2.0, 3.0, 6.0}) y.push_back((v - 3.0) / 2.0 * 2.0 + 1.0);  // sqrt(3.5 + 0.5) = 2
  expect_near_all(y, out[0]);
  expect_near_all({10 * 0.75 + 3 * 0.25}, out[1]);
  expect_near_all({20 * 0.75 + 3.5 * 0.25}, out[2]);
}

TEST(KernelsBatchNorm, Errors) {
  Tensor x = random_f32({1, 2, 2}, 18);
  Tensor p2 = f32({2}, {1, 1}), p3 = f32({3}, {1, 1, 1});
  EXPECT_NE(op_error({"BatchNormalization", 15}, {x, p3, p3, p3, p3}).find("must have 2 values"), std::string::npos);
  EXPECT_NE(op_error({"BatchNormalization", 15}, {x, p2, p3, p2, p2}).find("same size"), std::string::npos);
  EXPECT_NE(op_error({"BatchNormalization", 9, {}, 3}, {x, p2, p2, p2, p2}).find("training outputs"), std::string::npos);
}

// ---- Instance, group and layer normalization ----

// Normalises each block of `block` contiguous values, in double.
std::vector<double> naive_normalize_blocks(const std::vector<float>& x, int64_t block, double eps) {
  std::vector<double> y(x.size());
  for (size_t b = 0; b < x.size() / block; ++b) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < block; ++i) mean += x[b * block + i];
    mean /= block;
    for (int64_t i = 0; i < block; ++i) var += (x[b * block + i] - mean) * (x[b * block + i] - mean);
    var /= block;
    for (int64_t i = 0; i < block; ++i) y[b * block + i] = (x[b * block + i] - mean) / std::sqrt(var + eps);
  }
  return y;
}

TEST(KernelsNorm, InstanceNormalization) {
  Tensor x = random_f32({2, 3, 13}, 19);
  Tensor scale = f32({3}, {1.0f, -2.0f, 0.5f}), bias = f32({3}, {0.0f, 1.0f, -1.0f});
  std::vector<double> y = naive_normalize_blocks(floats(x), 13, 1e-2);
  for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] * floats(scale)[(i / 13) % 3] + floats(bias)[(i / 13) % 3];
  expect_near_all(y, run_op({"InstanceNormalization", 6, {{"epsilon", 1e-2f}}, 1, 2}, {x, scale, bias}));
  EXPECT_NE(op_error({"InstanceNormalization", 6}, {x, f32({2}, {1, 1}), bias}).find("C = 3"), std::string::npos);
}

TEST(KernelsNorm, GroupNormalizationScalesPerGroupAt18AndPerChannelAt21) {
  const int64_t N = 2, C = 4, G = 2, S = 5;
  Tensor x = random_f32({N, C, S}, 20);
  std::vector<double> normalized = naive_normalize_blocks(floats(x), C / G * S, 1e-5);
  Tensor group_scale = f32({G}, {2.0f, -1.0f}), group_bias = f32({G}, {0.5f, 0.25f});
  std::vector<double> y18(normalized.size()), y21(normalized.size());
  Tensor channel_scale = f32({C}, {1, 2, 3, 4}), channel_bias = f32({C}, {-1, 0, 1, 2});
  for (size_t i = 0; i < normalized.size(); ++i) {
    const int64_t c = static_cast<int64_t>(i / S) % C, g = c / (C / G);
    y18[i] = normalized[i] * floats(group_scale)[g] + floats(group_bias)[g];
    y21[i] = normalized[i] * floats(channel_scale)[c] + floats(channel_bias)[c];
  }
  expect_near_all(y18, run_op({"GroupNormalization", 18, {{"num_groups", G}}}, {x, group_scale, group_bias}));
  expect_near_all(y21, run_op({"GroupNormalization", 21, {{"num_groups", G}}}, {x, channel_scale, channel_bias}));
  EXPECT_NE(op_error({"GroupNormalization", 18, {{"num_groups", int64_t{3}}}}, {x, f32({3}, {1, 1, 1}), f32({3}, {0, 0, 0})})
                .find("does not divide"),
            std::string::npos);
  EXPECT_NE(op_error({"GroupNormalization", 21, {{"num_groups", G}}}, {x, group_scale, group_bias}).find("C = 4"), std::string::npos);
}

TEST(KernelsNorm, LayerNormalizationWithStatisticsAndBroadcastScale) {
  Tensor x = random_f32({2, 3, 5}, 21);
  Tensor scale = random_f32({5}, 22), bias = random_f32({3, 5}, 23);
  auto out = run_all({"LayerNormalization", 17, {{"axis", int64_t{1}}, {"epsilon", 1e-3f}}, 3}, {x, scale, bias});
  std::vector<double> y = naive_normalize_blocks(floats(x), 15, 1e-3);
  for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] * floats(scale)[i % 5] + floats(bias)[i % 15];
  expect_near_all(y, out[0]);
  EXPECT_EQ(out[1].dims(), (Dims{2, 1, 1}));
  auto xv = floats(x);
  for (int64_t r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < 15; ++i) mean += xv[r * 15 + i] / 15.0;
    for (int64_t i = 0; i < 15; ++i) var += (xv[r * 15 + i] - mean) * (xv[r * 15 + i] - mean) / 15.0;
    EXPECT_NEAR(floats(out[1])[r], mean, 1e-6);
    EXPECT_NEAR(floats(out[2])[r], 1.0 / std::sqrt(var + 1e-3), 1e-5);
  }
  // Last axis, no bias, long rows split over threads.
  Tensor big = random_f32({64, 768}, 24);
  Tensor ones = f32({768}, std::vector<float>(768, 1.0f));
  expect_near_all(naive_normalize_blocks(floats(big), 768, 1e-5), run_op({"LayerNormalization", 17, {}, 1, 3}, {big, ones}));
  EXPECT_NE(op_error({"LayerNormalization", 17}, {x, f32({4}, {1, 1, 1, 1})}).find("does not broadcast"), std::string::npos);
}

TEST(KernelsNorm, MeanVarianceNormalization) {
  Tensor x = random_f32({2, 3, 2, 2}, 25);
  auto xv = floats(x);
  // Default axes {0, 2, 3}: one mean and deviation per channel.
  std::vector<double> y(xv.size());
  for (int64_t c = 0; c < 3; ++c) {
    std::vector<size_t> members;
    for (size_t i = 0; i < xv.size(); ++i)
      if (static_cast<int64_t>(i / 4) % 3 == c) members.push_back(i);
    double mean = 0, var = 0;
    for (size_t i : members) mean += xv[i] / 8.0;
    for (size_t i : members) var += (xv[i] - mean) * (xv[i] - mean) / 8.0;
    for (size_t i : members) y[i] = (xv[i] - mean) / (std::sqrt(var) + 1e-9);
  }
  expect_near_all(y, run_op({"MeanVarianceNormalization", 13}, {x}));
  // Axes {1}: each (n, h, w) normalised over the 3 channels.
  std::vector<double> y1(xv.size());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t s = 0; s < 4; ++s) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < 3; ++c) mean += xv[(n * 3 + c) * 4 + s] / 3.0;
      for (int64_t c = 0; c < 3; ++c) var += std::pow(xv[(n * 3 + c) * 4 + s] - mean, 2) / 3.0;
      for (int64_t c = 0; c < 3; ++c) y1[(n * 3 + c) * 4 + s] = (xv[(n * 3 + c) * 4 + s] - mean) / (std::sqrt(var) + 1e-9);
    }
  expect_near_all(y1, run_op({"MeanVarianceNormalization", 9, {{"axes", Dims{1}}}}, {x}));
}

TEST(KernelsNorm, LpNormalization) {
  Tensor x = f32({2, 3}, {3, 0, -4, 0, 0, 0});
  expect_near_all({0.6, 0, -0.8, 0, 0, 0}, run_op({"LpNormalization", 1}, {x}));  // a zero row stays zero
  expect_near_all({3.0 / 7, 0, -4.0 / 7, 0, 0, 0}, run_op({"LpNormalization", 1, {{"p", int64_t{1}}}}, {x}));
  expect_near_all({1, 0, -1, 0, 0, 0}, run_op({"LpNormalization", 1, {{"axis", int64_t{0}}}}, {x}));
  EXPECT_NE(op_error({"LpNormalization", 1, {{"p", int64_t{3}}}}, {x}).find("p 3"), std::string::npos);
}

TEST(KernelsNorm, LocalResponseNormalization) {
  const int64_t C = 5, S = 3;
  Tensor x = random_f32({2, C, S}, 26);
  auto xv = floats(x);
  const double alpha = 2e-2, beta = 0.6, bias = 1.5;
  for (int64_t size : {1, 2, 3, 4}) {
    std::vector<double> y(xv.size());
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) {
          double sq = 0;
          for (int64_t k = c - (size - 1) / 2; k <= c + size / 2; ++k)  // ceil((size-1)/2) = size/2
            if (k >= 0 && k < C) sq += std::pow(xv[(n * C + k) * S + s], 2);
          const size_t i = static_cast<size_t>((n * C + c) * S + s);
          y[i] = xv[i] / std::pow(bias + alpha / size * sq, beta);
        }
    SCOPED_TRACE("size " + std::to_string(size));
    expect_near_all(y, run_op({"LRN", 13, {{"size", size}, {"alpha", 2e-2f}, {"beta", 0.6f}, {"bias", 1.5f}}}, {x}));
  }
  EXPECT_NE(op_error({"LRN", 13}, {x}).find("size must be"), std::string::npos);
}


// ---- MaxUnpool (what the backend tests leave out: pads, 1-D, integer values, bad indices and
// output shapes)

TEST(KernelsNorm, MaxUnpoolWithPadsAndBadInputs) {
  // 1-D, kernel 3, stride 2, pads 1 and 1: (2 - 1) * 2 + 3 - 2 = 3 outputs.
  Op op{"MaxUnpool", 11, {{"kernel_shape", std::vector<int64_t>{3}}, {"strides", std::vector<int64_t>{2}},
                          {"pads", std::vector<int64_t>{1, 1}}}};
  Tensor y = run_op(op, {kernel_test::i32({1, 1, 2}, {7, 9}), kernel_test::i64({1, 1, 2}, {0, 2})});
  EXPECT_EQ(y.dims(), (Dims{1, 1, 3}));
  EXPECT_EQ(std::vector<int32_t>(y.values<int32_t>().begin(), y.values<int32_t>().end()), (std::vector<int32_t>{7, 0, 9}));
  EXPECT_NE(op_error(op, {f32({1, 1, 2}, {1, 2}), kernel_test::i64({1, 1, 2}, {0, 3})}).find("index 3 in I is out of range"),
            std::string::npos);
  EXPECT_NE(op_error(op, {f32({1, 1, 2}, {1, 2}), kernel_test::i64({1, 2}, {0, 1})}).find("must have X's shape"),
            std::string::npos);
  EXPECT_NE(op_error(op, {f32({1, 1, 2}, {1, 2}), kernel_test::i64({1, 1, 2}, {0, 1}), kernel_test::i64({3}, {1, 1, 9})})
                .find("lie within kernel_shape"),
            std::string::npos);
  EXPECT_NE(op_error({"MaxUnpool", 11}, {f32({1, 1, 2}, {1, 2}), kernel_test::i64({1, 1, 2}, {0, 1})})
                .find("needs the kernel_shape attribute"),
            std::string::npos);
}

}  // namespace
}  // namespace onnxptq::engine
