// QuantFormat.QOperator export (ONNX Runtime's quantization/onnx_quantizer.py) on a small model
// with every QLinear op: the nodes ORT's QOperator quantizer writes, ONNX Runtime loading and
// running the model and agreeing with the engine within one quantization step of each output, the
// QDQ export of the same plan agreeing within one step, and python3-onnx's checker passing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "onnxptq/error.h"
#include "quant/export.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;

struct QOperatorExportCase {
  std::string label;
  DataType activation, weight;
  calib::Method method;
  bool symmetric = false;
  // Whether the QDQ export of the plan is held to one step too. ORT's QLinearAdd and
  // QLinearAveragePool round (x / s + zp) where QuantizeLinear rounds x / s and adds zp: an exact
  // half step (frequent with power-of-two scales, and for averages of 4 values) then goes the
  // other way when zp is odd, and on this small model such flips add up to a few steps.
  bool compare_with_qdq = false;
};

class QOperatorExport : public ::testing::TestWithParam<QOperatorExportCase> {};

TEST_P(QOperatorExport, QLinearOpsThatOrtRunsAndThatAgreeWithQdq) {
  const QOperatorExportCase& c = GetParam();
  ir::Model model = testing::export_test_model();
  QuantConfig config;
  config.format = QuantFormat::QOperator;
  config.activation_type = c.activation;
  config.weight_type = c.weight;
  config.calibrate_method = c.method;
  config.activation_symmetric = c.symmetric;
  config.reduce_range = testing::ort_int8_may_saturate();
  check_config(config);
  Plan plan = testing::calibrated_plan(model, config);
  ir::Model q = export_model(model, plan, config);

  // ORT's QOperator nodes (its QLinearOpsRegistry): every quantized op with a QLinear form gets it.
  for (const char* op : {"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearSigmoid",
                         "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool"})
    EXPECT_EQ(testing::count_ops(q, op), 1) << op;
  for (const char* op :
       {"Conv", "MatMul", "Add", "Mul", "Concat", "Sigmoid", "LeakyRelu", "AveragePool", "GlobalAveragePool"})
    EXPECT_EQ(testing::count_ops(q, op), 0) << op << " left in float";
  // Removed where the plan removed it (as ORT does), else float between DequantizeLinear and QuantizeLinear.
  EXPECT_EQ(testing::count_ops(q, "Relu"), plan.removed_activations.empty() ? 1 : 0);
  EXPECT_EQ(q.opset("com.microsoft"), 1);
  // Data movement on the quantized tensor, named as ORT names it.
  const ir::Value* pooled = q.graph->find_value("p_quantized");
  ASSERT_TRUE(pooled && pooled->producer());
  EXPECT_EQ(pooled->producer()->op_type, "MaxPool");
  EXPECT_EQ(q.graph->find_value("f_quantized")->producer()->op_type, "Reshape");
  EXPECT_EQ(q.graph->find_value("c_quantized") ? q.graph->find_value("c_quantized")->producer()->name
                                               : q.graph->find_value("r_quantized")->producer()->name,
            "conv_quant");
  EXPECT_EQ(q.graph->find_value("x_quantized")->producer()->name, "x_QuantizeLinear");
  EXPECT_EQ(q.graph->find_value("b_quantized")->initializer().dtype(), DataType::Int32);  // the int32 bias
  // The graph keeps its float interface: outputs come back through DequantizeLinear, by name.
  for (const ir::Value* out : q.graph->outputs()) EXPECT_EQ(out->producer()->op_type, "DequantizeLinear");

  fs::path dir = fs::temp_directory_path() / ("onnxptq_qop_" + std::to_string(getpid()) + "_" + c.label);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path path = dir / "q.onnx";
  ir::save_model(q, path);
  EXPECT_EQ(testing::onnx_check(path), "");

  QuantConfig qdq_config = config;
  qdq_config.format = QuantFormat::QDQ;
  ir::Model qdq = export_qdq(model, plan, qdq_config);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> ort = testing::ort_run(path, q, feeds, dir / std::to_string(seed));
    std::vector<ir::Tensor> engine = testing::run_model(ir::load_model(path), feeds);
    std::vector<ir::Tensor> from_qdq = testing::run_model(qdq, feeds);
    ASSERT_EQ(ort.size(), engine.size());
    for (size_t i = 0; i < ort.size(); ++i) {
      const std::string& name = q.graph->outputs()[i]->name();
      double step = plan.provider(name).params.at(0).scale;
      double vs_ort = testing::max_steps(ort[i], engine[i], step);
      double vs_qdq = testing::max_steps(from_qdq[i], engine[i], step);
      std::cout << c.label << " seed " << seed << " output " << name << ": |ORT - onnxptq| <= " << vs_ort
                << " steps, |QDQ - QOperator| <= " << vs_qdq << " steps\n";
      EXPECT_LE(vs_ort, 1.001) << name;
      if (c.compare_with_qdq) {
        EXPECT_LE(vs_qdq, 1.001) << name;
      }
    }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, QOperatorExport,
                         ::testing::Values(QOperatorExportCase{"u8s8_minmax", DataType::UInt8, DataType::Int8,
                                                               calib::Method::MinMax, false, true},
                                           QOperatorExportCase{"s8s8_pof2", DataType::Int8, DataType::Int8,
                                                               calib::Method::MinMSE},
                                           QOperatorExportCase{"u8u8_symmetric", DataType::UInt8, DataType::UInt8,
                                                               calib::Method::MinMax, true}),
                         [](const ::testing::TestParamInfo<QOperatorExportCase>& info) { return info.param.label; });

TEST(QOperatorExport, NodesThatCannotBeQLinearStayFloatBetweenDequantizeAndQuantize) {
  ir::Model model = testing::export_test_model();
  QuantConfig config;
  config.format = QuantFormat::QOperator;
  config.calibrate_method = calib::Method::MinMax;
  config.activation_type = DataType::UInt8;
  config.nodes_to_exclude = {"add"};
  Plan plan = testing::calibrated_plan(model, config);
  ir::Model q = export_model(model, plan, config);
  EXPECT_EQ(testing::count_ops(q, "QLinearAdd"), 0);
  const ir::Node* add = q.graph->find_value("a_QuantizeLinear_Input")->producer();
  ASSERT_TRUE(add);
  EXPECT_EQ(add->op_type, "Add");  // not quantized: its inputs come dequantized, by their own names
  for (const ir::Value* in : add->inputs()) EXPECT_EQ(in->producer()->op_type, "DequantizeLinear");
  // Gemm has no QLinear kernel here (ORT's QGemm): float, reading dequantized weights and bias.
  const ir::Node* gemm = q.graph->find_value("y_QuantizeLinear_Input")->producer();
  EXPECT_EQ(gemm->op_type, "Gemm");
  EXPECT_EQ(gemm->input(1)->producer()->op_type, "DequantizeLinear");
  EXPECT_EQ(gemm->input(2)->name(), "b2");
  EXPECT_EQ(gemm->input(2)->producer()->op_type, "DequantizeLinear");
  auto feeds = testing::random_feeds(model, 7);
  QuantConfig qdq_config = config;
  qdq_config.format = QuantFormat::QDQ;
  std::vector<ir::Tensor> a = testing::run_model(q, feeds);
  std::vector<ir::Tensor> b = testing::run_model(export_qdq(model, plan, qdq_config), feeds);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(testing::max_steps(a[i], b[i], plan.provider(q.graph->outputs()[i]->name()).params[0].scale), 1.001);
}

TEST(QOperatorExport, RefusedOptionsNameThemselves) {
  QuantConfig c;
  c.format = QuantFormat::QOperator;
  c.activation_type = DataType::Int16;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("8-bit"), std::string::npos);
  c.activation_type = DataType::UInt8;
  c.add_qdq_pair_to_weight = true;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("AddQDQPairToWeight"), std::string::npos);
  c.add_qdq_pair_to_weight = false;
  c.dedicated_qdq_pair = true;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("DedicatedQDQPair"), std::string::npos);
  c.dedicated_qdq_pair = false;
  EXPECT_EQ(testing::error_of([&] { check_config(c); }), "");
}

}  // namespace
}  // namespace onnxptq::quant
