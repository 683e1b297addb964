#include "tools/evaluate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/npy.h"
#include "onnxptq/error.h"

namespace onnxptq::tools {
namespace {

namespace fs = std::filesystem;

ir::Tensor floats(std::vector<int64_t> dims, std::vector<float> values) {
  return ir::Tensor::from_values<float>(std::move(dims), values);
}

TEST(Evaluate, MetricsAreTheClosedForms) {
  // a = (1, 2, 3, 4), b = (1, 2, 3, 5): a.b = 34, |a|^2 = 30, |b|^2 = 39, one difference of 1.
  ResultMetrics m = compare_results(floats({4}, {1, 2, 3, 4}), floats({4}, {1, 2, 3, 5}));
  EXPECT_NEAR(m.cosine, 34.0 / std::sqrt(30.0 * 39.0), 1e-15);
  EXPECT_DOUBLE_EQ(m.l2, 1.0);
  EXPECT_NEAR(m.psnr, 20 * std::log10(4.0) - 10 * std::log10(0.25), 1e-12);  // max(a) = 4, mse = 1/4
}

TEST(Evaluate, IdenticalResultsFloorTheMse) {
  ResultMetrics m = compare_results(floats({2, 2}, {0.5f, 1, 2, 8}), floats({2, 2}, {0.5f, 1, 2, 8}));
  EXPECT_DOUBLE_EQ(m.l2, 0.0);
  EXPECT_NEAR(m.cosine, 1.0, 1e-15);
  EXPECT_NEAR(m.psnr, 20 * std::log10(8.0) + 100, 1e-12);  // mse floored at 1e-10
}

TEST(Evaluate, IntegerResultsAreComparedAsNumbers) {
  ir::Tensor a = ir::Tensor::from_values<uint8_t>({3}, std::vector<uint8_t>{0, 100, 255});
  ir::Tensor b = ir::Tensor::from_values<uint8_t>({3}, std::vector<uint8_t>{0, 103, 251});
  ResultMetrics m = compare_results(a, b);
  EXPECT_DOUBLE_EQ(m.l2, 5.0);  // 3-4-5
  EXPECT_NEAR(m.psnr, 20 * std::log10(255.0) - 10 * std::log10(25.0 / 3), 1e-12);
}

TEST(Evaluate, ZeroVectorHasNoCosine) {
  ResultMetrics m = compare_results(floats({2}, {0, 0}), floats({2}, {1, 0}));
  EXPECT_TRUE(std::isnan(m.cosine));
}

TEST(Evaluate, ShapeMismatchIsAnError) {
  EXPECT_THROW(compare_results(floats({2}, {1, 2}), floats({1, 2}, {1, 2})), Error);
}

TEST(Evaluate, FoldersPairFilesByNameAndAverage) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_evaluate_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "base");
  fs::create_directories(dir / "quant");
  ir::save_npy(floats({4}, {1, 2, 3, 4}), dir / "base" / "b.npy");
  ir::save_npy(floats({4}, {1, 2, 3, 5}), dir / "quant" / "b.npy");
  ir::save_npy(floats({2}, {2, 2}), dir / "base" / "a.npy");
  ir::save_npy(floats({2}, {2, 1}), dir / "quant" / "a.npy");
  EvaluateReport r = evaluate_folders(dir / "base", dir / "quant");
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0].file, "a.npy");
  EXPECT_DOUBLE_EQ(r.files[0].metrics.l2, 1.0);
  EXPECT_DOUBLE_EQ(r.average.l2, 1.0);
  double cos_a = 6.0 / (std::sqrt(8.0) * std::sqrt(5.0)), cos_b = 34.0 / std::sqrt(30.0 * 39.0);
  EXPECT_NEAR(r.average.cosine, (cos_a + cos_b) / 2, 1e-15);
  nlohmann::json j = report_json(r);
  EXPECT_EQ(j["files"][1]["file"], "b.npy");
  EXPECT_NE(format_report(r).find("average"), std::string::npos);

  ir::save_npy(floats({1}, {1}), dir / "quant" / "c.npy");
  try {
    evaluate_folders(dir / "base", dir / "quant");
    FAIL() << "a file only in the quantized folder must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'c.npy' is in the quantized folder"), std::string::npos) << e.what();
  }
  EXPECT_THROW(evaluate_folders(dir / "missing", dir / "quant"), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq::tools
