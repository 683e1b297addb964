// prepare: the PP-OCR classifier (opset 9, BatchNormalization after its convolutions) prepared
// with and without optimisation: opset 13, every value typed, libonnx's checker passes, ONNX
// Runtime's outputs on the prepared model match its outputs on the original; and passes by name.
#include "passes/pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/session.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "passes/onnx_bridge.h"
#include "support/one_node.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kCls;
using testing::kSource;

// ONNX Runtime's output 0 for `model` fed the seeded random x of shape `shape`.
ir::Tensor ort_output(const ir::Model& model, const std::string& label, const std::string& shape) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_pipeline_" + std::to_string(getpid()) + "_" + label);
  fs::remove_all(dir);
  fs::create_directories(dir);
  ir::save_model(model, dir / "m.onnx");
  std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " + (dir / "m.onnx").string() +
                        " --random 5 --shape x=" + shape + " --threads 2 --outputs " + (dir / "out").string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  fs::path file = dir / "out" / (model.graph->outputs()[0]->name() + ".npy");
  ir::Tensor t = fs::exists(file) ? ir::load_npy(file) : ir::Tensor();
  fs::remove_all(dir);
  return t;
}

double pipeline_relative_error(const ir::Tensor& expected, const ir::Tensor& got) {
  if (expected.dims() != got.dims() || expected.dtype() != ir::DataType::Float) return INFINITY;
  auto e = expected.values<float>(), g = got.values<float>();
  auto [lo, hi] = std::minmax_element(e.begin(), e.end());
  double range = std::max(static_cast<double>(*hi - *lo), 1e-12), worst = 0;
  for (size_t i = 0; i < e.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(e[i]) - g[i]));
  return std::isnan(worst) ? INFINITY : worst / range;
}

size_t count_op(const ir::Model& model, const std::string& op) {
  return std::count_if(model.graph->nodes().begin(), model.graph->nodes().end(),
                       [&](const auto& n) { return n->op_type == op; });
}

size_t untyped(const ir::Model& model) {
  size_t n = 0;
  for (const auto& node : model.graph->nodes())
    for (const ir::Value* v : node->outputs())
      n += v && !(v->type.is_tensor() && v->type.elem_type != ir::DataType::Undefined && v->type.has_shape);
  return n;
}

TEST(Pipeline, PreparesThePaddleOcrClassifier) {
  ir::Model original = ir::load_model(kCls);
  ir::Tensor expected = ort_output(original, "original", "1x3x48x192");
  for (bool skip_optimization : {true, false}) {
    ir::Model model = ir::clone_model(original);
    passes::PrepareOptions options;
    options.skip_optimization = skip_optimization;
    passes::PrepareResult result = passes::prepare(model, options);
    std::string label = skip_optimization ? "shapes_and_opset" : "optimized";
    for (const std::string& line : result.log) std::cout << label << ": " << line << "\n";
    EXPECT_TRUE(result.changed);
    EXPECT_EQ(model.opset(""), 13);
    EXPECT_EQ(untyped(model), 0u) << label;
    EXPECT_EQ(testing::error_of([&] { passes::onnx_check_model(model); }), "") << label;
    double error = pipeline_relative_error(expected, ort_output(model, label, "1x3x48x192"));
    std::cout << label << ": " << model.graph->node_count() << " nodes, " << count_op(model, "BatchNormalization")
              << " BatchNormalization; ORT original vs prepared: " << error << "\n";
    EXPECT_LE(error, 1e-5) << label;
    if (skip_optimization) {
      EXPECT_EQ(count_op(model, "BatchNormalization"), count_op(original, "BatchNormalization"));
    }
  }
}

TEST(Pipeline, ChosenPassesOnly) {
  ir::Model model = ir::load_model(kCls);
  size_t nodes = model.graph->node_count();
  passes::PrepareOptions options;
  options.passes = {"infer_shapes"};
  passes::prepare(model, options);
  EXPECT_EQ(model.opset(""), 9);
  EXPECT_EQ(model.graph->node_count(), nodes);
  EXPECT_EQ(untyped(model), 0u);
}

TEST(Pipeline, PassesByName) {
  EXPECT_STREQ(passes::find_pass("upgrade_opset").name, "upgrade_opset");
  EXPECT_STREQ(passes::find_pass("infer_shapes").name, "infer_shapes");
  std::string message = testing::error_of([] { passes::find_pass("fold_everything"); });
  EXPECT_NE(message.find("unknown pass 'fold_everything'"), std::string::npos) << message;
  EXPECT_NE(message.find("upgrade_opset"), std::string::npos) << message;
  // An unknown name is refused before any pass runs.
  ir::Model model = ir::load_model(kCls);
  passes::PrepareOptions options;
  options.passes = {"upgrade_opset", "fold_everything"};
  EXPECT_NE(testing::error_of([&] { passes::prepare(model, options); }), "");
  EXPECT_EQ(model.opset(""), 9);
}

}  // namespace
}  // namespace onnxptq
