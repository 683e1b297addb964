// ONNX Runtime (npm onnxruntime-node) runs what the SimulateDPU passes write: the bfloat16 Softmax
// subgraph (float ops between Casts to bfloat16 and back) and the Muls after HardSigmoid and
// pools, to the same values as the engine (whose results passes_dpu_test.cc checks against
// vai_q_onnx's formulas).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "passes/dpu.h"
#include "support/export_models.h"

namespace onnxptq::passes {
namespace {

namespace fs = std::filesystem;

TEST(DpuPassesInOnnxRuntime, SoftmaxHardSigmoidAndPoolAgreeWithTheEngine) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 2, 6, 6});
  g.add_input(x);
  auto out = [&](const std::string& name) {
    ir::Value* v = g.add_value(name);
    g.add_output(v);
    return v;
  };
  g.add_node("Softmax", {x}, {out("softmax")});
  ir::Node* hs = g.add_node("HardSigmoid", {x}, {out("hard_sigmoid")});
  hs->set_attribute(ir::Attribute::of_float("alpha", 1.0f / 6.0f));
  g.add_node("GlobalAveragePool", {x}, {out("gap")});
  PassContext context;
  for (const PassInfo& p : dpu_simulation_passes()) p.run(m, context);
  ASSERT_EQ(testing::count_ops(m, "Softmax"), 0);
  ASSERT_EQ(testing::count_ops(m, "Mul"), 2 + 6);  // the scales, and the softmax's six

  fs::path dir = fs::temp_directory_path() / ("onnxptq_dpu_ort_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ir::save_model(m, dir / "model.onnx");
  ir::Tensor data(ir::DataType::Float, {1, 2, 6, 6});
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (float& v : data.mutable_values<float>()) v = dist(rng);
  std::map<std::string, ir::Tensor> feeds = {{"x", data}};
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "model.onnx", m, feeds, dir);
  std::vector<ir::Tensor> engine = testing::run_model(m, feeds);
  fs::remove_all(dir);
  ASSERT_EQ(ort.size(), 3u);
  // The softmax subgraph rounds to bfloat16 at every step: both runtimes must land on the same values.
  for (size_t i = 0; i < engine[0].values<float>().size(); ++i)
    EXPECT_EQ(ort[0].values<float>()[i], engine[0].values<float>()[i]) << i;
  for (size_t o = 1; o < 3; ++o)  // float ops: the same up to the order of a sum
    for (size_t i = 0; i < engine[o].values<float>().size(); ++i)
      EXPECT_NEAR(ort[o].values<float>()[i], engine[o].values<float>()[i], 1e-6) << o << " " << i;
}

}  // namespace
}  // namespace onnxptq::passes
