// The model tools (tools/convert.h, passes/model_format.h's fix_shapes) on graphs built here, their
// numbers worked out by hand: u16u8_to_u8u8's parameters, constants and biases, a8w8_npu_to_cpu's
// int32 biases, bias_int32_to_int16's clipping, remove_qdq at graph outputs, the --fix-shapes
// syntax, fp32_to_fp16's blocked nodes and edges (ONNX Runtime runs that one), qdq_to_qop on what
// it leaves alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "ir/float16.h"
#include "onnxptq/onnxptq.h"
#include "passes/model_format.h"
#include "support/export_models.h"
#include "support/one_node.h"
#include "tools/convert.h"

namespace onnxptq {
namespace {

using ir::DataType;

struct Built {
  ir::Model m;
  ir::Graph& g = *m.graph;
  explicit Built(int64_t opset = 13) { m.set_opset("", opset); }

  ir::Value* input(const std::string& name, std::vector<int64_t> dims) {
    ir::Value* v = g.add_value(name);
    v->type = ir::ValueType::tensor(DataType::Float, dims);
    g.add_input(v);
    return v;
  }
  template <class T>
  ir::Value* init(const std::string& name, std::vector<int64_t> dims, std::vector<T> values) {
    ir::Value* v = g.add_value(name);
    g.set_initializer(v, ir::Tensor::from_values<T>(std::move(dims), values));
    return v;
  }
  ir::Value* node(const std::string& op, std::vector<ir::Value*> inputs, const std::string& out,
                  const std::string& domain = "") {
    ir::Value* v = g.add_value(out);
    g.add_node(op, std::move(inputs), {v}, out + "_node", domain);
    return v;
  }
  void output(ir::Value* v, std::vector<int64_t> dims) {
    v->type = ir::ValueType::tensor(DataType::Float, dims);
    g.add_output(v);
  }
  const ir::Tensor& tensor(const std::string& name) const { return g.find_value(name)->initializer(); }
  static const ir::Node* producer(const ir::Model& m, const std::string& value) {
    return m.graph->find_value(value)->producer();
  }
};

template <class T>
std::vector<T> values(const ir::Tensor& t) {
  auto v = t.values<T>();
  return std::vector<T>(v.begin(), v.end());
}

// ------------------------------------------------------------------------------ u16u8_to_u8u8

TEST(U16u8ToU8u8, ParametersConstantsAndBiasesByHand) {
  Built b;
  ir::Value* x = b.input("x", {1, 2, 3, 3});
  ir::Value* s = b.init<float>("s", {}, {0.001f});
  ir::Value* z = b.init<uint16_t>("z", {}, {30000});
  ir::Value* q = b.node("QuantizeLinear", {x, s, z}, "xq", "com.microsoft");
  ir::Value* dq = b.node("DequantizeLinear", {q, s, z}, "xdq", "com.microsoft");
  ir::Value* w = b.node(
      "DequantizeLinear",
      {b.init<int8_t>("w", {2, 2, 1, 1}, {1, 2, 3, 4}), b.init<float>("ws", {}, {0.5f}), b.init<int8_t>("wz", {}, {0})},
      "wdq");
  ir::Value* bias = b.node(
      "DequantizeLinear",
      {b.init<int32_t>("b", {2}, {100, -257}), b.init<float>("bs", {}, {0.0005f}), b.init<int32_t>("bz", {}, {0})},
      "bdq");
  ir::Value* conv = b.node("Conv", {dq, w, bias}, "conv");
  // A constant quantized like an activation (uint16): values (30000 - 1000) * 0.002 = 58, 78.
  ir::Value* c = b.node("DequantizeLinear",
                        {b.init<uint16_t>("c", {1, 2, 1, 1}, {30000, 40000}), b.init<float>("cs", {}, {0.002f}),
                         b.init<uint16_t>("cz", {}, {1000})},
                        "cdq", "com.microsoft");
  b.output(b.node("Mul", {conv, c}, "y"), {1, 2, 3, 3});

  ConvertResult r;
  ir::Model out = tools::u16u8_to_u8u8(b.m, r);
  EXPECT_EQ(r.changed, 1u);
  const ir::Node* xdq = Built::producer(out, "xdq");
  EXPECT_EQ(xdq->input(1)->initializer().values<float>()[0], static_cast<float>(double{0.001f} * 257));  // 0.257
  EXPECT_EQ(values<uint8_t>(xdq->input(2)->initializer()), std::vector<uint8_t>{117});  // 30000 / 257 = 116.7
  // The bias: 0.05 and -0.1285 in units of s_x * s_w = 0.257 * 0.5 = 0.1285: 0.39 -> 0, -1.
  const ir::Node* bdq = Built::producer(out, "bdq");
  EXPECT_EQ(values<int32_t>(bdq->input(0)->initializer()), (std::vector<int32_t>{0, -1}));
  EXPECT_EQ(bdq->input(1)->initializer().values<float>()[0], static_cast<float>(double{0.001f} * 257) * 0.5f);
  // The constant: scale 0.514, zero point 1000 / 257 = 3.9 -> 4; 58 / 0.514 = 112.8 -> 113 + 4, 78 / 0.514 = 151.8 ->
  // 152 + 4.
  const ir::Node* cdq = Built::producer(out, "cdq");
  EXPECT_EQ(values<uint8_t>(cdq->input(0)->initializer()), (std::vector<uint8_t>{117, 156}));
  EXPECT_EQ(values<uint8_t>(cdq->input(2)->initializer()), std::vector<uint8_t>{4});
  EXPECT_EQ(b.tensor("z").dtype(), DataType::UInt16);  // the input model is not changed
}

// ------------------------------------------------------------------------------ a8w8_npu_to_cpu

TEST(A8w8NpuToCpu, Int32BiasesByHand) {
  for (bool per_channel : {false, true}) {
    Built b;
    ir::Value* x = b.node(
        "DequantizeLinear",
        {b.node("QuantizeLinear",
                {b.input("x", {1, 2, 2, 2}), b.init<float>("xs", {}, {0.02f}), b.init<int8_t>("xz", {}, {0})}, "xq"),
         b.g.find_value("xs"), b.g.find_value("xz")},
        "xdq");
    std::vector<float> ws = per_channel ? std::vector<float>{0.3f, 0.5f} : std::vector<float>{0.3f};
    std::vector<int64_t> wdims = per_channel ? std::vector<int64_t>{2} : std::vector<int64_t>{};
    ir::Value* w = b.node("DequantizeLinear",
                          {b.init<int8_t>("w", {2, 2, 1, 1}, {1, 2, 3, 4}), b.init<float>("ws", wdims, ws),
                           b.init<int8_t>("wz", wdims, std::vector<int8_t>(ws.size(), 0))},
                          "wdq");
    if (per_channel) b.g.find_value("wdq")->producer()->set_attribute(ir::Attribute::of_int("axis", 0));
    // An NPU bias: int8 of its own scale 0.01, values 0.1 and -0.2.
    ir::Value* bias = b.node(
        "DequantizeLinear",
        {b.init<int8_t>("b", {2}, {10, -20}), b.init<float>("bs", {}, {0.01f}), b.init<int8_t>("bz", {}, {0})}, "bdq");
    b.output(b.node("Conv", {x, w, bias}, "y"), {1, 2, 2, 2});
    ConvertResult r;
    ir::Model out = tools::a8w8_npu_to_cpu(b.m, r);
    EXPECT_EQ(r.changed, 1u);
    const ir::Node* dq = Built::producer(out, Built::producer(out, "y")->input(2)->name());
    // s_b = 0.02 * 0.3 = 0.006: 0.1 / 0.006 = 16.7 -> 17, -0.2 / 0.006 = -33.3 -> -33; per channel
    // the second is in units of 0.02 * 0.5 = 0.01: -20.
    std::vector<int32_t> want = per_channel ? std::vector<int32_t>{17, -20} : std::vector<int32_t>{17, -33};
    EXPECT_EQ(values<int32_t>(dq->input(0)->initializer()), want) << per_channel;
    std::vector<float> scales = values<float>(dq->input(1)->initializer());
    EXPECT_EQ(scales[0], 0.02f * 0.3f);
    if (per_channel) {
      EXPECT_EQ(scales.at(1), 0.02f * 0.5f);
    }
    EXPECT_EQ(dq->input(2)->initializer().dtype(), DataType::Int32);
    EXPECT_EQ(out.graph->find_value("b"), nullptr);  // the 8-bit bias is gone
  }
}

// ------------------------------------------------------------------------------ bias_int32_to_int16

TEST(BiasInt32ToInt16, ClipsWithAWarningAndPicksTheDomain) {
  for (int64_t opset : {13, 21}) {
    Built b(opset);
    ir::Value* w = b.init<float>("w", {3, 1, 1, 1}, {1, 1, 1});
    ir::Value* bias = b.node("DequantizeLinear",
                             {b.init<int32_t>("b", {3}, {40000, -5, -40000}), b.init<float>("bs", {}, {0.001f}),
                              b.init<int32_t>("bz", {}, {0})},
                             "bdq");
    b.output(b.node("Conv", {b.input("x", {1, 1, 2, 2}), w, bias}, "y"), {1, 3, 2, 2});
    ConvertResult r;
    ir::Model out = tools::bias_int32_to_int16(b.m, r);
    const ir::Node* dq = Built::producer(out, "bdq");
    EXPECT_EQ(values<int16_t>(dq->input(0)->initializer()), (std::vector<int16_t>{32767, -5, -32768}));
    EXPECT_EQ(dq->input(2)->initializer().dtype(), DataType::Int16);
    EXPECT_EQ(dq->domain, opset < 21 ? "com.microsoft" : "");
    ASSERT_EQ(r.log.size(), opset < 21 ? 3u : 2u);
    EXPECT_EQ(r.log.back(), "warning: 2 bias values were beyond int16 and clipped");
  }
}

// The quantizer's Int16Bias (on the plan) gives what the tool gives; formats without int32 biases refuse it.
TEST(BiasInt32ToInt16, Int16BiasInTheQuantizer) {
  Model model(std::make_shared<const ir::Model>(testing::export_test_model()));
  RandomData data;
  data.count = 2;
  std::unique_ptr<DataReader> reader = random_reader(model, data);
  Config config = Config::from_json(R"({"calibrate_method": "MinMax", "extra_options": {"Int16Bias": true}})");
  Model q = quantize(model, *reader, config).model;
  size_t int16 = 0, int32 = 0;
  for (const auto& n : q.ir().graph->nodes())
    if (n->op_type == "DequantizeLinear" && n->input(0)->has_initializer()) {
      int16 += n->input(0)->initializer().dtype() == DataType::Int16;
      int32 += n->input(0)->initializer().dtype() == DataType::Int32;
    }
  EXPECT_EQ(int16, 2u);  // the Conv's and the Gemm's
  EXPECT_EQ(int32, 0u);
  for (const char* format : {"QOperator", "VitisQuantFormat.FixNeuron"}) {
    Config c = Config::from_json(std::string(R"({"calibrate_method": "NonOverflow", "quant_format": ")") + format +
                                 R"(", "extra_options": {"Int16Bias": true}})");
    EXPECT_EQ(testing::error_of([&] { c.check(); }).rfind("extra option Int16Bias converts the int32 bias", 0), 0u)
        << format;
  }
}

// ------------------------------------------------------------------------------ remove_qdq

TEST(RemoveQdq, GraphOutputsKeepTheirNames) {
  Built b;
  ir::Value* r = b.node("Relu", {b.input("x", {4})}, "r");
  ir::Value* s = b.init<float>("s", {}, {0.1f});
  ir::Value* z = b.init<uint8_t>("z", {}, {0});
  b.output(b.node("DequantizeLinear", {b.node("QuantizeLinear", {r, s, z}, "rq"), s, z}, "y"), {4});
  // A quantized value two DequantizeLinear nodes read: not a single-reader pair, it stays.
  ir::Value* q2 = b.node("QuantizeLinear", {b.g.find_value("x"), s, z}, "xq");
  b.output(b.node("DequantizeLinear", {q2, s, z}, "d1"), {4});
  b.output(b.node("DequantizeLinear", {q2, s, z}, "d2"), {4});
  b.output(b.node("FixNeuron", {b.g.find_value("x")}, "f", "ai.onnx.contrib"), {4});
  ConvertResult result;
  ir::Model out = tools::remove_qdq(b.m, result);
  EXPECT_EQ(result.changed, 2u);  // the pair before y, and the FixNeuron
  EXPECT_EQ(Built::producer(out, "y")->op_type, "Relu");
  EXPECT_EQ(Built::producer(out, "f")->op_type, "Identity");  // x is a graph input: it cannot be renamed
  EXPECT_EQ(Built::producer(out, "d1")->op_type, "DequantizeLinear");
  EXPECT_EQ(testing::count_ops(out, "QuantizeLinear"), 1);
}

// ------------------------------------------------------------------------------ fix_shapes

TEST(FixShapes, Syntax) {
  auto shapes = passes::parse_fix_shapes(" a:[1,2] ; b : [3 , 4,5];", "--fix-shapes");
  EXPECT_EQ(shapes.at("a"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(shapes.at("b"), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(passes::parse_fix_shapes("ns:x:[1]", "f").at("ns:x"), std::vector<int64_t>{1});  // the last ':' splits
  EXPECT_EQ(testing::error_of([] { passes::parse_fix_shapes("", "f"); }), "f: no NAME:[d1,d2,...] given");
  EXPECT_EQ(testing::error_of([] { passes::parse_fix_shapes("a:[1,-2]", "f"); }),
            "f: 'a:[1,-2]' for 'a' is not NAME:[d1,d2,...] with whole dims of 1 or more");
  EXPECT_EQ(testing::error_of([] { passes::parse_fix_shapes("a:[1,,2]", "f"); }),
            "f: 'a:[1,,2]' for 'a' is not NAME:[d1,d2,...] with whole dims of 1 or more");
  EXPECT_EQ(testing::error_of([] { passes::parse_fix_shapes("a:[1];b[2]", "f"); }),
            "f: 'b[2]' is not NAME:[d1,d2,...] with whole dims of 1 or more");
}

// ------------------------------------------------------------------------------ fp32_to_fp16

TEST(Fp32ToFp16, BlockedNodesStayFloat32BetweenCastsAndOrtRunsIt) {
  Built b;
  ir::Value* x = b.input("x", {1, 1, 2, 2});
  ir::Value* m = b.node("Mul", {x, b.init<float>("two", {}, {2.0f})}, "m");
  ir::Value* r = b.node("Resize", {m, b.init<float>("roi", {0}, {}), b.init<float>("scales", {4}, {1, 1, 2, 2})}, "r");
  ir::Value* c = b.node("Cast", {r}, "c");
  b.g.find_value("c")->producer()->set_attribute(ir::Attribute::of_int("to", 1));
  ir::Value* big = b.node("Add", {c, b.init<float>("big", {}, {20000.0f})}, "big_add");
  b.output(b.node("Sub", {big, b.init<float>("also_big", {}, {20000.0f})}, "y"), {1, 1, 4, 4});
  ConvertResult result;
  ir::Model out = tools::fp32_to_fp16(b.m, {}, result);
  EXPECT_EQ(out.graph->inputs()[0]->type.elem_type, DataType::Float16);
  EXPECT_EQ(b.tensor("two").dtype(), DataType::Float);  // the input model is not changed
  EXPECT_EQ(out.graph->find_value("two")->initializer().dtype(), DataType::Float16);
  EXPECT_EQ(out.graph->find_value("scales")->initializer().dtype(), DataType::Float);  // Resize is blocked
  EXPECT_EQ(out.graph->find_value("big")->initializer().dtype(), DataType::Float);     // beyond 1e4
  EXPECT_EQ(Built::producer(out, "r")->input(0)->producer()->op_type, "Cast");         // float16 -> float32
  EXPECT_EQ(Built::producer(out, "c")->attr_int("to", 0), 10);                         // Cast to FLOAT16 now
  EXPECT_EQ(result.log.at(1), "2 nodes kept float32: they read constants beyond +-1e4");

  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("onnxptq_fp16_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ir::save_model(out, dir / "fp16.onnx");
  std::vector<uint16_t> half = {ir::float_to_half(0.5f), ir::float_to_half(-1.25f), ir::float_to_half(3.0f),
                                ir::float_to_half(0.125f)};
  std::map<std::string, ir::Tensor> feeds = {
      {"x", ir::Tensor(DataType::Float16, {1, 1, 2, 2}, Bytes::copy_of(half.data(), half.size() * 2))}};
  std::vector<ir::Tensor> y = testing::ort_run(dir / "fp16.onnx", out, feeds, dir / "ort");
  ASSERT_EQ(y.at(0).dtype(), DataType::Float);  // y is written by a float32 node (Sub reads the big constant)
  std::vector<float> got = values<float>(y[0]);
  // Nearest-neighbour upsampling of 2x: each value twice, then +20000 - 20000 in float32.
  std::vector<float> want = {1, 1, -2.5f, -2.5f, 1, 1, -2.5f, -2.5f, 6, 6, 0.25f, 0.25f, 6, 6, 0.25f, 0.25f};
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.002) << i;  // float32 near 20000
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------------------------------------ qdq_to_qop

TEST(QdqToQop, LeavesWhatTheQOperatorFormCannotHold) {
  Built b;
  b.m.set_opset("com.microsoft", 1);
  ir::Value* x = b.input("x", {1, 2});
  ir::Value* s = b.init<float>("s", {}, {0.1f});
  ir::Value* z16 = b.init<uint16_t>("z16", {}, {100});
  ir::Value* z8 = b.init<uint8_t>("z8", {}, {10});
  // A uint16 pair: stays as it is.
  ir::Value* a = b.node("DequantizeLinear", {b.node("QuantizeLinear", {x, s, z16}, "q16", "com.microsoft"), s, z16},
                        "a", "com.microsoft");
  // An 8-bit pair on a value also read as it is: the pair reads a copy (Identity).
  ir::Value* r = b.node("Relu", {a}, "r");
  ir::Value* rd = b.node("DequantizeLinear", {b.node("QuantizeLinear", {r, s, z8}, "rq"), s, z8}, "rd");
  b.output(b.node("Add", {rd, r}, "y"), {1, 2});
  ConvertResult result;
  ir::Model out = tools::qdq_to_qop(b.m, result);
  EXPECT_EQ(Built::producer(out, "a")->domain, "com.microsoft");  // the 16-bit pair is kept
  EXPECT_EQ(testing::count_ops(out, "Identity"), 1);
  std::map<std::string, ir::Tensor> feeds = {{"x", ir::Tensor::from_values<float>({1, 2}, {0.34f, -0.5f})}};
  std::vector<ir::Tensor> got = testing::run_model(out, feeds), want = testing::run_model(b.m, feeds);
  EXPECT_EQ(values<float>(got.at(0)), values<float>(want.at(0)));  // relu(0.3) quantized + 0.3; 0 + 0
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// ------------------------------------------------------------------------------ dump_model

// vai_q_onnx's FixNeuron format: each FixNeuron's integers are round(y * 2^pos) of its output y,
// clipped to int8 (the seeds' dump), worked out here from the dumped floats and the pos attribute.
TEST(DumpModel, FixNeuronIntegersAreTheOutputTimesTwoToThePos) {
  Model model(std::make_shared<const ir::Model>(testing::export_test_model()));
  RandomData data;
  data.count = 2;
  std::unique_ptr<DataReader> reader = random_reader(model, data);
  Config config =
      Config::from_json(R"({"quant_format": "VitisQuantFormat.FixNeuron", "calibrate_method": "NonOverflow"})");
  Model q = quantize(model, *reader, config).model;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("onnxptq_dump_fix_" + std::to_string(getpid()));
  std::unique_ptr<DataReader> one = random_reader(model, RandomData{.count = 1, .seed = 5});
  DumpOptions options;
  options.output_dir = dir;
  options.dump_float = true;
  DumpResult result = dump_model(q, *one, options);
  size_t fix_neurons = 0;
  for (const auto& n : q.ir().graph->nodes()) {
    if (n->op_type != "FixNeuron") continue;
    ++fix_neurons;
    std::string name = n->output(0)->name();
    const ir::Attribute* pos = n->find_attribute("pos");
    ASSERT_TRUE(pos) << name;
    int p = pos->type == ir::AttrType::Int ? static_cast<int>(pos->i) : std::stoi(pos->s);
    std::ifstream floats(dir / (name + "_float.bin"), std::ios::binary);
    std::ifstream ints(dir / (name + ".bin"), std::ios::binary);
    ASSERT_TRUE(floats && ints) << name;
    float y = 0;
    int8_t got = 0;
    size_t count = 0;
    while (floats.read(reinterpret_cast<char*>(&y), sizeof y)) {
      ASSERT_TRUE(ints.read(reinterpret_cast<char*>(&got), 1)) << name;
      double want = std::clamp(std::nearbyint(static_cast<double>(y) * std::ldexp(1.0, p)), -128.0, 127.0);
      ASSERT_EQ(got, want) << name << "[" << count << "]";
      ++count;
    }
    EXPECT_GT(count, 0u) << name;
  }
  EXPECT_GT(fix_neurons, 5u);
  EXPECT_EQ(result.quantized, fix_neurons);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq
