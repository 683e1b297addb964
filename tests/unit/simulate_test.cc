// The simulation (fake quantization from the plan on the float model) gives exactly what the
// engine computes from the exported QDQ model (docs/ARCHITECTURE.md: simulate from the plan, export
// from the plan): on a small graph with every kind of planned tensor, and on real models.
#include "quant/simulate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "calib/data_reader.h"
#include "engine/session.h"
#include "quant/quantize.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;

// Simulation and the exported model run by the engine on one sample nobody calibrated on.
void expect_simulation_equals_export(const ir::Model& model, const QuantConfig& config) {
  calib::RandomReaderOptions ro;
  ro.count = 4;
  ro.seed = 3;
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  QuantizeResult r = quantize_static(model, *reader, config);
  const ir::Model& float_model = r.prepared ? *r.prepared : model;

  ro.seed = 7;
  ro.count = 1;
  std::map<std::string, ir::Tensor> feeds = *calib::make_random_reader(model.graph->fed_inputs(), ro)->next();
  Simulation simulation(float_model, r.plan, config, 2);
  engine::SessionOptions so;
  so.threads = 2;
  engine::Session exported(r.model, so);
  std::vector<ir::Tensor> simulated = simulation.run(feeds), ran = exported.run(feeds);
  ASSERT_EQ(simulated.size(), ran.size());
  for (size_t i = 0; i < ran.size(); ++i) {
    ASSERT_EQ(simulated[i].dims(), ran[i].dims());
    std::span<const float> a = simulated[i].values<float>(), b = ran[i].values<float>();
    size_t differ = 0;
    for (size_t k = 0; k < a.size(); ++k) differ += a[k] != b[k];
    EXPECT_EQ(differ, 0u) << "output " << i << " of " << a.size() << " values";
  }
}

// x -> Gemm(W, B, beta 0.5) -> Relu -> Mul(constant) -> y: a weight, an int32 bias holding beta,
// a Relu removed into its producer, a constant quantized as an activation.
ir::Model small_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 8});
  g.add_input(x);
  auto init = [&](const std::string& name, std::vector<int64_t> dims, float step) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = step * static_cast<float>((i * 7) % 11 - 5);
    ir::Value* value = g.add_value(name);
    g.set_initializer(value, ir::Tensor::from_values<float>(dims, v));
    return value;
  };
  ir::Value *gemm = g.add_value("gemm"), *relu = g.add_value("relu"), *y = g.add_value("y");
  ir::Node* n = g.add_node("Gemm", {x, init("w", {4, 8}, 0.13f), init("b", {4}, 0.21f)}, {gemm}, "gemm");
  n->set_attribute(ir::Attribute::of_int("transB", 1));
  n->set_attribute(ir::Attribute::of_float("beta", 0.5f));
  g.add_node("Relu", {gemm}, {relu}, "relu");
  g.add_node("Mul", {relu, init("c", {4}, 0.37f)}, {y}, "mul");
  y->type = ir::ValueType::tensor(ir::DataType::Float, {1, 4});
  g.add_output(y);
  return m;
}

QuantConfig u8s8() {
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_type = ir::DataType::UInt8;
  c.calib.threads = 2;
  return c;
}

QuantConfig pof2() {
  QuantConfig c;  // the seeds' default: power-of-two MinMSE, int8
  c.calib.threads = 2;
  return c;
}

TEST(Simulation, SmallGraphEqualsTheExportedModel) {
  ir::Model m = small_model();
  expect_simulation_equals_export(m, u8s8());
  expect_simulation_equals_export(m, pof2());
  QuantConfig per_channel = u8s8();
  per_channel.per_channel = true;
  expect_simulation_equals_export(m, per_channel);
}

// ExtendedQuantFormat.QDQ: com.microsoft Q/DQ for 8/16 bits, com.amd.quark ops (Quark's float16
// arithmetic) for the wide types; FoldRelu removes the Relu, the constant takes the weight type.
TEST(Simulation, ExtendedQdqEqualsTheExportedModel) {
  ir::Model m = small_model();
  for (auto [activation, weight, symmetric] :
       std::vector<std::tuple<ir::DataType, ir::DataType, bool>>{{ir::DataType::Int8, ir::DataType::Int8, false},
                                                                 {ir::DataType::Int16, ir::DataType::Int8, true},
                                                                 {ir::DataType::Int32, ir::DataType::Int8, true},
                                                                 {ir::DataType::UInt32, ir::DataType::Int32, false},
                                                                 {ir::DataType::Float16, ir::DataType::Float16, true},
                                                                 {ir::DataType::BFloat16, ir::DataType::Int8, true}}) {
    QuantConfig c = u8s8();
    c.format = QuantFormat::ExtendedQDQ;
    c.activation_type = activation;
    c.weight_type = weight;
    c.activation_symmetric = symmetric;
    c.fold_relu = true;
    c.align_eltwise_quant_type = true;
    SCOPED_TRACE(quant_type_name(activation));
    expect_simulation_equals_export(m, c);
  }
}

TEST(Simulation, RealModelsEqualTheExportedModel) {
  for (const char* name : {"resnet18", "mobilenet_v2"}) {
    fs::path path = fs::path(ONNXPTQ_MODELS_DIR) / (std::string(name) + ".onnx");
    ASSERT_TRUE(fs::exists(path)) << path;
    ir::Model m = ir::load_model(path);
    SCOPED_TRACE(name);
    expect_simulation_equals_export(m, u8s8());
    expect_simulation_equals_export(m, pof2());
  }
}

TEST(Simulation, ErrorsNameTheTensor) {
  ir::Model m = small_model();
  Plan plan;
  TensorPlan t;
  t.name = "nowhere";
  plan.tensors.push_back(t);
  plan.index["nowhere"] = 0;
  EXPECT_EQ(testing::error_of([&] { Simulation(m, plan, u8s8()); }),
            "simulation: the planned tensor 'nowhere' is not in the model");
  plan.tensors[0].name = "w";
  plan.tensors[0].role = Role::Weight;
  plan.index = {{"w", 0}};
  EXPECT_EQ(testing::error_of([&] { Simulation(m, plan, u8s8()); }),
            "simulation: weight 'w' has no quantized values (parameters not assigned)");
}

}  // namespace
}  // namespace onnxptq::quant
