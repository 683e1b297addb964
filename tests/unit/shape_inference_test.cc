// infer_shapes: every value of a real model typed (element type and rank) as ONNX Runtime computes
// it (every intermediate value made a graph output and run there), the model's symbolic dims kept
// where ONNX propagates them, the options that turn parts off, and guess_output_rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/model.h"
#include "passes/pipeline.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kOcr;
using testing::kSource;

std::string ort_dtype(ir::DataType t) {
  if (t == ir::DataType::Float) return "float32";
  if (t == ir::DataType::Double) return "float64";
  return std::string(ir::data_type_name(t));
}

std::string run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// Every node output of `model` typed by infer_shapes agrees with what ONNX Runtime computes for it
// at input shape `shape` of input x: element type and rank, and every dim given as a number.
void expect_types_match_ort(const fs::path& path, const std::string& shape, const std::string& label) {
  ir::Model model = ir::load_model(path);
  passes::PassContext context;
  passes::infer_shapes(model, context);
  ir::Model probe = ir::clone_model(model);
  size_t typed = 0, values = 0;
  for (const auto& node : probe.graph->nodes())
    for (ir::Value* v : node->outputs())
      if (v && !probe.graph->is_output(v)) probe.graph->add_output(v);
  fs::path dir = fs::temp_directory_path() / ("onnxptq_shapes_" + std::to_string(getpid()) + "_" + label);
  fs::create_directories(dir);
  ir::save_model(probe, dir / "probe.onnx");
  std::string json = run_capture("node " + (kSource / "tests/oracle/ort_run.js").string() + " " +
                                 (dir / "probe.onnx").string() + " --random 1 --shape x=" + shape + " --json");
  fs::remove_all(dir);
  ASSERT_FALSE(json.empty()) << "ONNX Runtime did not run " << label;
  nlohmann::json ort = nlohmann::json::parse(json);
  for (const auto& out : ort["outputs"]) {
    const ir::Value* v = model.graph->find_value(out["name"].get<std::string>());
    ASSERT_TRUE(v) << out["name"];
    ++values;
    if (!v->type.is_tensor() || v->type.elem_type == ir::DataType::Undefined || !v->type.has_shape) continue;
    ++typed;
    EXPECT_EQ(ort_dtype(v->type.elem_type), out["dtype"].get<std::string>()) << v->name();
    std::vector<int64_t> dims = out["shape"];
    ASSERT_EQ(v->type.shape.size(), dims.size()) << v->name() << " " << v->type.to_string();
    for (size_t i = 0; i < dims.size(); ++i) {
      if (v->type.shape[i].has_value) {
        EXPECT_EQ(v->type.shape[i].value, dims[i]) << v->name() << " dim " << i;
      }
    }
  }
  std::cout << label << ": " << typed << " of " << values << " values typed\n";
  EXPECT_EQ(typed, values) << label << ": values left without element type or rank";
}

TEST(ShapeInference, PaddleOcrRecognizerEveryValueTyped) {
  expect_types_match_ort(kOcr / "ch_PP-OCRv4_rec_infer.onnx", "1x3x48x160", "ppocr_rec");
}

TEST(ShapeInference, PaddleOcrDetectorEveryValueTyped) {
  expect_types_match_ort(kOcr / "ch_PP-OCRv4_det_infer.onnx", "1x3x96x128", "ppocr_det");
}

// x: float[N,3,H,W] -> Relu -> Transpose(0,2,3,1) -> y, with no value_info.
ir::Model symbolic_model() {
  ir::Model model;
  model.set_opset("", 13);
  ir::Graph& g = *model.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float);
  x->type.has_shape = true;
  x->type.shape = {ir::Dim::symbol("N"), ir::Dim::of(3), ir::Dim::symbol("H"), ir::Dim::symbol("W")};
  g.add_input(x);
  ir::Value* r = g.add_value("r");
  ir::Value* y = g.add_value("y");
  y->type = ir::ValueType::tensor(ir::DataType::Float);
  g.add_output(y);
  g.add_node("Relu", {x}, {r}, "relu");
  g.add_node("Transpose", {r}, {y}, "transpose")->set_attribute(ir::Attribute::of_ints("perm", {0, 2, 3, 1}));
  return model;
}

TEST(ShapeInference, KeepsSymbolicDims) {
  ir::Model model = symbolic_model();
  passes::PassContext context;
  EXPECT_TRUE(passes::infer_shapes(model, context));
  EXPECT_EQ(model.graph->find_value("r")->type.to_string(), "float[N,3,H,W]");
  EXPECT_EQ(model.graph->find_value("y")->type.to_string(), "float[N,H,W,3]");
  // The intermediate value is written out as value_info.
  ASSERT_EQ(model.graph->value_info().size(), 1u);
  EXPECT_EQ(model.graph->value_info()[0]->name(), "r");
}

TEST(ShapeInference, SkippingBothChangesNothing) {
  ir::Model model = symbolic_model();
  passes::PassContext context;
  context.onnx_shape = context.engine_shape = false;
  EXPECT_FALSE(passes::infer_shapes(model, context));
  EXPECT_FALSE(model.graph->find_value("r")->type.is_tensor());
}

TEST(ShapeInference, EngineRunAloneGivesTypeAndRank) {
  ir::Model model = symbolic_model();
  passes::PassContext context;
  context.onnx_shape = false;
  EXPECT_TRUE(passes::infer_shapes(model, context));
  // A dynamic input: one sample's sizes are not the model's, so only type and rank.
  EXPECT_EQ(model.graph->find_value("r")->type.to_string(), "float[?,?,?,?]");
}

TEST(ShapeInference, GuessOutputRankForAnUnknownOp) {
  ir::Model model = symbolic_model();
  model.set_opset("my.custom", 1);
  ir::Graph& g = *model.graph;
  ir::Value* c = g.add_value("c");
  ir::Value* z = g.add_value("z");
  g.add_output(z);
  g.add_node("Mystery", {g.find_value("y")}, {c}, "mystery", "my.custom");
  g.add_node("Relu", {c}, {z}, "relu2");
  passes::PassContext context;
  passes::infer_shapes(model, context);
  EXPECT_FALSE(model.graph->find_value("c")->type.has_shape);  // nobody knows Mystery
  context.guess_output_rank = true;
  EXPECT_TRUE(passes::infer_shapes(model, context));
  EXPECT_EQ(model.graph->find_value("c")->type.to_string(), "float[?,?,?,?]");
}

}  // namespace
}  // namespace onnxptq
