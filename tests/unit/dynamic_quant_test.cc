// use_dynamic_quant / quantize_dynamic. Weights against values worked out by hand from ONNX
// Runtime's quantization rules (compute_scale_zp, quantize_nparray, its range table); the written
// model against the ONNX specification's DynamicQuantizeLinear and MatMulInteger formulas computed
// here; ONNX Runtime runs the written models as the engine does; the PP-OCRv4 recognizer quantized
// dynamically stays close to its float output in ONNX Runtime.
#include "quant/dynamic_quant.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "calib/data_reader.h"
#include "onnxptq/tensor_files.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "support/export_models.h"
#include "support/model_run.h"
#include "support/one_node.h"
#include "support/pass_check.h"
#include "support/test_paths.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> dyn_codes(const ir::Tensor& t) {
  std::vector<int64_t> out;
  for (double v : testing::values_of(t)) out.push_back(static_cast<int64_t>(v));
  return out;
}

QuantConfig dyn_config(ir::DataType weight_type) {
  QuantConfig c;
  apply_config_json(c, {{"use_dynamic_quant", true}});
  c.weight_type = weight_type;
  return c;
}

TEST(DynamicQuant, WeightsAsOrtQuantizesThem) {
  // int8, symmetric [-127, 127]: scale max|w| / 127 = 0.01, zero point 0.
  QuantizedTensor s8 = quantize_dynamic_weight(ir::Tensor::from_values<float>({3}, std::vector<float>{-0.5f, 0.25f, 1.27f}),
                                               dyn_config(ir::DataType::Int8), std::nullopt, false);
  EXPECT_EQ(dyn_codes(s8.data), (std::vector<int64_t>{-50, 25, 127}));
  ASSERT_EQ(s8.params.size(), 1u);
  EXPECT_FLOAT_EQ(static_cast<float>(s8.params[0].scale), 0.01f);
  EXPECT_EQ(s8.params[0].zero_point, 0);
  // reduce_range: [-64, 64], scale 1.28 / 64 = 0.02.
  QuantizedTensor s8r = quantize_dynamic_weight(ir::Tensor::from_values<float>({3}, std::vector<float>{-0.5f, 0.3f, 1.28f}),
                                                dyn_config(ir::DataType::Int8), std::nullopt, true);
  EXPECT_EQ(dyn_codes(s8r.data), (std::vector<int64_t>{-25, 15, 64}));
  EXPECT_FLOAT_EQ(static_cast<float>(s8r.params[0].scale), 0.02f);
  // uint8, asymmetric [0, 255]: range [-1, 1.55], scale 0.01, zero point 0 - (-1) / 0.01 = 100.
  QuantizedTensor u8 = quantize_dynamic_weight(ir::Tensor::from_values<float>({3}, std::vector<float>{-1.f, 0.f, 1.55f}),
                                               dyn_config(ir::DataType::UInt8), std::nullopt, false);
  EXPECT_EQ(dyn_codes(u8.data), (std::vector<int64_t>{0, 100, 255}));
  EXPECT_FLOAT_EQ(static_cast<float>(u8.params[0].scale), 0.01f);
  EXPECT_EQ(u8.params[0].zero_point, 100);
  // uint8 reduce_range: [0, 127]: range [-1, 0.27], scale 0.01, zero point 100.
  QuantizedTensor u8r = quantize_dynamic_weight(ir::Tensor::from_values<float>({2}, std::vector<float>{-1.f, 0.27f}),
                                                dyn_config(ir::DataType::UInt8), std::nullopt, true);
  EXPECT_EQ(dyn_codes(u8r.data), (std::vector<int64_t>{0, 127}));
  EXPECT_EQ(u8r.params[0].zero_point, 100);
  // Per channel along B's last axis: column 0 max 1.27 (scale 0.01), column 1 max 2.54 (0.02).
  QuantizedTensor pc =
      quantize_dynamic_weight(ir::Tensor::from_values<float>({2, 2}, std::vector<float>{1.27f, 0.5f, -0.6f, 2.54f}),
                              dyn_config(ir::DataType::Int8), 1, false);
  EXPECT_EQ(dyn_codes(pc.data), (std::vector<int64_t>{127, 25, -60, 127}));
  ASSERT_EQ(pc.params.size(), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(pc.params[1].scale), 0.02f);
  EXPECT_THROW(quantize_dynamic_weight(ir::Tensor::from_values<float>({1}, std::vector<float>{1.f}),
                                       dyn_config(ir::DataType::Int16), std::nullopt, false),
               Error);
}

// x [6, 16] -> MatMul(W [16, 8]) -> y; x2 [2, 3, 8, 8] -> Conv(+bias) -> Relu -> Flatten -> Gemm(transB, C) -> y2.
ir::Model dyn_test_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {6, 16});
  g.add_input(x);
  ir::Value* w = testing::add_random_initializer(g, "w", {16, 8}, 21);
  ir::Value* y = testing::add_float_value(g, "y", {6, 8});
  g.add_node("MatMul", {x, w}, {y}, "mm");
  g.add_output(y);
  ir::Value* x2 = testing::add_float_value(g, "x2", {2, 3, 8, 8});
  g.add_input(x2);
  ir::Value* cw = testing::add_random_initializer(g, "cw", {4, 3, 3, 3}, 22);
  ir::Value* cb = testing::add_random_initializer(g, "cb", {4}, 23);
  ir::Value* c = g.add_value("c");
  ir::Node* conv = g.add_node("Conv", {x2, cw, cb}, {c}, "conv");
  conv->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  ir::Value* r = g.add_value("r");
  g.add_node("Relu", {c}, {r}, "relu");
  ir::Value* f = g.add_value("f");
  g.add_node("Flatten", {r}, {f}, "flatten");
  ir::Value* fc = testing::add_random_initializer(g, "fc", {10, 256}, 24);
  ir::Value* fcb = testing::add_random_initializer(g, "fcb", {10}, 25);
  ir::Value* y2 = testing::add_float_value(g, "y2", {2, 10});
  ir::Node* gemm = g.add_node("Gemm", {f, fc, fcb}, {y2}, "gemm");
  gemm->set_attribute(ir::Attribute::of_int("transB", 1));
  g.add_output(y2);
  return m;
}

TEST(DynamicQuant, WritesOrtsIntegerOpsNodes) {
  ir::Model model = dyn_test_model();
  DynamicQuantResult r = write_dynamic_quant(model, dyn_config(ir::DataType::UInt8));
  EXPECT_EQ(r.quantized_nodes, (std::vector<std::string>{"mm", "conv", "gemm"}));
  EXPECT_EQ(testing::count_ops(r.model, "DynamicQuantizeLinear"), 3u);  // x, x2, f
  EXPECT_EQ(testing::count_ops(r.model, "MatMulInteger"), 2u);
  EXPECT_EQ(testing::count_ops(r.model, "ConvInteger"), 1u);
  EXPECT_EQ(testing::count_ops(r.model, "Gemm"), 0u);
  EXPECT_EQ(testing::count_ops(r.model, "MatMul"), 0u);
  EXPECT_EQ(testing::count_ops(r.model, "Cast"), 3u);
  const ir::Node* mm = testing::producer(r.model, "y");
  EXPECT_EQ(mm->op_type, "Mul");
  EXPECT_EQ(mm->name, "mm_quant_output_scale_mul");
  EXPECT_EQ(testing::producer(r.model, "y2")->name, "gemm_Add");  // replace_gemm_with_matmul's Add of C
  EXPECT_EQ(testing::producer(r.model, "c")->op_type, "Add");     // ConvInteger's float bias
  EXPECT_EQ(r.model.graph->find_value("w"), nullptr);             // float weights gone
  EXPECT_EQ(r.model.graph->find_value("w_quantized")->initializer().dtype(), ir::DataType::UInt8);
  // The Gemm's B transposed to [256, 10] before quantizing.
  EXPECT_EQ(r.model.graph->find_value("fc_quantized")->initializer().dims(), (std::vector<int64_t>{256, 10}));

  QuantConfig some = dyn_config(ir::DataType::Int8);
  some.op_types_to_quantize = {"Conv"};
  some.nodes_to_exclude = {"conv"};
  EXPECT_TRUE(write_dynamic_quant(model, some).quantized_nodes.empty());
  some.nodes_to_exclude.clear();
  some.op_types_to_quantize = {"MatMul"};
  some.nodes_to_quantize = {"gemm"};
  EXPECT_EQ(write_dynamic_quant(model, some).quantized_nodes, std::vector<std::string>{"gemm"});
  some.op_types_to_quantize = {"Add"};
  EXPECT_NE(testing::error_of([&] { check_config(some); }).find("op type Add"), std::string::npos);
  QuantConfig with_ft = dyn_config(ir::DataType::Int8);
  with_ft.include_fast_ft = true;
  EXPECT_NE(testing::error_of([&] { check_config(with_ft); }).find("include_fast_ft"), std::string::npos);
}

// The written MatMul path computes the ONNX specification's formulas: DynamicQuantizeLinear's
// y_scale = (max(0, x_max) - min(0, x_min)) / 255, y_zero_point = saturate(round(0 - x_min / y_scale)),
// x_q = saturate(round(x / y_scale) + y_zero_point) (rounding half to even), then MatMulInteger's
// exact sum of (x_q - x_zp)(w_q - w_zp), cast to float and scaled by x_scale * w_scale.
TEST(DynamicQuant, MatMulIsTheSpecsFormula) {
  ir::Model model = dyn_test_model();
  for (ir::DataType type : {ir::DataType::Int8, ir::DataType::UInt8}) {
    QuantConfig config = dyn_config(type);
    config.per_channel = type == ir::DataType::Int8;
    DynamicQuantResult r = write_dynamic_quant(model, config);
    std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, 5);
    std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
    std::span<const float> x = feeds.at("x").values<float>();
    float lo = 0.f, hi = 0.f;
    for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
    const float sx = (hi - lo) / 255.f;
    const float zx = std::clamp(std::nearbyint(0.f - lo / sx), 0.f, 255.f);
    std::vector<double> wq = testing::values_of(r.model.graph->find_value("w_quantized")->initializer());
    std::vector<double> wz = testing::values_of(r.model.graph->find_value("w_zero_point")->initializer());
    std::span<const float> ws = r.model.graph->find_value("w_scale")->initializer().values<float>();
    std::span<const float> y = engine[0].values<float>();
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 8; ++j) {
        int64_t acc = 0;
        const size_t c = ws.size() == 1 ? 0 : static_cast<size_t>(j);
        for (int64_t k = 0; k < 16; ++k) {
          const float q = std::clamp(std::nearbyint(x[i * 16 + k] / sx) + zx, 0.f, 255.f);
          acc += static_cast<int64_t>(q - zx) * static_cast<int64_t>(wq[k * 8 + j] - wz[c]);
        }
        const float expected = static_cast<float>(acc) * (sx * ws[c]);
        EXPECT_EQ(y[i * 8 + j], expected) << quant_type_name(type) << " " << i << " " << j;
      }
  }
}

// ONNX Runtime (which fuses DynamicQuantizeLinear + MatMulInteger + Cast + Mul into its own kernels
// at load) computes the same integers; its fused kernels scale the int32 sums (and may add Gemm's
// bias) in one step, so the float results may differ by the rounding of that step: 2 ulp.
TEST(DynamicQuant, OrtRunsTheWrittenModelAsTheEngineDoes) {
  ir::Model model = dyn_test_model();
  struct Case {
    const char* label;
    ir::DataType type;
    bool per_channel;
    std::vector<std::string> op_types;
  };
  // ConvInteger with int8 weights has no CPU kernel in ONNX Runtime (its issue #3130): int8 on MatMuls only.
  for (const Case& c : {Case{"u8", ir::DataType::UInt8, false, {}}, Case{"u8_pc", ir::DataType::UInt8, true, {}},
                        Case{"s8_pc", ir::DataType::Int8, true, {"MatMul"}}}) {
    QuantConfig config = dyn_config(c.type);
    config.per_channel = c.per_channel;
    config.op_types_to_quantize = c.op_types;
    config.reduce_range = c.type == ir::DataType::Int8;  // as below: ORT's u8s8 pair sums may saturate
    DynamicQuantResult r = write_dynamic_quant(model, config);
    fs::path dir = testing::fresh_dir(std::string("dynamic_") + c.label);
    ir::save_model(r.model, dir / "q.onnx");
    for (uint32_t seed : {3u, 4u}) {
      std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, seed);
      std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir / std::to_string(seed));
      std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
      ASSERT_EQ(ort.size(), 2u);
      // y2's bias: the scaled sum may be rounded before or with the Add, so the bound holds |bias| too.
      std::span<const float> bias = model.graph->find_value("fcb")->initializer().values<float>();
      for (size_t o = 0; o < 2; ++o) {
        std::span<const float> a = ort[o].values<float>(), b = engine[o].values<float>();
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
          const double magnitude = std::fabs(b[i]) + (o == 1 ? std::fabs(bias[i % bias.size()]) : 0.0);
          EXPECT_LE(std::fabs(a[i] - b[i]), 2 * FLT_EPSILON * magnitude + FLT_MIN)
              << c.label << " output " << o << " [" << i << "] " << a[i] << " vs " << b[i];
        }
      }
    }
    if (!HasFailure()) fs::remove_all(dir);
  }
}

double dyn_cosine(const ir::Tensor& a, const ir::Tensor& b) {
  std::span<const float> x = a.values<float>(), y = b.values<float>();
  double xy = 0, xx = 0, yy = 0;
  for (size_t i = 0; i < x.size(); ++i) xy += double(x[i]) * y[i], xx += double(x[i]) * x[i], yy += double(y[i]) * y[i];
  return xy / std::sqrt(xx * yy);
}

// The PP-OCRv4 recognizer with Quark's UINT8_DYNAMIC_QUANT (uint8 weights: the only ConvInteger
// ONNX Runtime's CPU provider runs), run by ONNX Runtime on rendered text. With its MatMuls alone
// quantized (the SVTR neck: what dynamic quantization is for; ONNX Runtime's guide recommends static
// quantization for CNNs) the output stays close to the float model's; the whole preset also
// quantizes the 38 Convs of the backbone per tensor, which costs much more (cosine printed,
// 0.85-0.94 when this was written). That model amplifies an ulp: the neck's Sigmoid (ONNX
// Runtime's MLAS approximation, the engine's own) can differ in the last bit, which moves the scale
// a DynamicQuantizeLinear computes from its input's range, and the output then differs by whole
// steps. So ORT and the engine are compared node by node: every node whose inputs are bit for bit
// the same in both gives the same outputs, exactly for the integer ops and DynamicQuantizeLinear,
// within 1e-6 relative (a few ulp) for the float ones.
void expect_same_node_by_node(const ir::Model& quantized, const std::map<std::string, ir::Tensor>& feeds,
                              const fs::path& dir, const std::string& label) {
  ir::Model all = ir::clone_model(quantized);
  std::vector<std::string> names;
  for (const auto& n : all.graph->nodes())
    for (ir::Value* v : n->outputs())
      if (v && !all.graph->is_output(v)) all.graph->add_output(v);
  for (const ir::Value* v : all.graph->outputs()) names.push_back(v->name());
  ir::save_model(all, dir / "all.onnx");
  std::vector<ir::Tensor> ort = testing::ort_run(dir / "all.onnx", all, feeds, dir / "all", /*literal=*/true);
  std::vector<ir::Tensor> engine = testing::run_model(all, feeds);
  ASSERT_EQ(ort.size(), engine.size());
  std::map<std::string, const ir::Tensor*> by_ort, by_engine;
  for (size_t i = 0; i < names.size(); ++i) by_ort[names[i]] = &ort[i], by_engine[names[i]] = &engine[i];
  auto same_bits = [](const ir::Tensor& a, const ir::Tensor& b) {
    return a.dtype() == b.dtype() && a.dims() == b.dims() && a.byte_size() == b.byte_size() &&
           std::memcmp(a.bytes().data(), b.bytes().data(), a.byte_size()) == 0;
  };
  size_t integer_checked = 0, float_checked = 0;
  for (const auto& n : quantized.graph->nodes()) {
    bool inputs_agree = true;
    for (const ir::Value* v : n->inputs()) {
      auto a = by_ort.find(v ? v->name() : ""), b = by_engine.find(v ? v->name() : "");
      if (a != by_ort.end() && !same_bits(*a->second, *b->second)) inputs_agree = false;
    }
    if (!inputs_agree) continue;
    const bool integer = n->op_type == "ConvInteger" || n->op_type == "MatMulInteger" ||
                         n->op_type == "DynamicQuantizeLinear" || n->op_type == "Cast";
    for (const ir::Value* v : n->outputs()) {
      if (!v) continue;
      const ir::Tensor &a = *by_ort.at(v->name()), &b = *by_engine.at(v->name());
      if (integer || a.dtype() != ir::DataType::Float) {
        EXPECT_TRUE(same_bits(a, b)) << label << ": " << n->op_type << " '" << n->name << "' output " << v->name()
                                     << " differs from ORT's on the same inputs";
        ++integer_checked;
      } else {
        EXPECT_LE(testing::relative_diff({a}, {b}), 1e-6)
            << label << ": " << n->op_type << " '" << n->name << "' output " << v->name();
        ++float_checked;
      }
    }
  }
  std::cout << label << ": " << integer_checked << " integer and " << float_checked
            << " float outputs compared with ORT's on the same inputs\n";
  EXPECT_GT(integer_checked, 40u) << label;  // at least the backbone's ConvInteger path
}
TEST(DynamicQuant, PpOcrRecognizerInOrt) {
  const fs::path rec = testing::kOcr / "ch_PP-OCRv4_rec_infer.onnx";
  ir::Model model = ir::load_model(rec);
  fs::path dir = testing::fresh_dir("dynamic_ppocr_rec");
  ir::save_model(model, dir / "float.onnx");
  calib::RandomReaderOptions ro;
  ro.shapes = {{"x", {1, 3, 48, 320}}};
  for (bool matmuls_only : {true, false}) {
    QuantConfig config;
    apply_preset(config, "UINT8_DYNAMIC_QUANT");
    if (matmuls_only) config.op_types_to_quantize = {"MatMul"};
    std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
    QuantizeResult r = quantize_static(model, *reader, config);
    const size_t mm = testing::count_ops(r.model, "MatMulInteger"), conv = testing::count_ops(r.model, "ConvInteger");
    const std::string label = matmuls_only ? "UINT8_DYNAMIC_QUANT, MatMuls only" : "UINT8_DYNAMIC_QUANT";
    std::cout << "PP-OCRv4 rec, " << label << ": " << mm << " MatMulInteger, " << conv << " ConvInteger\n";
    EXPECT_GT(mm, 0u);
    EXPECT_EQ(conv > 0, !matmuls_only);
    ir::save_model(r.model, dir / "q.onnx");
    for (int seed : {3, 5}) {
      testing::render_text_image("1x3x48x320", seed, dir / "x.npy");
      std::map<std::string, ir::Tensor> feeds = {{"x", load_npy(dir / "x.npy")}};
      std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir / "q");
      std::vector<ir::Tensor> ort_float = testing::ort_run(dir / "float.onnx", model, feeds, dir / "f");
      std::vector<ir::Tensor> engine = testing::run_model(r.model, feeds);
      const double to_float = dyn_cosine(ort[0], ort_float[0]);
      const double diff = testing::relative_diff(ort, engine);
      std::cout << "PP-OCRv4 rec, " << label << ", text " << seed << ": cosine(ORT dynamic, ORT float) " << to_float
                << ", |ORT - onnxptq| / range " << diff << "\n";
      if (matmuls_only) {
        EXPECT_GT(to_float, 0.99);
      }
      // ORT's and the engine's float ops differ in the last bits, and DynamicQuantizeLinear may
      // round such a value to the next code (a whole step of difference): node by node instead.
      if (!matmuls_only) expect_same_node_by_node(r.model, feeds, dir, label + ", text " + std::to_string(seed));
    }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq::quant
