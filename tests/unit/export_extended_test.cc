// ExtendedQuantFormat.QDQ exports (Quark's ExtendedQDQQuantizer and com.amd.quark ops): its
// post-pass leaves com.amd.quark ops only where com.microsoft's Q/DQ cannot hold the type; 8/16-bit
// models compute exactly what the QDQ export of the same plan does and ONNX Runtime runs them; the
// wide types (32-bit, and float16 and bfloat16 with FloatQDQAsCustomOps: their default Cast form is
// export_extended_cast_test.cc's), which ONNX Runtime cannot run without Quark's library, equal the
// simulation (quant::Simulation) bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "ir/npy.h"
#include "quant/export.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"
#include "support/export_models.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
using testing::expect_bit_equal;
using testing::fresh_dir;
using testing::saved_and_loaded;

struct ExtendedCombo {
  DataType activation, weight;
  bool symmetric;
};

std::string extended_label(const ExtendedCombo& c) {
  return std::string(quant_type_name(c.activation)) + "_" + quant_type_name(c.weight) + (c.symmetric ? "_sym" : "");
}

QuantConfig extended_config(const ExtendedCombo& c) {
  QuantConfig config;
  config.format = QuantFormat::ExtendedQDQ;
  config.calibrate_method = calib::Method::MinMax;
  config.activation_type = c.activation;
  config.weight_type = c.weight;
  config.activation_symmetric = c.symmetric;
  config.calib.threads = 2;
  // float16 and bfloat16 as Quark's custom ops (the Cast form is the default).
  config.float_qdq_as_custom_ops = quant_type_is_float(c.activation) || quant_type_is_float(c.weight);
  check_config(config);
  return config;
}

class ExtendedEightAndSixteen : public ::testing::TestWithParam<ExtendedCombo> {};

TEST_P(ExtendedEightAndSixteen, MicrosoftQdqThatOrtRunsAndTheQdqExportsNumbers) {
  ir::Model model = testing::export_test_model();
  QuantConfig config = extended_config(GetParam());
  Plan plan = testing::calibrated_plan(model, config);
  fs::path dir = fresh_dir("export_extended_" + extended_label(GetParam()));
  ir::Model q = saved_and_loaded(export_model(model, plan, config), dir / "q.onnx");

  EXPECT_EQ(q.opset("com.microsoft"), 1);
  EXPECT_EQ(q.opset("com.amd.quark"), 1);
  int microsoft = 0;
  for (const auto& n : q.graph->nodes()) {
    EXPECT_NE(n->domain, "com.amd.quark") << n->name << ": an 8/16-bit or int32-bias Q/DQ stays custom";
    if (n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear") {
      EXPECT_EQ(n->domain, "com.microsoft") << n->name;
      ++microsoft;
    }
  }
  EXPECT_GT(microsoft, 10);
  // Integer weights stored quantized with a DequantizeLinear; the int32 bias DequantizeLinear writes the bias.
  EXPECT_EQ(q.graph->find_value("w_quantized")->initializer().dtype(), GetParam().weight);
  EXPECT_EQ(q.graph->find_value("w_DequantizeLinear_Output")->producer()->op_type, "DequantizeLinear");
  EXPECT_EQ(q.graph->find_value("b")->producer()->name, "b_DequantizeLinear");
  EXPECT_EQ(q.graph->find_value("b_quantized")->initializer().dtype(), DataType::Int32);

  // The same plan written as QuantFormat.QDQ computes the same numbers in the engine.
  QuantConfig qdq_config = config;
  qdq_config.format = QuantFormat::QDQ;
  ir::Model qdq = export_qdq(model, plan, qdq_config);
  auto feeds = testing::random_feeds(model, 7);
  std::vector<ir::Tensor> got = testing::run_model(q, feeds, false);
  expect_bit_equal(got, testing::run_model(qdq, feeds, false), "ExtendedQDQ vs QDQ");
  expect_bit_equal(got, Simulation(model, plan, config, 2).run(feeds), "engine vs Simulation");

  // ONNX Runtime runs it and agrees within one step of each output with its graph optimizations
  // off. Optimized (as deployed) it must run; its distance is printed: its fused kernels round
  // their own way, and it drops Clips wrongly when scales are tiny (docs/formats.md).
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", q, feeds, dir / "ort", true);
  std::vector<ir::Tensor> optimized = testing::ort_run(dir / "q.onnx", q, feeds, dir / "ort_optimized");
  ASSERT_EQ(ort.size(), got.size());
  ASSERT_EQ(optimized.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string& name = q.graph->outputs()[i]->name();
    double step = plan.provider(name).params.at(0).scale;
    EXPECT_LE(testing::max_steps(ort[i], got[i], step), 1.001) << name;
    std::cout << extended_label(GetParam()) << " " << name << ": ORT optimized "
              << testing::max_steps(optimized[i], got[i], step) << " steps\n";
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, ExtendedEightAndSixteen,
                         ::testing::Values(ExtendedCombo{DataType::Int8, DataType::Int8, true},
                                           ExtendedCombo{DataType::UInt8, DataType::Int8, false},
                                           ExtendedCombo{DataType::Int16, DataType::Int8, true},
                                           ExtendedCombo{DataType::UInt16, DataType::Int16, false}),
                         [](const ::testing::TestParamInfo<ExtendedCombo>& info) {
                           return extended_label(info.param);
                         });

class ExtendedWideTypes : public ::testing::TestWithParam<ExtendedCombo> {};

TEST_P(ExtendedWideTypes, CustomOpsWhereMicrosoftsCannotAndTheSimulationsNumbers) {
  ir::Model model = testing::export_test_model();
  QuantConfig config = extended_config(GetParam());
  Plan plan = testing::calibrated_plan(model, config);
  fs::path dir = fresh_dir("export_extended_" + extended_label(GetParam()));
  ir::Model q = saved_and_loaded(export_model(model, plan, config), dir / "q.onnx");
  fs::remove_all(dir);

  const DataType a = GetParam().activation;
  int custom_q = 0;
  for (const auto& n : q.graph->nodes()) {
    if (n->op_type.find("QuantizeLinear") == std::string::npos &&
        n->op_type.find("DequantizeLinear") == std::string::npos)
      continue;
    const ir::Tensor& zp = n->input(2)->initializer();
    bool microsoft = n->domain == "com.microsoft";
    EXPECT_TRUE(microsoft || n->domain == "com.amd.quark") << n->name;
    EXPECT_EQ(microsoft, n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear") << n->name;
    // Only a DequantizeLinear of int32 with zero points 0 (the biases, symmetric int32) converts.
    if (zp.dtype() == DataType::Int32 && n->op_type.find("Dequantize") != std::string::npos) {
      bool zeros = true;
      for (int32_t v : zp.values<int32_t>()) zeros = zeros && v == 0;
      EXPECT_EQ(microsoft, zeros) << n->name;
    } else if (zp.dtype() == DataType::Int32 || zp.dtype() == DataType::UInt32 || zp.dtype() == DataType::Float16 ||
               zp.dtype() == DataType::BFloat16) {
      EXPECT_FALSE(microsoft) << n->name;
    }
    custom_q += n->op_type == "ExtendedQuantizeLinear";
  }
  EXPECT_GT(custom_q, 5);
  EXPECT_EQ(q.graph->find_value("x_zero_point")->initializer().dtype(), a);
  // float16/bfloat16 weights stay float with a pair (Quark's default for them).
  bool float_weights = GetParam().weight == DataType::Float16 || GetParam().weight == DataType::BFloat16;
  const ir::Value* w = q.graph->find_value("w");  // integer weights: only w_quantized is left
  EXPECT_EQ(w && w->has_initializer(), float_weights);

  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    expect_bit_equal(testing::run_model(q, feeds, false), Simulation(model, plan, config, 2).run(feeds),
                     extended_label(GetParam()));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ExtendedWideTypes,
                         ::testing::Values(ExtendedCombo{DataType::Int32, DataType::Int8, true},
                                           ExtendedCombo{DataType::Int32, DataType::Int32, false},
                                           ExtendedCombo{DataType::UInt32, DataType::Int8, false},
                                           ExtendedCombo{DataType::Float16, DataType::Float16, true},
                                           ExtendedCombo{DataType::BFloat16, DataType::BFloat16, true},
                                           ExtendedCombo{DataType::BFloat16, DataType::Int8, true}),
                         [](const ::testing::TestParamInfo<ExtendedCombo>& info) {
                           return extended_label(info.param);
                         });

// Asymmetric float16 weights (WeightSymmetric false): their stored values are what the format's ops
// compute from the float weight (Quark's float16 op ignores the zero point, vai_q_onnx's the scale
// and zero point), so the simulation equals the model, whose pairs quantize the float weight.
TEST(ExtendedFloatWeights, AsymmetricFloat16WeightsAreWhatTheOpsCompute) {
  ir::Model model = testing::export_test_model();
  for (QuantFormat format : {QuantFormat::ExtendedQDQ, QuantFormat::VitisQDQ}) {
    SCOPED_TRACE(quant_format_name(format));
    QuantConfig config = extended_config({DataType::Float16, DataType::Float16, true});
    config.format = format;
    config.float_qdq_as_custom_ops = format == QuantFormat::ExtendedQDQ;
    config.weight_symmetric = false;
    Plan plan = testing::calibrated_plan(model, config);
    ASSERT_NE(plan.find("w")->params.at(0).float_zero_point, 0.0);
    ir::Model q = export_model(model, plan, config);
    auto feeds = testing::random_feeds(model, 7);
    expect_bit_equal(testing::run_model(q, feeds, false), Simulation(model, plan, config, 2).run(feeds),
                     quant_format_name(format));
  }
}

}  // namespace
}  // namespace onnxptq::quant
