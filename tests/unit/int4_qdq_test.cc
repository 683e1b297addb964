// QInt4 / QUInt4: the packing and the values against the ONNX specification (int4 / uint4 tensors
// hold two elements a byte, the first in the low nibble; QuantizeLinear saturates round-half-even
// values to [-8, 7] / [0, 15]), and whole quantized models: the exported model equals the
// simulation, and ONNX Runtime runs it as the engine does.
#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <tuple>
#include <vector>

#include "calib/data_reader.h"
#include "engine/session.h"
#include "qmath/quantize.h"
#include "quant/config.h"
#include "quant/export.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;

std::vector<uint8_t> int4_bytes_of(const ir::Tensor& t) {
  std::vector<uint8_t> out(t.byte_size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(t.bytes().data()[i]);
  return out;
}

TEST(Int4, PackingIsLowNibbleFirstAsTheOnnxSpecSays) {
  // int4 [1, -2, 7]: 0x1 | 0xE << 4, then 0x7 and a zero high nibble.
  const std::vector<int8_t> signed_values = {1, -2, 7};
  std::byte packed[2];
  qmath::pack_4bit(signed_values.data(), 3, packed);
  EXPECT_EQ(static_cast<uint8_t>(packed[0]), 0xE1);
  EXPECT_EQ(static_cast<uint8_t>(packed[1]), 0x07);
  int8_t back[3];
  qmath::unpack_4bit(packed, 3, true, back);
  EXPECT_EQ(std::vector<int8_t>(back, back + 3), signed_values);
  // uint4 [15, 0, 3]
  const std::vector<int8_t> unsigned_values = {15, 0, 3};
  qmath::pack_4bit(unsigned_values.data(), 3, packed);
  EXPECT_EQ(static_cast<uint8_t>(packed[0]), 0x0F);
  EXPECT_EQ(static_cast<uint8_t>(packed[1]), 0x03);
  qmath::unpack_4bit(packed, 3, false, back);
  EXPECT_EQ(std::vector<int8_t>(back, back + 3), unsigned_values);
}

TEST(Int4, QuantizeTensorSaturatesAndRoundsHalfToEven) {
  // The spec's y = saturate(round(x / s) + zp): -10 -> -8, -1.5 -> -2, 0.5 -> 0, 2.5 -> 2, 100 -> 7.
  ir::Tensor x = ir::Tensor::from_values<float>({5}, std::vector<float>{-10.f, -1.5f, 0.5f, 2.5f, 100.f});
  std::vector<qmath::ScaleZeroPoint> one = {{1.0, 0, 0}};
  ir::Tensor q = quantize_tensor(x, DataType::Int4, one, std::nullopt);
  EXPECT_EQ(q.dtype(), DataType::Int4);
  EXPECT_EQ(int4_bytes_of(q), (std::vector<uint8_t>{0xE8, 0x20, 0x07}));
  ir::Tensor d = dequantize_tensor(q, one, std::nullopt);
  EXPECT_EQ(std::vector<float>(d.values<float>().begin(), d.values<float>().end()),
            (std::vector<float>{-8.f, -2.f, 0.f, 2.f, 7.f}));
  // uint4, zero point 8: -9 -> 0 (saturated), 0.5 -> 8, 7.4 -> 15, 8 -> 15 (saturated).
  ir::Tensor u = ir::Tensor::from_values<float>({4}, std::vector<float>{-9.f, 0.5f, 7.4f, 8.f});
  std::vector<qmath::ScaleZeroPoint> mid = {{1.0, 8, 0}};
  ir::Tensor qu = quantize_tensor(u, DataType::UInt4, mid, std::nullopt);
  EXPECT_EQ(int4_bytes_of(qu), (std::vector<uint8_t>{0x80, 0xFF}));
  // Per channel along axis 1 of [2, 2]: scales 1 and 0.5.
  ir::Tensor pc = ir::Tensor::from_values<float>({2, 2}, std::vector<float>{3.f, 3.f, -3.f, 5.f});
  std::vector<qmath::ScaleZeroPoint> two = {{1.0, 0, 0}, {0.5, 0, 0}};
  EXPECT_EQ(int4_bytes_of(quantize_tensor(pc, DataType::Int4, two, 1)), (std::vector<uint8_t>{0x63, 0x7D}));
  // The 4-bit ranges of the seeds' tables: full, no symmetric entry, reduced.
  EXPECT_EQ(qmath::quant_range(DataType::Int4, true).min, -8);
  EXPECT_EQ(qmath::quant_range(DataType::UInt4, false, true).max, 7);
  EXPECT_EQ(qmath::quant_range(DataType::Int4, false, true).min, -4);
}

TEST(Int4, EngineDequantizesBlockedInt4AsTheSpecDefines) {
  // DequantizeLinear-21, x int4 [4, 2], block_size 2 along axis 0: scales [2, 2], y = (x - zp) * s.
  const std::vector<int8_t> codes = {-8, 7, 1, -1, 3, 2, -4, 0};
  ir::Tensor x(DataType::Int4, {4, 2});
  qmath::pack_4bit(codes.data(), 8, x.mutable_bytes());
  ir::Tensor s = ir::Tensor::from_values<float>({2, 2}, std::vector<float>{0.5f, 2.f, 0.25f, 1.f});
  ir::Tensor zp(DataType::Int4, {2, 2});
  const std::vector<int8_t> zero = {1, 0, 0, -1};
  qmath::pack_4bit(zero.data(), 4, zp.mutable_bytes());
  std::vector<ir::Tensor> y =
      testing::run_node("DequantizeLinear", "", 21, {{"x", x, true}, {"s", s, true}, {"zp", zp, true}},
                        testing::attrs(ir::Attribute::of_int("axis", 0), ir::Attribute::of_int("block_size", 2)));
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::vector<float>(y[0].values<float>().begin(), y[0].values<float>().end()),
            (std::vector<float>{-4.5f, 14.f, 0.f, -2.f, 0.75f, 3.f, -1.f, 1.f}));
}

struct Int4Case {
  const char* label;
  DataType activation, weight;
  bool per_channel;
  int64_t opset;
};

// quantize_static on the exporters' test model: 4-bit initializers packed, the Q/DQ domain by
// ONNX Runtime's rule (com.microsoft below opset 21), the engine's run of the written model
// equal to the simulation, and ONNX Runtime's run within one output step of the engine's.
class Int4Model : public ::testing::TestWithParam<Int4Case> {};

TEST_P(Int4Model, WrittenModelRunsInOrtAsSimulated) {
  const Int4Case& c = GetParam();
  ir::Model model = testing::export_test_model(c.opset);
  QuantConfig config;
  config.calibrate_method = calib::Method::MinMax;
  config.activation_type = c.activation;
  config.weight_type = c.weight;
  config.per_channel = c.per_channel;
  check_config(config);
  QuantizeResult r = testing::quantize_random(model, config, 4, 1);
  size_t four_bit = 0;
  for (const auto& node : r.model.graph->nodes()) {
    if (node->op_type != "DequantizeLinear") continue;
    const ir::Value* x = node->input(0);
    if (x->has_initializer() && qmath::is_4bit_type(x->initializer().dtype())) {
      ++four_bit;
      EXPECT_EQ(x->initializer().byte_size(), static_cast<size_t>((x->initializer().size() + 1) / 2)) << x->name();
    }
    EXPECT_EQ(node->domain, c.opset < 21 ? "com.microsoft" : "") << node->name;
  }
  EXPECT_GE(four_bit, 3u);  // the Conv's, the Gemm's and the MatMul's weights
  if (c.opset >= 21) {
    EXPECT_EQ(r.model.opset(""), c.opset);
  }

  const ir::Model& float_model = r.prepared ? *r.prepared : model;
  Simulation simulation(float_model, r.plan, config, 2);
  engine::SessionOptions so;
  so.threads = 2;
  engine::Session exported(r.model, so);
  fs::path dir = testing::fresh_dir(std::string("int4_") + c.label);
  ir::save_model(r.model, dir / "q.onnx");
  for (uint32_t seed : {7u, 8u}) {
    std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> simulated = simulation.run(feeds), ran = exported.run(feeds);
    testing::expect_bit_equal(simulated, ran, "simulation and written model");
    std::vector<ir::Tensor> ort = testing::ort_run(dir / "q.onnx", r.model, feeds, dir / std::to_string(seed), true);
    ASSERT_EQ(ort.size(), ran.size());
    for (size_t i = 0; i < ort.size(); ++i) {
      const std::string& name = r.model.graph->outputs()[i]->name();
      double step = r.plan.provider(name).params.at(0).scale;
      double steps = testing::max_steps(ort[i], ran[i], step);
      std::cout << c.label << " seed " << seed << " " << name << ": |ORT - onnxptq| <= " << steps << " steps\n";
      EXPECT_LE(steps, 1.001) << name;
    }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, Int4Model,
                         ::testing::Values(Int4Case{"u8s4_channel_opset13", DataType::UInt8, DataType::Int4, true, 13},
                                           Int4Case{"u8u4_tensor_opset21", DataType::UInt8, DataType::UInt4, false, 21},
                                           Int4Case{"s4s4_channel_opset21", DataType::Int4, DataType::Int4, true, 21}),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(Int4, FormatsOtherThanQdqAreRefusedByName) {
  for (QuantFormat f : {QuantFormat::QOperator, QuantFormat::VitisQDQ, QuantFormat::ExtendedQDQ}) {
    QuantConfig c;
    c.calibrate_method = calib::Method::MinMax;
    c.format = f;
    c.weight_type = DataType::Int4;
    std::string e = testing::error_of([&] { check_config(c); });
    EXPECT_NE(e.find("QInt4 and QUInt4 are written by QuantFormat.QDQ only"), std::string::npos) << e;
  }
  EXPECT_EQ(parse_quant_type("QuantType.QUInt4"), DataType::UInt4);
  EXPECT_EQ(parse_quant_type("ExtendedQuantType.QInt4"), DataType::Int4);
}

}  // namespace
}  // namespace onnxptq::quant
