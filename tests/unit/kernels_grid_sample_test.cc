// GridSample on what the ONNX backend tests leave out: locations outside the input under each
// padding mode and both align_corners (values worked out by hand from the ONNX operator docs),
// bicubic weights summing to 1, a random case against a direct bilinear reference in double on
// several thread counts, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using kernel_test::expect_near_all;
using kernel_test::f32;
using kernel_test::kNaN;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::run_op;

// GridSample of the row [10, 20, 30] (X [1, 1, 1, 3]) at normalized x positions (y = 0).
Tensor grid_sample_row(const std::vector<float>& xs, const std::string& mode, const std::string& padding, int64_t align) {
  std::vector<float> grid;
  for (float x : xs) grid.insert(grid.end(), {x, 0.0f});
  Op op{"GridSample", 16, {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}}};
  return run_op(op, {f32({1, 1, 1, 3}, {10, 20, 30}), f32({1, 1, static_cast<int64_t>(xs.size()), 2}, grid)});
}

TEST(GridSampleKernel, OutOfRangeLocationsUnderEachPaddingMode) {
  // align_corners=0: x = ((g + 1) * 3 - 1) / 2, so g = -1.5 -> -1.25, g = 2 -> 4, g = 0.5 -> 1.75.
  // Reflection is about the pixel edges -0.5 and 2.5: -1.25 -> 0.25, 4 -> 1.
  const std::vector<float> xs = {-1.5f, 2.0f, 0.5f};
  expect_near_all({0, 0, 27.5}, grid_sample_row(xs, "bilinear", "zeros", 0));
  expect_near_all({10, 30, 27.5}, grid_sample_row(xs, "bilinear", "border", 0));
  expect_near_all({12.5, 20, 27.5}, grid_sample_row(xs, "bilinear", "reflection", 0));
  // Nearest rounds -1.25 to -1 (reflected: 0), 4 stays 4 (reflected: 1), 1.75 to 2.
  expect_near_all({0, 0, 30}, grid_sample_row(xs, "nearest", "zeros", 0));
  expect_near_all({10, 30, 30}, grid_sample_row(xs, "nearest", "border", 0));
  expect_near_all({10, 20, 30}, grid_sample_row(xs, "nearest", "reflection", 0));
  // align_corners=1: x = g + 1, so 1.5 -> 2.5: half of pixel 2, half of pixel 3 (0, 30 or 20 reflected about 2).
  expect_near_all({15}, grid_sample_row({1.5f}, "bilinear", "zeros", 1));
  expect_near_all({30}, grid_sample_row({1.5f}, "bilinear", "border", 1));
  expect_near_all({25}, grid_sample_row({1.5f}, "bilinear", "reflection", 1));
  // Far away and non-finite locations do not crash: far ones pad, NaN ones read 0.
  expect_near_all({0, 0, 0}, grid_sample_row({1e30f, -1e30f, kNaN}, "bilinear", "zeros", 0));
  expect_near_all({30, 10, 0}, grid_sample_row({1e30f, -1e30f, kNaN}, "bicubic", "border", 0));
}

TEST(GridSampleKernel, BicubicOfAConstantIsTheConstantInsideAndWithBorderPadding) {
  std::vector<float> grid;
  for (float y : {-1.2f, -0.3f, 0.45f, 1.1f})
    for (float x : {-1.4f, -0.7f, 0.1f, 0.9f, 1.3f}) grid.insert(grid.end(), {x, y});
  Tensor x = f32({1, 2, 4, 5}, std::vector<float>(40, 3.0f));
  Tensor g = f32({1, 4, 5, 2}, grid);
  expect_near_all(std::vector<double>(40, 3.0),
                  run_op({"GridSample", 16, {{"mode", std::string("bicubic")}, {"padding_mode", std::string("border")}}}, {x, g}));
  // With zeros padding the border locations lose weight to the zeros outside.
  Tensor zeros = run_op({"GridSample", 16, {{"mode", std::string("bicubic")}}}, {x, g});
  EXPECT_LT(kernel_test::floats(zeros)[0], 2.5f);
}

// Bilinear sampling with zero padding, align_corners=0, by its definition in double.
std::vector<double> grid_sample_naive_bilinear(const Tensor& x, const Tensor& grid) {
  const auto& d = x.dims();
  const int64_t n = d[0], c = d[1], h = d[2], w = d[3], ho = grid.dims()[1], wo = grid.dims()[2];
  auto xv = x.values<float>();
  auto gv = grid.values<float>();
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < ho * wo; ++i) {
        const double px = ((gv[(b * ho * wo + i) * 2] + 1.0) * static_cast<double>(w) - 1) / 2;
        const double py = ((gv[(b * ho * wo + i) * 2 + 1] + 1.0) * static_cast<double>(h) - 1) / 2;
        const double fx = std::floor(px), fy = std::floor(py);
        double v = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            const auto r = static_cast<int64_t>(fy) + dy, col = static_cast<int64_t>(fx) + dx;
            if (r < 0 || r >= h || col < 0 || col >= w) continue;
            const double weight = (dy ? py - fy : 1 - (py - fy)) * (dx ? px - fx : 1 - (px - fx));
            v += weight * xv[((b * c + ch) * h + r) * w + col];
          }
        out.push_back(v);
      }
  return out;
}

TEST(GridSampleKernel, BilinearMatchesTheDefinitionOnAnyThreadCount) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-2, 2), where(-1.2f, 1.2f);
  Tensor x(ir::DataType::Float, {2, 5, 17, 23}), grid(ir::DataType::Float, {2, 19, 29, 2});
  for (float& v : x.mutable_values<float>()) v = value(rng);
  for (float& v : grid.mutable_values<float>()) v = where(rng);
  const std::vector<double> expected = grid_sample_naive_bilinear(x, grid);
  for (int threads : {1, 3}) {
    Op op{"GridSample", 16};
    op.threads = threads;
    Tensor y = run_op(op, {x, grid});
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 5, 19, 29}));
    expect_near_all(expected, y, 1e-5, 1e-5);
  }
}

TEST(GridSampleKernel, RefusesBadInputs) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = f32({1, 1, 1, 2}, {0, 0});
  EXPECT_NE(op_error({"GridSample", 16}, {x, f32({1, 1, 1, 3}, {0, 0, 0})}).find("must be [N, H_out, W_out, 2]"),
            std::string::npos);
  EXPECT_NE(op_error({"GridSample", 16}, {x, f32({2, 1, 1, 2}, {0, 0, 0, 0})}).find("differ in batch size"),
            std::string::npos);
  EXPECT_NE(op_error({"GridSample", 16}, {f32({1, 2, 2}, {1, 2, 3, 4}), grid}).find("must be [N, C, H, W]"),
            std::string::npos);
  EXPECT_NE(op_error({"GridSample", 16, {{"mode", std::string("linear")}}}, {x, grid})
                .find("mode 'linear' is not bilinear, nearest or bicubic"),
            std::string::npos);
  EXPECT_NE(op_error({"GridSample", 16, {{"padding_mode", std::string("wrap")}}}, {x, grid}).find("padding_mode 'wrap'"),
            std::string::npos);
  EXPECT_NE(op_error({"GridSample", 16}, {kernel_test::i64({1, 1, 2, 2}, {1, 2, 3, 4}), grid}).find("float inputs"),
            std::string::npos);
}

}  // namespace
}  // namespace onnxptq::engine
