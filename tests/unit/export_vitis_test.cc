// VitisQuantFormat.QDQ and VitisQuantFormat.FixNeuron exports (vai_q_onnx 1.16's
// VitisExtendedQuantizer and custom ops): the nodes, domains and attributes it writes, and the
// numbers. For 8- and 16-bit types a Vitis model computes exactly what the QDQ export of the same
// plan does (both are exact integer arithmetic); for 32-bit, float16 and bfloat16 types, and for
// FixNeuron, the model equals the float model run with every planned tensor replaced by the ops'
// formulas, written here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "ir/float16.h"
#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "quant/export.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;

struct VitisCombo {
  DataType activation, weight;
  calib::Method method;
};

std::string vitis_label(const VitisCombo& c) {
  return std::string(quant_type_name(c.activation)) + "_" + quant_type_name(c.weight) + "_" +
         calib::method_name(c.method);
}

QuantConfig format_config(QuantFormat format, const VitisCombo& c) {
  QuantConfig config;
  config.format = format;
  config.activation_type = c.activation;
  config.weight_type = c.weight;
  config.calibrate_method = c.method;
  check_config(config);
  return config;
}

// The model written to a file and read back (what a user gets), so types and attributes survive.
ir::Model reloaded_through_temp(const ir::Model& model, const std::string& name) {
  fs::path path = fs::temp_directory_path() / ("onnxptq_export_vitis_" + std::to_string(getpid()) + "_" + name);
  ir::save_model(model, path);
  EXPECT_EQ(testing::onnx_check(path), "") << name;  // python3-onnx's checker takes the custom domains too
  ir::Model loaded = ir::load_model(path);
  fs::remove(path);
  return loaded;
}

void expect_identical(const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dims(), b[i].dims()) << what;
    auto x = a[i].values<float>(), y = b[i].values<float>();
    size_t differ = 0;
    for (size_t k = 0; k < x.size(); ++k) differ += std::memcmp(&x[k], &y[k], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << what << ": output " << i << " differs in " << differ << " of " << x.size() << " values";
  }
}

// The quantized outputs differ from the float model's: the comparison is not of two float models.
void expect_quantized(const ir::Model& float_model, const std::vector<ir::Tensor>& q,
                      const std::map<std::string, ir::Tensor>& feeds) {
  std::vector<ir::Tensor> f = testing::run_model(float_model, feeds, false);
  size_t differ = 0;
  for (size_t i = 0; i < f.size(); ++i)
    for (size_t k = 0; k < f[i].values<float>().size(); ++k)
      differ += f[i].values<float>()[k] != q[i].values<float>()[k];
  EXPECT_GT(differ, 0u) << "the quantized model computes exactly the float model";
}

// ---------------------------------------------------------------------------------------------
// The ops' formulas, per element (vai_q_onnx's custom ops; ORT's int32 bias).

int64_t type_min(DataType t) {
  switch (t) {
    case DataType::Int8:
      return -128;
    case DataType::Int16:
      return -32768;
    case DataType::Int32:
      return std::numeric_limits<int32_t>::min();
    default:
      return 0;
  }
}
int64_t type_max(DataType t) {
  switch (t) {
    case DataType::Int8:
      return 127;
    case DataType::UInt8:
      return 255;
    case DataType::Int16:
      return 32767;
    case DataType::UInt16:
      return 65535;
    case DataType::Int32:
      return std::numeric_limits<int32_t>::max();
    case DataType::UInt32:
      return std::numeric_limits<uint32_t>::max();
    default:
      return 0;
  }
}

// VitisQuantizeLinear then VitisDequantizeLinear (vai_q_onnx 1.16's com.vai.quantize ops).
float vitis_fake_quantize(float x, DataType type, const qmath::ScaleZeroPoint& p) {
  const auto s = static_cast<float>(p.scale);
  if (type == DataType::Float16) {  // a cast; scale and zero point ignored
    float c = std::fmax(-65504.0f, std::fmin(65504.0f, x));
    return ir::half_to_float(ir::float_to_half(c));
  }
  if (type == DataType::BFloat16) {  // the zero point is stored as bfloat16
    float zp = ir::bfloat16_to_float(ir::float_to_bfloat16(static_cast<float>(p.float_zero_point)));
    return (ir::bfloat16_to_float(ir::float_to_bfloat16(x / s + zp)) - zp) * s;
  }
  double r = std::nearbyint(static_cast<double>(x / s));  // float32 division, round half to even
  auto q = static_cast<int64_t>(r) + p.zero_point;
  q = std::min(std::max(q, type_min(type)), type_max(type));  // the full range of the type
  return static_cast<float>(q - p.zero_point) * s;
}

// The int32 bias: rne(b / s_b) in double, clipped to int32 (ORT's quantize_bias_static_impl), then
// dequantized.
float int32_bias(float b, const qmath::ScaleZeroPoint& p) {
  const auto s = static_cast<float>(p.scale);
  double q = std::nearbyint(static_cast<double>(b) / static_cast<double>(s));
  q = std::min(std::max(q, -2147483648.0), 2147483647.0);
  return static_cast<float>(static_cast<int64_t>(q)) * s;
}

// FixNeuron (vai_q_onnx's qdq_ops.py, NumPy in float32):
// q = clip(rne(x / s) + zp, [-2^(b-1), 2^(b-1) - 1]), (q - zp) s.
float fix_neuron(float x, int bits, const qmath::ScaleZeroPoint& p) {
  const auto s = static_cast<float>(p.scale);
  const auto zp = static_cast<float>(p.zero_point);
  const float lo = -std::ldexp(1.0f, bits - 1), hi = std::ldexp(1.0f, bits - 1) - 1;
  float q = std::nearbyint(x / s) + zp;
  q = std::fmin(std::fmax(q, lo), hi);
  return (q - zp) * s;
}

using ElementFn = std::function<float(float, const TensorPlan&, const TensorPlan&)>;

// The float model with every planned tensor (weights and biases once, activations as they are
// produced) replaced element by element by `fn(x, entry, provider)`.
std::vector<ir::Tensor> simulate(const ir::Model& model, const Plan& plan,
                                 const std::map<std::string, ir::Tensor>& feeds, const ElementFn& fn) {
  auto apply = [&](const std::string& name, ir::Tensor& t) {
    const TensorPlan* e = plan.find(name);
    if (!e) return;
    const TensorPlan& p = plan.provider(name);
    ir::Tensor out = ir::Tensor::uninitialized(DataType::Float, t.dims());
    auto x = t.values<float>();
    auto y = out.mutable_values<float>();
    for (size_t i = 0; i < x.size(); ++i) y[i] = fn(x[i], *e, p);
    t = std::move(out);
  };
  engine::SessionOptions so;
  so.constant_transform = [&](const std::string& name, ir::Tensor& t) {
    const TensorPlan* e = plan.find(name);
    if (e && e->role != Role::Activation) apply(name, t);
  };
  engine::TensorTransform transform = [&](const std::string& name, ir::Tensor& t) {
    const TensorPlan* e = plan.find(name);
    if (e && e->role == Role::Activation) apply(name, t);
  };
  return testing::run_model(model, feeds, false, so, &transform);
}

// ---------------------------------------------------------------------------------------------

class VitisVsQdq : public ::testing::TestWithParam<VitisCombo> {};

TEST_P(VitisVsQdq, SameOutputsAsTheQdqExportOfThePlanBitForBit) {
  ir::Model model = testing::export_test_model();
  QuantConfig config = format_config(QuantFormat::VitisQDQ, GetParam());
  Plan plan = testing::calibrated_plan(model, config);
  EXPECT_TRUE(plan.removed_activations.empty());  // vai_q_onnx's Vitis quantizer keeps Relu

  ir::Model vitis = reloaded_through_temp(export_model(model, plan, config), "vitis.onnx");
  QuantConfig qdq_config = config;
  qdq_config.format = QuantFormat::QDQ;
  qdq_config.add_qdq_pair_to_weight = true;  // as vai_q_onnx forces for VitisQuantFormat
  ir::Model qdq = export_qdq(model, plan, qdq_config);

  EXPECT_EQ(vitis.opset("com.vai.quantize"), 1);
  EXPECT_EQ(testing::count_ops(vitis, "QuantizeLinear") + testing::count_ops(vitis, "DequantizeLinear"), 0);
  EXPECT_EQ(testing::count_ops(vitis, "VitisQuantizeLinear"), testing::count_ops(qdq, "QuantizeLinear"));
  EXPECT_EQ(testing::count_ops(vitis, "VitisDequantizeLinear"), testing::count_ops(qdq, "DequantizeLinear"));
  EXPECT_GT(testing::count_ops(vitis, "VitisQuantizeLinear"), 10);
  for (const auto& n : vitis.graph->nodes()) {
    if (n->op_type.rfind("Vitis", 0) != 0) continue;
    EXPECT_EQ(n->domain, "com.vai.quantize") << n->name;
    EXPECT_TRUE(n->attributes.empty()) << n->name << ": per-tensor Vitis ops have no attributes";
  }
  // Weights stay float with a pair; the int32 bias is stored with a VitisDequantizeLinear writing its name.
  EXPECT_EQ(vitis.graph->find_value("w_QuantizeLinear_Output")->producer()->op_type, "VitisQuantizeLinear");
  EXPECT_TRUE(vitis.graph->find_value("w")->has_initializer());
  EXPECT_EQ(vitis.graph->find_value("b")->producer()->name, "b_DequantizeLinear");
  EXPECT_EQ(vitis.graph->find_value("b_quantized")->initializer().dtype(), DataType::Int32);

  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> got = testing::run_model(vitis, feeds);
    expect_identical(got, testing::run_model(qdq, feeds), vitis_label(GetParam()));
    expect_quantized(model, got, feeds);
  }
}

INSTANTIATE_TEST_SUITE_P(EightAndSixteenBits, VitisVsQdq,
                         ::testing::Values(VitisCombo{DataType::UInt8, DataType::Int8, calib::Method::MinMax},
                                           VitisCombo{DataType::Int8, DataType::Int8, calib::Method::MinMSE},
                                           VitisCombo{DataType::UInt8, DataType::UInt8, calib::Method::NonOverflow},
                                           VitisCombo{DataType::Int16, DataType::Int8, calib::Method::MinMax},
                                           VitisCombo{DataType::UInt16, DataType::Int16, calib::Method::MinMax},
                                           VitisCombo{DataType::Int16, DataType::Int16, calib::Method::NonOverflow}),
                         [](const ::testing::TestParamInfo<VitisCombo>& info) { return vitis_label(info.param); });

class VitisWideTypes : public ::testing::TestWithParam<VitisCombo> {};

TEST_P(VitisWideTypes, EqualsTheFloatModelWithTheSpecsFormulasApplied) {
  ir::Model model = testing::export_test_model();
  QuantConfig config = format_config(QuantFormat::VitisQDQ, GetParam());
  Plan plan = testing::calibrated_plan(model, config);
  ir::Model vitis = reloaded_through_temp(export_model(model, plan, config), "wide.onnx");
  int zero_points = 0;  // each of the plan's type (float16 and bfloat16 ones too)
  for (const auto& v : vitis.graph->initializers()) {
    const std::string suffix = "_zero_point";
    if (!v->name().ends_with(suffix)) continue;
    const TensorPlan* t = plan.find(v->name().substr(0, v->name().size() - suffix.size()));
    if (!t) continue;
    EXPECT_EQ(v->initializer().dtype(), t->type) << v->name();
    ++zero_points;
  }
  EXPECT_GT(zero_points, 10);
  ElementFn fn = [](float x, const TensorPlan& t, const TensorPlan& p) {
    return t.role == Role::Bias ? int32_bias(x, p.params[0]) : vitis_fake_quantize(x, p.type, p.params[0]);
  };
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> got = testing::run_model(vitis, feeds, false);
    expect_identical(got, simulate(model, plan, feeds, fn), vitis_label(GetParam()));
    expect_quantized(model, got, feeds);
  }
}

INSTANTIATE_TEST_SUITE_P(ThirtyTwoBitsAndFloats, VitisWideTypes,
                         ::testing::Values(VitisCombo{DataType::Int32, DataType::Int32, calib::Method::MinMax},
                                           VitisCombo{DataType::UInt32, DataType::Int32, calib::Method::MinMax},
                                           VitisCombo{DataType::Int32, DataType::Int8, calib::Method::NonOverflow},
                                           VitisCombo{DataType::Float16, DataType::Float16, calib::Method::MinMax},
                                           VitisCombo{DataType::BFloat16, DataType::BFloat16, calib::Method::MinMax},
                                           VitisCombo{DataType::BFloat16, DataType::Int8, calib::Method::Percentile}),
                         [](const ::testing::TestParamInfo<VitisCombo>& info) { return vitis_label(info.param); });

class FixNeuronExport : public ::testing::TestWithParam<calib::Method> {};

TEST_P(FixNeuronExport, OneFixNeuronPerTensorComputingTheSpecsFormula) {
  ir::Model model = testing::export_test_model();
  QuantConfig config = format_config(QuantFormat::FixNeuron, {DataType::Int8, DataType::Int8, GetParam()});
  Plan plan = testing::calibrated_plan(model, config);
  ir::Model fixed = reloaded_through_temp(export_model(model, plan, config), "fix.onnx");

  EXPECT_EQ(fixed.opset("ai.onnx.contrib"), 1);
  EXPECT_EQ(testing::count_ops(fixed, "FixNeuron"), static_cast<int>(plan.tensors.size()));
  EXPECT_EQ(testing::count_ops(fixed, "QuantizeLinear") + testing::count_ops(fixed, "DequantizeLinear"), 0);
  for (const auto& n : fixed.graph->nodes()) {
    if (n->op_type != "FixNeuron") continue;
    EXPECT_EQ(n->domain, "ai.onnx.contrib");
    ASSERT_EQ(n->inputs().size(), 3u);
    std::string tensor = n->name.substr(0, n->name.rfind("_DequantizeLinear"));
    const TensorPlan* t = plan.find(tensor);
    ASSERT_TRUE(t) << n->name << " is not named <tensor>_DequantizeLinear";
    EXPECT_EQ(n->attr_string("bit_width", ""), t->role == Role::Bias ? "32" : "8") << n->name;
    float scale = n->input(1)->initializer().values<float>()[0];
    EXPECT_EQ(n->attr_string("pos", ""), std::to_string(std::lround(-std::log2(scale)))) << n->name;
    EXPECT_EQ(n->input(2)->initializer().dtype(), DataType::Int8) << n->name;
  }
  EXPECT_EQ(fixed.graph->find_value("y")->producer()->op_type, "FixNeuron");  // outputs keep their names

  ElementFn fn = [](float x, const TensorPlan& t, const TensorPlan& p) {
    return fix_neuron(x, t.role == Role::Bias ? 32 : 8, p.params[0]);
  };
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> got = testing::run_model(fixed, feeds, false);
    expect_identical(got, simulate(model, plan, feeds, fn), calib::method_name(GetParam()));
    expect_quantized(model, got, feeds);
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, FixNeuronExport,
                         ::testing::Values(calib::Method::MinMSE, calib::Method::NonOverflow, calib::Method::MinMax),
                         [](const ::testing::TestParamInfo<calib::Method>& info) {
                           return std::string(calib::method_name(info.param));
                         });

TEST(VitisFormats, RefusedCombinationsNameTheOption) {
  QuantConfig c;
  c.format = QuantFormat::VitisQDQ;
  c.per_channel = true;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("per_channel"), std::string::npos);
  c.format = QuantFormat::FixNeuron;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("per_channel"), std::string::npos);
  c.per_channel = false;
  c.activation_type = DataType::UInt8;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("QInt8 only"), std::string::npos);
  c.format = QuantFormat::VitisQDQ;
  c.activation_type = DataType::Float16;
  c.weight_type = DataType::BFloat16;
  EXPECT_NE(testing::error_of([&] { check_config(c); }).find("power-of-two"), std::string::npos);
  c.calibrate_method = calib::Method::MinMax;
  EXPECT_EQ(testing::error_of([&] { check_config(c); }), "");

  QuantConfig e;
  apply_extra_option(e, "UseQDQVitisCustomOps", false);
  EXPECT_EQ(testing::error_of([&] { check_config(e); }),
            "UseQDQVitisCustomOps false chooses the ops of VitisQuantFormat.QDQ, not of QDQ");
  e.format = QuantFormat::VitisQDQ;
  e.activation_type = DataType::UInt8;
  EXPECT_NE(testing::error_of([&] { check_config(e); }).find("take int8 only, not QUInt8"), std::string::npos);
  e.activation_type = DataType::Int8;
  e.int32_bias = true;
  EXPECT_NE(testing::error_of([&] { check_config(e); }).find("cannot hold an int32 bias"), std::string::npos);
}

// UseQDQVitisCustomOps false: vai_q_onnx's ai.onnx.contrib QuantizeLinear / DequantizeLinear with
// bit_width "8" and pos = -log2(scale), biases as int8 weights; the same numbers as the
// com.vai.quantize form of a plan whose biases are weights too.
TEST(VitisFormats, ContribOpsWithoutVitisCustomOps) {
  ir::Model model = testing::export_test_model();
  QuantConfig config =
      format_config(QuantFormat::VitisQDQ, VitisCombo{DataType::Int8, DataType::Int8, calib::Method::MinMSE});
  apply_extra_option(config, "UseQDQVitisCustomOps", false);
  EXPECT_EQ(testing::error_of([&] { check_config(config); }), "");
  Plan plan = testing::calibrated_plan(model, config);
  const TensorPlan* b = plan.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->role, Role::Weight);
  EXPECT_EQ(b->type, DataType::Int8);
  ir::Model contrib = reloaded_through_temp(export_model(model, plan, config), "contrib.onnx");
  QuantConfig vitis_config = config;
  vitis_config.use_qdq_vitis_custom_ops = true;
  ir::Model vitis = export_model(model, plan, vitis_config);

  EXPECT_EQ(testing::count_ops(contrib, "QuantizeLinear"), testing::count_ops(vitis, "VitisQuantizeLinear"));
  EXPECT_EQ(testing::count_ops(contrib, "DequantizeLinear"), testing::count_ops(vitis, "VitisDequantizeLinear"));
  EXPECT_GT(testing::count_ops(contrib, "QuantizeLinear"), 10);
  for (const auto& n : contrib.graph->nodes()) {
    if (n->op_type != "QuantizeLinear" && n->op_type != "DequantizeLinear") continue;
    EXPECT_EQ(n->domain, "ai.onnx.contrib") << n->name;
    EXPECT_EQ(n->attr_string("bit_width", ""), "8") << n->name;
    float scale = passes::float_constant_of(n->input(1))->values<float>()[0];
    int e = 0;
    EXPECT_EQ(std::frexp(scale, &e), 0.5f) << n->name << ": a power-of-two scale";
    EXPECT_EQ(n->attr_string("pos", ""), std::to_string(1 - e)) << n->name;
  }
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    expect_identical(testing::run_model(contrib, feeds), testing::run_model(vitis, feeds), "contrib");
  }
}

}  // namespace
}  // namespace onnxptq::quant
