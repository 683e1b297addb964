// Float average pools round as ONNX Runtime's do, to the bit: a window's sum in another order
// moves a value across a rounding boundary now and then, and a quantized model then differs from
// ORT by a whole step there (the ExtendedQuantFormat int8 case of export_extended_test.cc did).
// Windows in the vectorised order (columns first), in the row-by-row order (stride 3), a window
// covering the whole input, borders with and without the padding counted, ceil_mode, and
// GlobalAveragePool over a plane that is no multiple of 4 long.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "support/export_models.h"

namespace onnxptq::engine {
namespace {

namespace fs = std::filesystem;

TEST(KernelsPoolVsOrt, AveragePoolsRoundAsOnnxRuntime) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {2, 3, 11, 13});
  g.add_input(x);
  auto pool = [&](const std::string& name, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                  std::vector<int64_t> pads, int64_t include_pad = 0, int64_t ceil = 0) {
    ir::Value* y = g.add_value(name);
    g.add_output(y);
    ir::Node* n = g.add_node("AveragePool", {x}, {y}, name);
    n->set_attribute(ir::Attribute::of_ints("kernel_shape", std::move(kernel)));
    n->set_attribute(ir::Attribute::of_ints("strides", std::move(strides)));
    n->set_attribute(ir::Attribute::of_ints("pads", std::move(pads)));
    n->set_attribute(ir::Attribute::of_int("count_include_pad", include_pad));
    n->set_attribute(ir::Attribute::of_int("ceil_mode", ceil));
  };
  pool("k2s2", {2, 2}, {2, 2}, {0, 0, 0, 0});
  pool("k3s1_pad", {3, 3}, {1, 1}, {1, 1, 1, 1});
  pool("k3s1_pad_counted", {3, 3}, {1, 1}, {1, 1, 1, 1}, 1);
  pool("k5x3s2_ceil", {5, 3}, {2, 2}, {2, 1, 0, 1}, 0, 1);
  pool("k3s3_rows", {3, 3}, {3, 3}, {0, 0, 0, 0});
  pool("whole_plane", {11, 13}, {1, 1}, {0, 0, 0, 0});
  ir::Value* gap = g.add_value("gap");
  g.add_output(gap);
  g.add_node("GlobalAveragePool", {x}, {gap}, "gap");

  ir::Tensor data(ir::DataType::Float, {2, 3, 11, 13});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (float& v : data.mutable_values<float>()) v = dist(rng);
  std::map<std::string, ir::Tensor> feeds = {{"x", data}};

  fs::path dir = fs::temp_directory_path() / ("onnxptq_pool_ort_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ir::save_model(m, dir / "model.onnx");
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "model.onnx", m, feeds, dir, true);
  std::vector<ir::Tensor> engine = testing::run_model(m, feeds);
  fs::remove_all(dir);
  ASSERT_EQ(ort.size(), engine.size());
  for (size_t o = 0; o < ort.size(); ++o) {
    const std::string& name = g.outputs()[o]->name();
    ASSERT_EQ(ort[o].dims(), engine[o].dims()) << name;
    auto a = ort[o].values<float>(), b = engine[o].values<float>();
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << a.size() << " values differ from ORT's";
  }
}

}  // namespace
}  // namespace onnxptq::engine
