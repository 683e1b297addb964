// Quark's block formats in standard ONNX ops (BlockQDQAsStandardOps, the command's --standard-ops):
// every BFPQuantizeDequantize / MXQuantizeDequantize node rewritten so that any runtime of the
// standard computes, bit for bit, what the engine's kernel of the custom op computes. Shown on
// one-node models over edge-case blocks (ties, zeros, subnormals, the largest floats, Inf, NaN;
// short last blocks, strided blocks, float16, dimensions known at run time), every rounding mode
// and every format, run by the engine and by ONNX Runtime; and on ResNet-18 and the PP-OCRv4
// models quantized by the presets: the engine runs the rewritten model as the custom-op one, and
// ONNX Runtime's value of every rewritten node equals the kernel's on ONNX Runtime's own input.
#include "quant/block_standard_ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "calib/data_reader.h"
#include "engine/block_quantizer.h"
#include "ir/float16.h"
#include "ir/npy.h"
#include "quant/block_format.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "quant/tensor_quant.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

// A graph input of the one-node models: its declared dimensions (a negative size: a symbol),
// the ones it is fed, the blocks' axis, its type.
struct InputCase {
  std::vector<int64_t> declared;
  std::vector<int64_t> fed;
  int64_t axis;
  ir::DataType type = ir::DataType::Float;
};

const std::vector<InputCase> kInputs = {
    {{2, 20, 3, 5}, {2, 20, 3, 5}, 1},                   // strided blocks, a short last one
    {{3, 37}, {3, 37}, -1},                              // contiguous blocks, a short last one
    {{29}, {29}, 1},                                     // rank 1: axis 0 whatever it says
    {{2, 16, 4}, {2, 16, 4}, 1, ir::DataType::Float16},  // computed in float32
    {{-1, 12, -1}, {2, 12, 7}, 1},                       // batch and width known at run time
    {{2, -1}, {2, 45}, 1},                               // the blocks' axis known at run time
    {{-1}, {1}, 0},                                      // one element at run time: as is
    {{1, 1}, {1, 1}, 1},                                 // one element: as is
};

// Values in regions of 8 of one kind: ordinary, few significant bits (rounding ties), zeros of
// both signs, subnormals, the largest binades, the smallest normal ones, ordinary with Inf and NaN.
std::vector<float> edge_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<float> v(static_cast<size_t>(n));
  int kind = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 8 == 0) kind = uniform(0, 7);
    const float sign = uniform(0, 1) ? -1.0f : 1.0f;
    float x = 0;
    switch (kind) {
      case 0:
      case 1:
        x = normal(rng) * std::ldexp(1.0f, uniform(-6, 6));
        break;
      case 2:
        x = static_cast<float>(uniform(-2047, 2047)) * 0x1p-8f;
        break;
      case 3:
        x = sign * 0.0f;
        break;
      case 4:
        x = sign * static_cast<float>(uniform(1, (1 << 23) - 1)) * 0x1p-149f;
        break;
      case 5:
        x = sign * (1.0f + static_cast<float>(uniform(0, 1 << 20)) * 0x1p-20f) * std::ldexp(1.0f, uniform(120, 127));
        break;
      case 6:
        x = sign * (1.0f + static_cast<float>(uniform(0, 1 << 20)) * 0x1p-20f) * std::ldexp(1.0f, uniform(-126, -120));
        break;
      default: {
        const int special = uniform(0, 7);
        x = special == 0 ? sign * INFINITY : special == 1 ? NAN : normal(rng);
      }
    }
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

ir::Tensor edge_tensor(const InputCase& c, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : c.fed) n *= d;
  std::vector<float> v = edge_values(n, seed);
  if (c.type == ir::DataType::Float) return ir::Tensor::from_values<float>(c.fed, v);
  std::vector<uint16_t> h;
  for (float x : v) h.push_back(ir::float_to_half(x));
  return ir::Tensor(ir::DataType::Float16, c.fed, ir::Bytes::copy_of(h.data(), h.size() * 2));
}

// A block format as a preset writes it, with changes to its attributes.
struct Format {
  std::string label;
  std::string preset;
  std::vector<std::pair<std::string, int64_t>> attributes;  // over the preset's
};

ir::Node format_node(const Format& f, int64_t axis, int64_t rounding) {
  quant::QuantConfig config;
  quant::apply_preset(config, f.preset);
  ir::Node n = quant::block_node(config.activation_type, config, axis, false);
  n.set_attribute(ir::Attribute::of_int("rounding_mode", rounding));
  for (const auto& [name, value] : f.attributes) n.set_attribute(ir::Attribute::of_int(name, value));
  return n;
}

// One block node per input case and rounding mode, x<k> -> y<k>, and their feeds.
ir::Model one_node_models(const Format& f, std::map<std::string, ir::Tensor>& feeds) {
  ir::Model m;
  m.set_opset("", 13);
  m.set_opset("com.amd.quark", 1);
  ir::Graph& g = *m.graph;
  g.name = "blocks";
  int k = 0;
  for (int64_t rounding = 0; rounding <= 2; ++rounding)
    for (const InputCase& c : kInputs) {
      const std::string id = std::to_string(k++);
      ir::Value* x = g.add_value("x" + id);
      x->type = ir::ValueType::tensor(c.type);
      x->type.has_shape = true;
      for (int64_t d : c.declared)
        x->type.shape.push_back(d < 0 ? ir::Dim::symbol("d" + id + "_" + std::to_string(x->type.shape.size()))
                                      : ir::Dim::of(d));
      g.add_input(x);
      ir::Value* y = g.add_value("y" + id);
      y->type = x->type;
      g.add_output(y);
      const ir::Node proto = format_node(f, c.axis, rounding);
      ir::Node* n = g.add_node(proto.op_type, {x}, {y}, "block" + id, proto.domain);
      for (const ir::Attribute& a : proto.attributes) n->set_attribute(ir::clone_attribute(a, g));
      feeds[x->name()] = edge_tensor(c, static_cast<uint32_t>(100 + k));
    }
  return m;
}

// Equal bit for bit, or both NaN (a runtime may quiet a NaN's payload when it converts types).
size_t count_different(const ir::Tensor& a, const ir::Tensor& b) {
  if (a.dims() != b.dims() || a.dtype() != b.dtype()) return static_cast<size_t>(std::max<int64_t>(1, a.size()));
  size_t differ = 0;
  if (a.dtype() == ir::DataType::Float16) {
    auto x = a.values<uint16_t>(), y = b.values<uint16_t>();
    for (size_t i = 0; i < x.size(); ++i) {
      const bool nan = std::isnan(ir::half_to_float(x[i])) && std::isnan(ir::half_to_float(y[i]));
      differ += x[i] != y[i] && !nan;
    }
    return differ;
  }
  auto x = a.values<float>(), y = b.values<float>();
  for (size_t i = 0; i < x.size(); ++i)
    differ += std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i]) && !(std::isnan(x[i]) && std::isnan(y[i]));
  return differ;
}

size_t count_block_ops(const ir::Model& m) {
  size_t n = 0;
  for (const auto& node : m.graph->nodes()) n += node->domain == "com.amd.quark";
  return n;
}

class BlockStandardOps : public ::testing::TestWithParam<Format> {};

TEST_P(BlockStandardOps, EngineAndOrtComputeTheKernelsValuesBitForBit) {
  const Format& f = GetParam();
  std::map<std::string, ir::Tensor> feeds;
  ir::Model custom = one_node_models(f, feeds);
  ir::Model standard = ir::clone_model(custom);
  ASSERT_EQ(quant::write_block_nodes_in_standard_ops(standard), 3 * kInputs.size());
  EXPECT_EQ(count_block_ops(standard), 0u);

  const fs::path dir = testing::fresh_dir("block_standard_ops_" + f.label);
  ir::save_model(standard, dir / "standard.onnx");
  EXPECT_EQ(testing::onnx_check(dir / "standard.onnx"), "");
  const std::vector<ir::Tensor> expected = testing::run_model(custom, feeds);
  const std::vector<ir::Tensor> engine = testing::run_model(standard, feeds);
  const std::vector<ir::Tensor> ort = testing::ort_run(dir / "standard.onnx", standard, feeds, dir / "ort");
  ASSERT_EQ(engine.size(), expected.size());
  ASSERT_EQ(ort.size(), expected.size());
  size_t changed = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string what = "y" + std::to_string(i) + " (rounding_mode " + std::to_string(i / kInputs.size()) +
                             ", input case " + std::to_string(i % kInputs.size()) + ")";
    EXPECT_EQ(count_different(engine[i], expected[i]), 0u) << what << ", engine";
    EXPECT_EQ(count_different(ort[i], expected[i]), 0u) << what << ", ONNX Runtime";
    changed += count_different(expected[i], feeds.at("x" + std::to_string(i)));
  }
  EXPECT_GT(changed, 0u) << "the kernel changed no value: the cases test nothing";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, BlockStandardOps,
    ::testing::Values(Format{"BFP16", "BFP16", {}},
                      Format{"BFP16_bfloat16_first", "BFP16", {{"convert_to_bfloat_before_bfp", 1}}},
                      Format{"BFP13_block16", "BFP16", {{"bit_width", 13}, {"block_size", 16}}},
                      Format{"BFP16_compiler_kernel", "BFP16", {{"use_compiler_version_cpu_kernel", 1}}},
                      Format{"MX4", "MX4", {}}, Format{"MX6", "MX6", {}}, Format{"MX9", "MX9", {}},
                      Format{"MX9_shift3", "MX9", {{"sub_block_shift_bits", 3}, {"sub_block_size", 4}}},
                      Format{"MXINT8", "MXINT8", {}}, Format{"MXFP8E5M2", "MXFP8E5M2", {}},
                      Format{"MXFP8E4M3", "MXFP8E4M3", {}}, Format{"MXFP6E3M2", "MXFP6E3M2", {}},
                      Format{"MXFP6E2M3", "MXFP6E2M3", {}}, Format{"MXFP4E2M1", "MXFP4E2M1", {}},
                      // onnxptq's attributes: the scale of least squared error, OCP's int8 range
                      Format{"MXFP4E2M1_min_error_scale", "MXFP4E2M1", {{"min_error_scale", 1}}},
                      Format{"MXFP8E4M3_min_error_scale", "MXFP8E4M3", {{"min_error_scale", 1}}},
                      Format{"MXINT8_symmetric_min_error", "MXINT8", {{"symmetric_int8", 1}, {"min_error_scale", 1}}}),
    [](const ::testing::TestParamInfo<Format>& info) { return info.param.label; });

TEST(BlockStandardOpsModel, AConstantInputBecomesTheKernelsValuesStored) {
  std::map<std::string, ir::Tensor> feeds;
  ir::Model m = one_node_models(Format{"BFP16", "BFP16", {}}, feeds);
  // The first node's input made a constant.
  ir::Value* x = m.graph->find_value("x0");
  m.graph->remove_input(x);
  m.graph->set_initializer(x, feeds.at("x0"));
  const ir::Node* node = x->uses().at(0).node;
  const ir::Tensor expected = engine::BlockQuantizer(*node)(feeds.at("x0"), 1);
  ir::Model standard = ir::clone_model(m);
  quant::write_block_nodes_in_standard_ops(standard);
  const ir::Value* y = standard.graph->find_value("y0");
  ASSERT_TRUE(y->has_initializer());
  EXPECT_EQ(y->producer(), nullptr);
  EXPECT_EQ(count_different(y->initializer(), expected), 0u);
  EXPECT_EQ(standard.graph->find_value("x0"), nullptr) << "the float constant no node reads is kept";
}

TEST(BlockStandardOpsModel, RefusesWhatItCannotWrite) {
  auto error = [](const std::function<void(ir::Model&)>& change) {
    std::map<std::string, ir::Tensor> feeds;
    ir::Model m = one_node_models(Format{"BFP16", "BFP16", {}}, feeds);
    change(m);
    return testing::error_of([&] { quant::write_block_nodes_in_standard_ops(m); });
  };
  EXPECT_NE(error([](ir::Model& m) { m.set_opset("", 12); }).find("needs opset 13 or later; the model has opset 12"),
            std::string::npos);
  EXPECT_NE(error([](ir::Model& m) {
              m.graph->find_value("x0")->type.has_shape = m.graph->find_value("y0")->type.has_shape = false;
            }).find("rank of its input 'x0' is unknown"),
            std::string::npos);
  EXPECT_NE(error([](ir::Model& m) {
              m.graph->find_value("x0")->uses().at(0).node->set_attribute(ir::Attribute::of_int("block_size", 0));
            }).find("node 'block0' (BFPQuantizeDequantize): block_size 0 is outside"),
            std::string::npos);

  quant::QuantConfig config;
  quant::apply_preset(config, "XINT8");
  quant::apply_config_json(config, {{"extra_options", {{"BlockQDQAsStandardOps", true}}}});
  EXPECT_EQ(testing::error_of([&] { quant::check_config(config); }),
            "extra option BlockQDQAsStandardOps (--standard-ops) takes effect only with a QBFP or QMX type, and the "
            "config asks for none");
}

TEST(BlockStandardOpsModel, TheQuantizerWritesWhatTheRewriteOfItsCustomModelIs) {
  ir::Model model = testing::export_test_model();
  quant::QuantConfig config;
  quant::apply_preset(config, "MX6");
  config.calib.threads = 2;
  const quant::QuantizeResult custom = testing::quantize_random(model, config, 2, 5);
  quant::apply_config_json(config, {{"extra_options", {{"BlockQDQAsStandardOps", true}}}});
  const quant::QuantizeResult standard = testing::quantize_random(model, config, 2, 5);
  EXPECT_EQ(count_block_ops(standard.model), 0u);
  ir::Model rewritten = ir::clone_model(custom.model);
  EXPECT_GT(quant::write_block_nodes_in_standard_ops(rewritten), 0u);
  EXPECT_EQ(standard.model.graph->node_count(), rewritten.graph->node_count());
  const std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, 9);
  const std::vector<ir::Tensor> a = testing::run_model(custom.model, feeds),
                                b = testing::run_model(standard.model, feeds);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(count_different(a[i], b[i]), 0u) << "output " << i;
}

// Real models quantized by a preset, then rewritten.
struct RealCase {
  std::string label;
  fs::path model;
  std::string preset;
  std::vector<int64_t> input;  // 1x3xHxW
  bool text;                   // a rendered text line rather than random values
};

class BlockStandardOpsRealModels : public ::testing::TestWithParam<RealCase> {};

TEST_P(BlockStandardOpsRealModels, EngineAsTheCustomOpsAndOrtAsTheKernelOnItsOwnInputs) {
  const RealCase& c = GetParam();
  ASSERT_TRUE(fs::exists(c.model)) << c.model;
  const fs::path dir = testing::fresh_dir("block_standard_ops_real_" + c.label);
  ir::Model model = ir::load_model(c.model);
  std::map<std::string, ir::Tensor> feeds;
  const std::string input = model.graph->fed_inputs().at(0)->name();
  if (c.text) {
    testing::render_text_image("1x3x" + std::to_string(c.input[2]) + "x" + std::to_string(c.input[3]), 3,
                               dir / "x.npy");
    feeds[input] = ir::load_npy(dir / "x.npy");
  } else {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    std::vector<float> v(static_cast<size_t>(c.input[0] * c.input[1] * c.input[2] * c.input[3]));
    for (float& x : v) x = normal(rng);
    feeds[input] = ir::Tensor::from_values<float>(c.input, v);
  }
  quant::QuantConfig config;
  quant::apply_preset(config, c.preset);
  config.calib.threads = 2;
  calib::RandomReaderOptions ro;
  ro.count = 1;
  ro.seed = 3;
  ro.shapes[input] = c.input;
  auto reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  const quant::QuantizeResult q = quant::quantize_static(model, *reader, config);

  // The block nodes reading activations, by output name.
  std::map<std::string, const ir::Node*> activation_nodes;
  for (const auto& n : q.model.graph->nodes())
    if (n->domain == "com.amd.quark" && !n->input(0)->has_initializer())
      activation_nodes[n->output(0)->name()] = n.get();
  ASSERT_GT(activation_nodes.size(), 10u);

  ir::Model standard = ir::clone_model(q.model);
  quant::write_block_nodes_in_standard_ops(standard);
  ASSERT_EQ(count_block_ops(standard), 0u);
  // Both run literally, node by node: the engine's speed rewrites see different graphs (the
  // rewritten model stores its weights, so a fusion a custom op between them stops can apply), and
  // a fused op sums in another order.
  const std::vector<ir::Tensor> custom_out = testing::run_model(q.model, feeds, false);
  const std::vector<ir::Tensor> standard_out = testing::run_model(standard, feeds, false);
  ASSERT_EQ(custom_out.size(), standard_out.size());
  for (size_t i = 0; i < custom_out.size(); ++i)
    EXPECT_EQ(count_different(custom_out[i], standard_out[i]), 0u) << "output " << i << ": engine";

  // ONNX Runtime with every rewritten node's input and output also a graph output.
  ir::Model exposed = ir::clone_model(standard);
  std::vector<std::pair<std::string, std::string>> pairs;  // (x, y)
  std::set<std::string> outputs;
  for (const ir::Value* v : exposed.graph->outputs()) outputs.insert(v->name());
  auto expose = [&](const std::string& name) {
    if (outputs.insert(name).second) exposed.graph->add_output(exposed.graph->find_value(name));
  };
  for (const auto& [y, node] : activation_nodes) {
    const std::string x = node->input(0)->name();
    if (!feeds.count(x)) expose(x);
    expose(y);
    pairs.emplace_back(x, y);
  }
  ir::save_model(exposed, dir / "exposed.onnx");
  const std::vector<ir::Tensor> ort = testing::ort_run(dir / "exposed.onnx", exposed, feeds, dir / "ort");
  std::map<std::string, const ir::Tensor*> by_name;
  for (size_t i = 0; i < ort.size(); ++i) by_name[exposed.graph->outputs()[i]->name()] = &ort[i];
  for (const auto& [name, t] : feeds) by_name[name] = &t;
  size_t nodes_differ = 0;
  for (const auto& [x, y] : pairs) {
    const ir::Tensor kernel = engine::BlockQuantizer(*activation_nodes.at(y))(*by_name.at(x), 2);
    const size_t differ = count_different(*by_name.at(y), kernel);
    EXPECT_EQ(differ, 0u) << y << ": ONNX Runtime's value differs from the kernel's on ORT's input";
    nodes_differ += differ > 0;
  }
  std::cout << c.label << ": " << pairs.size() << " activation block nodes rewritten, " << nodes_differ
            << " differ in ONNX Runtime\n";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, BlockStandardOpsRealModels,
    ::testing::Values(
        RealCase{"resnet18_BFP16", testing::kModels / "resnet18.onnx", "BFP16", {1, 3, 224, 224}, false},
        RealCase{"resnet18_MXFP8E4M3", testing::kModels / "resnet18.onnx", "MXFP8E4M3", {1, 3, 224, 224}, false},
        RealCase{"det_MX9", testing::kDet, "MX9", {1, 3, 96, 96}, true},
        RealCase{"det_MXINT8", testing::kDet, "MXINT8", {1, 3, 96, 96}, true},
        RealCase{"rec_BFP16", testing::kOcr / "ch_PP-OCRv4_rec_infer.onnx", "BFP16", {1, 3, 48, 96}, true},
        RealCase{"rec_MXFP4E2M1", testing::kOcr / "ch_PP-OCRv4_rec_infer.onnx", "MXFP4E2M1", {1, 3, 48, 96}, true}),
    [](const ::testing::TestParamInfo<RealCase>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
