// Quark's WeightsOnly: only constant tensors get a Q/DQ; activations and int32 biases stay float,
// and ONNX Runtime runs the written model as the engine does (to float32 rounding: the float ops
// between the dequantized weights sum in another order in each runtime).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using testing::quantize_random;

TEST(WeightsOnly, OnlyConstantsAreQuantized) {
  ir::Model m = testing::export_test_model();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  apply_extra_option(c, "WeightsOnly", nlohmann::json(true));
  QuantizeResult r = quantize_random(m, c, 2, 3);
  size_t weights = 0;
  for (const TensorPlan& t : r.plan.tensors) {
    EXPECT_EQ(t.role, Role::Weight) << t.name;
    EXPECT_TRUE(m.graph->find_value(t.name)->has_initializer()) << t.name;
    weights += t.role == Role::Weight;
  }
  EXPECT_GE(weights, 3u);  // the Conv's, the Gemm's and the MatMul's B
  // Every QuantizeLinear of the written model quantizes a constant: no activation is quantized.
  for (const auto& n : r.model.graph->nodes())
    if (n->op_type == "QuantizeLinear") {
      EXPECT_TRUE(n->input(0)->has_initializer()) << n->name;
    }
  EXPECT_EQ(r.calibration.ranges.size(), 0u);

  fs::path dir = fs::temp_directory_path() / ("onnxptq_weights_only_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ir::save_model(r.model, dir / "q.onnx");
  std::map<std::string, ir::Tensor> feeds = testing::random_feeds(r.model, 5);
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir, true);
  std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
  ASSERT_EQ(ort.size(), engine.size());
  for (size_t i = 0; i < ort.size(); ++i) {
    std::vector<double> a = testing::values_of(ort[i]), b = testing::values_of(engine[i]);
    ASSERT_EQ(a.size(), b.size());
    double span = *std::max_element(a.begin(), a.end()) - *std::min_element(a.begin(), a.end()), worst = 0;
    for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]));
    EXPECT_LT(worst, 1e-5 * span) << "output " << i;
  }
  fs::remove_all(dir);
}

TEST(WeightsOnly, RefusedWhereActivationsMustBeQuantized) {
  QuantConfig dpu;
  apply_preset(dpu, "XINT8");
  apply_extra_option(dpu, "WeightsOnly", nlohmann::json(true));
  EXPECT_EQ(testing::error_of([&] { check_config(dpu); }),
            "WeightsOnly and enable_dpu: the NPU computes on quantized activations");
  QuantConfig qop;
  qop.format = QuantFormat::QOperator;
  qop.weights_only = true;
  EXPECT_EQ(testing::error_of([&] { check_config(qop); }),
            "WeightsOnly with QuantFormat.QOperator: its QLinear ops take quantized activations");
}

}  // namespace
}  // namespace onnxptq::quant
