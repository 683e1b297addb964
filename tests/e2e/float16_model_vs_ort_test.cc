// QuantizeFP16 and UseFP32Scale: a float16 model (the exporters' test model made float16 by the
// fp32_to_fp16 tool) quantized as one. With UseFP32Scale the written model is the float32 model's
// quantization between Casts: its outputs are those of quantizing the model converted to float32
// (convert_fp16_to_fp32), rounded to float16. Without it every float is float16, Q/DQ scales too.
// ONNX Runtime (npm onnxruntime-node) runs both as the engine does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "ir/float16.h"
#include "onnxptq/convert.h"
#include "onnxptq/onnxptq.h"
#include "passes/rewrite.h"
#include "quant/float16_model.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;

Model float16_test_model() {
  Model float32(std::make_shared<ir::Model>(testing::export_test_model()));
  return fp32_to_fp16(float32).model;
}

QuantizeOutcome quantize_with(const Model& model, Config config) {
  auto reader = random_reader(model, {.count = 4, .seed = 5});
  return quantize(model, *reader, config);
}

// random_feeds' values for `model`'s inputs, rounded to float16 where an input is float16.
std::map<std::string, ir::Tensor> feeds_for(const ir::Model& model, uint32_t seed) {
  std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, seed);
  for (const ir::Value* in : model.graph->fed_inputs()) {
    if (in->type.elem_type != ir::DataType::Float16) continue;
    ir::Tensor& t = feeds.at(in->name());
    ir::Tensor half = ir::Tensor::uninitialized(ir::DataType::Float16, t.dims());
    ir::float_to_half(t.values<float>().data(), half.mutable_values<uint16_t>().data(), static_cast<size_t>(t.size()));
    t = half;
  }
  return feeds;
}

ir::Tensor as_float32(const ir::Tensor& t) {
  if (t.dtype() != ir::DataType::Float16) return t;
  ir::Tensor f = ir::Tensor::uninitialized(ir::DataType::Float, t.dims());
  ir::half_to_float(t.values<uint16_t>().data(), f.mutable_values<float>().data(), static_cast<size_t>(t.size()));
  return f;
}

// The scale of the DequantizeLinear behind graph output `name` (through its Cast, if any).
double output_step_through_cast(const ir::Model& model, const std::string& name) {
  const ir::Node* n = model.graph->find_value(name)->producer();
  if (n && n->op_type == "Cast") n = n->input(0)->producer();
  if (!n || n->op_type.find("DequantizeLinear") == std::string::npos) return 0;
  const ir::Tensor* scale = passes::constant_of(n->input(1));
  return scale && scale->size() == 1 ? testing::values_of(as_float32(*scale))[0] : 0;
}

// ORT's literal run of `written` and the engine's agree within one quantization step per output.
// `optimized`: ORT also loads and runs it with its graph optimizations (as deployed).
void expect_ort_agrees(const Model& q, const fs::path& dir, bool optimized = true) {
  const ir::Model& written = q.ir();
  const fs::path file = dir / "quantized.onnx";
  q.save(file);
  EXPECT_EQ(testing::onnx_check(file), "");
  std::map<std::string, ir::Tensor> feeds = feeds_for(written, 21);
  if (optimized) testing::ort_run(file, written, feeds, dir / "optimized");
  std::vector<ir::Tensor> ort = testing::ort_run(file, written, feeds, dir / "literal", true);
  std::vector<ir::Tensor> engine = testing::run_model(written, feeds);
  ASSERT_EQ(ort.size(), engine.size());
  for (size_t i = 0; i < ort.size(); ++i) {
    const std::string& name = written.graph->outputs()[i]->name();
    const double step = output_step_through_cast(written, name);
    ASSERT_GT(step, 0) << name;
    // A float16 output holds the dequantized value rounded: one step plus that rounding.
    const double bound = 1.0 + 2e-3 * 128;
    EXPECT_LE(testing::max_steps(as_float32(ort[i]), as_float32(engine[i]), step), bound) << name;
  }
  fs::remove_all(dir);
}

TEST(Float16ModelVsOrt, UseFP32ScaleIsTheFloat32QuantizationBetweenCasts) {
  const Model model = float16_test_model();
  ASSERT_TRUE(quant::has_float16(model.ir()));
  QuantizeOutcome q = quantize_with(model, Config());  // QuantizeFP16 and UseFP32Scale by default
  const ir::Graph& g = *q.model.ir().graph;
  for (const ir::Value* v : g.inputs()) EXPECT_EQ(v->type.elem_type, ir::DataType::Float16) << v->name();
  for (const ir::Value* v : g.outputs()) {
    EXPECT_EQ(v->type.elem_type, ir::DataType::Float16) << v->name();
    EXPECT_EQ(v->producer()->op_type, "Cast") << v->name();
  }
  size_t float32_scales = 0;
  for (const auto& n : g.nodes())
    if (n->op_type == "QuantizeLinear") float32_scales += n->input(1)->initializer().dtype() == ir::DataType::Float;
  EXPECT_GT(float32_scales, 0u);

  // The same samples widened, the model converted: the same quantization inside.
  QuantizeOutcome wide = quantize_with(model, Config().set_extra_option("ConvertFP16ToFP32", "true"));
  EXPECT_EQ(wide.model.ir().graph->inputs()[0]->type.elem_type, ir::DataType::Float);
  std::map<std::string, ir::Tensor> feeds = feeds_for(q.model.ir(), 3), wide_feeds;
  std::vector<ir::Tensor> half = testing::run_model(q.model.ir(), feeds);
  for (const auto& [name, t] : feeds) wide_feeds[name] = as_float32(t);  // the same float16 values
  std::vector<ir::Tensor> single = testing::run_model(wide.model.ir(), wide_feeds);
  ASSERT_EQ(half.size(), single.size());
  for (size_t i = 0; i < half.size(); ++i) {
    auto h = half[i].values<uint16_t>();
    auto s = single[i].values<float>();
    ASSERT_EQ(h.size(), s.size());
    for (size_t k = 0; k < h.size(); ++k) EXPECT_EQ(h[k], ir::float_to_half(s[k])) << i << " " << k;
  }
  expect_ort_agrees(q.model, fresh_dir("fp16_fp32_scale"));
}

TEST(Float16ModelVsOrt, UseFP32ScaleFalseWritesFloat16Throughout) {
  const Model model = float16_test_model();
  std::vector<std::string> lines;
  auto reader = random_reader(model, {.count = 4, .seed = 5});
  QuantizeOptions options;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  QuantizeOutcome q = quantize(model, *reader, Config().set_extra_option("UseFP32Scale", "false"), options);
  const ir::Model& written = q.model.ir();
  EXPECT_EQ(written.opset(""), 13);  // float16 QuantizeLinear / DequantizeLinear: com.microsoft's below 19
  size_t half_scales = 0;
  for (const auto& n : written.graph->nodes()) {
    for (const ir::Value* v : n->outputs()) {
      if (v && v->type.is_tensor()) {
        EXPECT_NE(v->type.elem_type, ir::DataType::Float) << v->name();
      }
    }
    if (n->op_type == "Cast") {
      EXPECT_NE(n->attr_int("to", 0), static_cast<int64_t>(ir::DataType::Float)) << n->name;
    }
    if (n->op_type.find("QuantizeLinear") != std::string::npos) {
      EXPECT_EQ(n->input(1)->initializer().dtype(), ir::DataType::Float16) << n->name;
      ++half_scales;
    }
  }
  EXPECT_GT(half_scales, 0u);
  for (const ir::Value* v : written.graph->initializers())
    EXPECT_NE(v->initializer().dtype(), ir::DataType::Float) << v->name();
  // ONNX Runtime's CPU optimizer fuses the Concat into a QLinearConcat it then refuses (float16
  // scales): said, and the model run literally.
  size_t warned = 0;
  for (const std::string& line : lines) warned += line.find("warning: UseFP32Scale false: ONNX Runtime") == 0;
  EXPECT_EQ(warned, 1u);
  expect_ort_agrees(q.model, fresh_dir("fp16_fp16_scale"), false);
  // Without the Concat, ONNX Runtime runs it optimized too.
  auto again = random_reader(model, {.count = 4, .seed = 5});
  QuantizeOutcome no_concat = quantize(
      model, *again, Config().set_extra_option("UseFP32Scale", "false").set("nodes_to_exclude", R"(["concat"])"));
  expect_ort_agrees(no_concat.model, fresh_dir("fp16_fp16_scale_no_concat"));
}

TEST(Float16Model, KeysThatDoNotFitAreOneLineErrors) {
  const Model half = float16_test_model();
  const Model single(std::make_shared<ir::Model>(testing::export_test_model()));
  auto error = [](const Model& m, const Config& c) { return testing::error_of([&] { quantize_with(m, c); }); };
  EXPECT_NE(error(single, Config().set_extra_option("QuantizeFP16", "true"))
                .find("QuantizeFP16: the model has no float16 tensor, value or Cast"),
            std::string::npos);
  EXPECT_NE(error(half, Config().set_extra_option("QuantizeFP16", "true").set_extra_option("ConvertFP16ToFP32", "true"))
                .find("QuantizeFP16 and convert_fp16_to_fp32"),
            std::string::npos);
  EXPECT_NE(error(half, Config().set_extra_option("QuantizeFP16", "false").set_extra_option("UseFP32Scale", "true"))
                .find("UseFP32Scale true takes effect only with QuantizeFP16"),
            std::string::npos);
  EXPECT_NE(error(half, Config().set("quant_format", "\"QOperator\"").set_extra_option("UseFP32Scale", "false"))
                .find("UseFP32Scale false: float16 scales are written by QuantizeLinear"),
            std::string::npos);
  EXPECT_NE(error(half, Config().set_extra_option("QuantizeFP16", "false"))
                .find("QuantizeFP16 false: the model has float16 tensors"),
            std::string::npos);
}

}  // namespace
}  // namespace onnxptq
