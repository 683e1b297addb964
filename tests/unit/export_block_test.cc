// Quark's block formats (QBFP, QMX) through the quantizer: every preset of these types writes one
// com.amd.quark BFPQuantizeDequantize / MXQuantizeDequantize node per planned tensor with the
// preset's attributes (Quark's ExtendedQDQQuantizer), calibrates nothing for them, puts the blocks
// of MatMul and Gemm inputs on the reduced axis (Quark's refine_block_axis), and the written model
// run by the engine computes, bit for bit, what the simulation of the plan computes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <filesystem>
#include <functional>
#include <random>

#include "ir/npy.h"
#include "quant/block_format.h"
#include "quant/config_keys.h"
#include "quant/export.h"
#include "quant/presets.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"
#include "support/export_models.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;

QuantConfig preset_config(const std::string& preset) {
  QuantConfig config;
  apply_preset(config, preset);
  config.calib.threads = 2;
  check_config(config);
  return config;
}

bool is_block_op(const ir::Node& n) {
  return n.domain == "com.amd.quark" && (n.op_type == "BFPQuantizeDequantize" || n.op_type == "MXQuantizeDequantize");
}

// The block node feeding input `i` of `n`, or nullptr.
const ir::Node* block_feeding(const ir::Node& n, size_t i) {
  const ir::Node* p = n.input(i) ? n.input(i)->producer() : nullptr;
  return p && is_block_op(*p) ? p : nullptr;
}

class BlockPresets : public ::testing::TestWithParam<std::string> {};

TEST_P(BlockPresets, OneNodePerTensorWithThePresetsAttributesComputingTheSimulation) {
  const std::string preset = GetParam();
  ir::Model model = testing::export_test_model();
  QuantConfig config = preset_config(preset);
  Plan plan = testing::calibrated_plan(model, config);

  size_t block_tensors = 0;
  for (const TensorPlan& t : plan.tensors)
    if (quant_type_is_block(plan.provider(t.name).type)) {
      ++block_tensors;
      EXPECT_TRUE(t.params.empty()) << t.name;  // no scale: an exponent per block
      EXPECT_TRUE(t.block_axis.has_value()) << t.name;
    }
  ASSERT_GT(block_tensors, 0u);
  for (const std::string& name : plan.tensors_to_calibrate())
    EXPECT_FALSE(quant_type_is_block(plan.provider(name).type)) << name << " is calibrated";

  fs::path dir = fs::temp_directory_path() / ("onnxptq_export_block_" + std::to_string(getpid()) + "_" + preset);
  fs::create_directories(dir);
  ir::save_model(export_model(model, plan, config), dir / "q.onnx");
  EXPECT_EQ(testing::onnx_check(dir / "q.onnx"), "");
  ir::Model q = ir::load_model(dir / "q.onnx");
  fs::remove_all(dir);
  EXPECT_EQ(q.opset("com.amd.quark"), 1);

  size_t nodes = 0;
  for (const auto& n : q.graph->nodes()) {
    if (!is_block_op(*n)) continue;
    ++nodes;
    const bool constant = n->input(0)->has_initializer();
    if (n->op_type == "BFPQuantizeDequantize") {
      EXPECT_EQ(n->attr_string("bfp_method", ""), config.bfp.bfp_method);
      EXPECT_EQ(n->attr_int("bit_width", 0), config.bfp.bit_width);
      EXPECT_EQ(n->attr_int("block_size", 0), config.bfp.block_size);
      EXPECT_EQ(n->attr_int("rounding_mode", -1), 2);  // every preset rounds half to even
      EXPECT_EQ(n->attr_int("convert_to_bfloat_before_bfp", -1), 0);
    } else {
      EXPECT_EQ(n->attr_string("element_dtype", ""), config.mx.element_dtype);
      EXPECT_EQ(n->attr_int("block_size", 0), 32);
      EXPECT_EQ(n->attr_int("rounding_mode", -1), 2);
    }
    // Quark writes axis 0 for a rank-1 initializer (the biases).
    if (constant && n->input(0)->initializer().rank() == 1) {
      EXPECT_EQ(n->attr_int("axis", -9), 0) << n->name;
    }
  }
  EXPECT_EQ(nodes, block_tensors);

  // The blocks of MatMul and Gemm inputs run along the axis they reduce.
  for (const auto& n : q.graph->nodes()) {
    // The axis of the block node feeding input i, checked when there is one for this node alone
    // (of a tensor several of these ops read, the last one decides, as in Quark).
    auto expect_axis = [&](size_t i, int64_t want) {
      const ir::Node* block = block_feeding(*n, i);
      if (block && block->output(0)->uses().size() == 1) {
        EXPECT_EQ(block->attr_int("axis", 9), want) << n->name << " input " << i;
      }
    };
    if (n->op_type == "MatMul") {
      expect_axis(0, -1);
      expect_axis(1, 0);  // B is [K, N]
    } else if (n->op_type == "Gemm") {
      expect_axis(0, n->attr_int("transA", 0) ? 0 : 1);
      expect_axis(1, n->attr_int("transB", 0) ? 1 : 0);
    } else if (n->op_type == "Conv") {
      expect_axis(0, 1);  // the input channels
      expect_axis(1, 1);
    }
  }

  Simulation simulation(model, plan, config, 2);
  engine::SessionOptions options;
  options.threads = 2;
  for (uint32_t seed : {3u, 4u}) {
    std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> simulated = simulation.run(feeds);
    std::vector<ir::Tensor> written = testing::run_model(q, feeds, true, options);
    std::vector<ir::Tensor> float_outputs = testing::run_model(model, feeds, true, options);
    ASSERT_EQ(simulated.size(), written.size());
    size_t changed = 0;
    for (size_t i = 0; i < written.size(); ++i) {
      auto s = simulated[i].values<float>(), w = written[i].values<float>(), f = float_outputs[i].values<float>();
      ASSERT_EQ(s.size(), w.size());
      size_t differ = 0;
      for (size_t k = 0; k < s.size(); ++k) {
        differ += std::bit_cast<uint32_t>(s[k]) != std::bit_cast<uint32_t>(w[k]);
        changed += s[k] != f[k];
      }
      EXPECT_EQ(differ, 0u) << "output " << i << ": the written model differs from the simulation";
    }
    EXPECT_GT(changed, 0u) << "the fake quantization changed nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(Quark, BlockPresets,
                         ::testing::Values("BFP16", "MX4", "MX6", "MX9", "MXFP8E5M2", "MXFP8E4M3", "MXFP6E3M2",
                                           "MXFP6E2M3", "MXFP4E2M1", "MXINT8", "BF16_BFP16", "BF16_MXINT8",
                                           "MX9_INT8"));

TEST(BlockFormat, RefineBlockAxisFalseKeepsTheAttributesAxis) {
  ir::Model model = testing::export_test_model();
  QuantConfig config = preset_config("MXINT8");
  config.refine_block_axis = false;
  Plan plan = testing::calibrated_plan(model, config);
  for (const TensorPlan& t : plan.tensors) {
    const ir::Value* v = model.graph->find_value(t.name);
    const bool vector = v->has_initializer() && v->initializer().rank() <= 1;
    EXPECT_EQ(t.block_axis, vector ? 0 : 1) << t.name;
  }
}

TEST(BlockFormat, EachTensorsBlocksRunAlongTheAxisItsReaderReduces) {
  ir::Model model = testing::export_test_model();
  Plan plan = testing::calibrated_plan(model, preset_config("BFP16"));
  // x: the Conv's input channels; w [8,3,3,3]: its input channels; b, b2: rank 1; w2: Gemm B [K, N];
  // mm: MatMul B [K, N]; f [1,16]: read by the Gemm (axis 1), then by the MatMul (-1), which decides.
  const std::map<std::string, int64_t> expected = {{"x", 1}, {"w", 1}, {"b", 0},   {"w2", 0},
                                                   {"b2", 0}, {"mm", 0}, {"f", -1}};
  for (const auto& [name, axis] : expected) {
    const TensorPlan* t = plan.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->block_axis, axis) << name;
  }
}

// x [1,8,16] -> MatMul(w [16,32]) -> Softmax(axis 2) -> y: the Softmax input, also the MatMul's
// output, takes the Softmax's axis (the later reader), and a Softmax output has no fixed parameters.
ir::Model attention_like_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 8, 16});
  g.add_input(x);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(16 * 32);
  for (float& v : w) v = u(rng);
  ir::Value* wv = g.add_value("w");
  g.set_initializer(wv, ir::Tensor::from_values<float>({16, 32}, w));
  g.add_node("MatMul", {x, wv}, {g.add_value("s")}, "matmul");
  ir::Node* softmax = g.add_node("Softmax", {g.find_value("s")}, {g.add_value("y")}, "softmax");
  softmax->set_attribute(ir::Attribute::of_int("axis", 2));
  ir::Value* y = g.find_value("y");
  y->type = ir::ValueType::tensor(ir::DataType::Float, {1, 8, 32});
  g.add_output(y);
  return m;
}

TEST(BlockFormat, SoftmaxInputsTakeTheSoftmaxAxis) {
  ir::Model model = attention_like_model();
  for (const char* preset : {"BFP16", "MXFP4E2M1"}) {
    SCOPED_TRACE(preset);
    QuantConfig config = preset_config(preset);
    Plan plan = testing::calibrated_plan(model, config);
    ASSERT_NE(plan.find("s"), nullptr);
    EXPECT_EQ(plan.find("s")->block_axis, 2);
    EXPECT_EQ(plan.find("x")->block_axis, -1);
    EXPECT_EQ(plan.find("w")->block_axis, 0);
    ASSERT_NE(plan.find("y"), nullptr);
    EXPECT_TRUE(plan.find("y")->fixed.empty());
    ir::Model q = export_model(model, plan, config);
    Simulation simulation(model, plan, config, 2);
    std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, 5);
    std::vector<ir::Tensor> simulated = simulation.run(feeds), written = testing::run_model(q, feeds);
    auto a = simulated.at(0).values<float>(), b = written.at(0).values<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << i;
  }
}

TEST(BlockFormat, TheBiasOfABlockLayerIsQuantizedLikeItsWeight) {
  ir::Model model = testing::export_test_model();
  for (const char* preset : {"BFP16", "MX9_INT8"}) {
    SCOPED_TRACE(preset);
    QuantConfig config = preset_config(preset);
    Plan plan = testing::calibrated_plan(model, config);
    // Quark turns Int32Bias off for BFP/MX: no int32 bias fits a scale-less product.
    for (const char* bias : {"b", "b2"}) {
      const TensorPlan* t = plan.find(bias);
      ASSERT_NE(t, nullptr) << bias;
      EXPECT_EQ(t->role, Role::Weight);
      EXPECT_EQ(t->type, config.weight_type);
    }
  }
}

std::string config_error(const std::function<void(QuantConfig&)>& change) {
  QuantConfig c = preset_config("BFP16");
  try {
    change(c);
    check_config(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BlockFormat, WhatCannotWorkIsRefusedByName) {
  EXPECT_EQ(config_error([](QuantConfig& c) { c.format = QuantFormat::QDQ; }),
            "activation_type QBFP and weight_type QBFP: Quark's block formats QBFP and QMX are written by "
            "ExtendedQuantFormat.QDQ (its BFPQuantizeDequantize and MXQuantizeDequantize nodes), not by QDQ");
  EXPECT_EQ(config_error([](QuantConfig& c) { c.per_channel = true; }),
            "per_channel with weight_type QBFP: a block format shares an exponent per block, not a scale per channel");
  EXPECT_EQ(config_error([](QuantConfig& c) {
              c.include_fast_ft = true;
              c.fast_finetune.adaquant = false;
            }),
            "activation_type QBFP and weight_type QBFP: include_fast_ft with AdaRound, which chooses between "
            "integers; block-format weights train with FastFinetune OptimAlgorithm adaquant");
  EXPECT_EQ(config_error([](QuantConfig& c) { c.mx_given = true; }),
            "extra option MXAttributes takes effect only with a QMX type, and the config asks for none "
            "(activation_type, weight_type, AutoMixprecision)");
  EXPECT_EQ(config_error([](QuantConfig& c) { c.bfp.bit_width = 40; }),
            "extra option BFPAttributes: bit_width 40 is outside [10, 32] (8 exponent bits, a sign, 1 to 23 "
            "mantissa bits)");
  EXPECT_EQ(config_error([](QuantConfig& c) {
              c.activation_type = c.weight_type = ir::DataType::Int8;
              c.bfp_given = false;
              c.refine_block_axis = true;
            }),
            "extra option RefineBlockAxis takes effect only with a QBFP or QMX type, and the config asks for none");
  EXPECT_EQ(config_error([](QuantConfig& c) {
              c.format = QuantFormat::QDQ;
              c.activation_type = c.weight_type = ir::DataType::Int8;
              c.bfp_given = false;
              apply_extra_option(c, "NodePrecision", {{"conv", "QBFP"}});
            }),
            "a QBFP or QMX type (NodePrecision, TensorQuantOverrides, MixedPrecisionTensor or AutoMixprecision): "
            "Quark's block formats QBFP and QMX are written by ExtendedQuantFormat.QDQ (its BFPQuantizeDequantize "
            "and MXQuantizeDequantize nodes), not by QDQ");
}

TEST(BlockFormat, TensorQuantOverridesOfABlockTensorAreRefused) {
  ir::Model model = testing::export_test_model();
  auto error_of = [&](const QuantConfig& config) {
    try {
      testing::calibrated_plan(model, config);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  QuantConfig config = preset_config("BFP16");
  apply_extra_option(config, "TensorQuantOverrides", nlohmann::json::parse(R"({"x": [{"rmin": -1, "rmax": 1}]})"));
  EXPECT_EQ(error_of(config),
            "TensorQuantOverrides['x']: the tensor is of the block type QBFP, whose blocks share exponents: it has no "
            "scale, range, symmetry or axis to set");
  config = preset_config("A8W8");
  config.format = QuantFormat::ExtendedQDQ;
  apply_extra_option(config, "TensorQuantOverrides",
                     nlohmann::json::parse(R"({"x": [{"convert": {"quant_type": "QMX", "symmetric": true}}]})"));
  EXPECT_EQ(error_of(config),
            "TensorQuantOverrides['x'].convert: the block type QMX shares exponents per block: it has no scale, "
            "range or symmetry to set");
}

TEST(BlockFormat, BfpFixNeuronIsExtendedQdqWithBfpTypes) {
  QuantConfig c;
  apply_config_json(c, {{"quant_format", "VitisQuantFormat.MXFixNeuron"}});
  EXPECT_EQ(c.format, QuantFormat::ExtendedQDQ);
  EXPECT_EQ(c.activation_type, kQMx);
  EXPECT_EQ(c.weight_type, kQMx);
  apply_config_json(c, {{"quant_format", "VitisQuantFormat.BFPFixNeuron"}});
  EXPECT_EQ(c.activation_type, kQBfp);
  // Whatever the type keys say, before or after (vai_q_onnx and Quark ignore them with this format).
  apply_config_json(c, {{"activation_type", "QInt8"}, {"weight_type", "QUInt8"}});
  EXPECT_EQ(c.activation_type, kQBfp);
  EXPECT_EQ(c.weight_type, kQBfp);
  EXPECT_NO_THROW(check_config(c));
}

}  // namespace
}  // namespace onnxptq::quant
