// The quantize kernel family beyond the backend tests. Two kinds of checks:
//  - closed forms written here (round half to even, saturation, NaN, 4-bit packing, blocks,
//    errors), for the arithmetic of qmath/quantize.h and the Q/DQ kernels;
//  - ONNX Runtime as the oracle (npm onnxruntime-node through tests/oracle/ort_run.js): models
//    of many one-node cases (the com.microsoft QLinear ops, which only ORT defines, and the ONNX
//    ops at the types and opsets the backend tests miss) run by both, outputs bit-identical.
//    Skipped when node or onnxruntime-node is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "engine/session.h"
#include "ir/float16.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "onnxptq/error.h"
#include "qmath/quantize.h"
#include "support/kernel_run.h"
#include "support/one_node.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;
using ir::Attribute;
using ir::DataType;
using ir::Tensor;
using qmath::quantize_value;
using testing::attrs;
using In = testing::NodeInput;
using kernel_test::kInf;
using kernel_test::kNaN;
using kernel_test::make;
using kernel_test::scalar;
using kernel_test::scalar_of;

using testing::kSource;

template <class T>
Tensor random_ints(std::vector<int64_t> dims, std::mt19937& rng, int lo = std::numeric_limits<T>::lowest(),
                   int hi = std::numeric_limits<T>::max()) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(ir::element_count(dims));
  for (T& x : v) x = static_cast<T>(d(rng));
  return make<T>(std::move(dims), v);
}

Tensor uniform_floats(std::vector<int64_t> dims, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(ir::element_count(dims));
  for (float& x : v) x = d(rng);
  return make<float>(std::move(dims), v);
}

float random_scale(std::mt19937& rng) { return std::uniform_real_distribution<float>(0.002f, 0.2f)(rng); }

template <class T>
T random_zp(std::mt19937& rng) {
  return static_cast<T>(
      std::uniform_int_distribution<int>(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max())(rng));
}

// ---------------------------------------------------------------------------------------------
// A model of independent nodes, run by the engine and (optionally) by ONNX Runtime.

class CaseModel {
 public:
  CaseModel(int64_t opset, int64_t ir_version, bool contrib) {
    model_.ir_version = ir_version;
    model_.set_opset("", opset);
    if (contrib) model_.set_opset("com.microsoft", 1);
  }

  // A graph input fed with `t`; returns its name.
  std::string feed(const std::string& name, Tensor t) {
    ir::Value* v = model_.graph->add_value(name);
    v->type = ir::ValueType::tensor(t.dtype(), t.dims());
    model_.graph->add_input(v);
    feeds_[name] = std::move(t);
    return name;
  }
  // An initializer.
  std::string constant(const std::string& name, Tensor t) {
    model_.graph->set_initializer(model_.graph->add_value(name), std::move(t));
    return name;
  }
  // A node; input names "" are omitted optional inputs. Its outputs become graph outputs.
  void node(const std::string& op, const std::string& domain, const std::vector<std::string>& inputs,
            const std::vector<std::string>& outputs, std::vector<Attribute> attrs = {}, bool graph_outputs = true) {
    ir::Graph& g = *model_.graph;
    std::vector<ir::Value*> ins, outs;
    for (const std::string& n : inputs) ins.push_back(n.empty() ? nullptr : g.find_value(n));
    for (const std::string& n : outputs) outs.push_back(g.add_value(n));
    ir::Node* node = g.add_node(op, ins, outs, "n" + std::to_string(g.node_count()), domain);
    for (Attribute& a : attrs) node->set_attribute(std::move(a));
    if (graph_outputs)
      for (ir::Value* v : outs) g.add_output(v);
  }
  // A name not used yet, for a case's values.
  std::string name(const std::string& base) { return "c" + std::to_string(counter_++) + "_" + base; }

  std::vector<Tensor> run_engine(int threads = 2) {
    engine::SessionOptions options;
    options.threads = threads;
    engine::Session session(model_, options);
    return session.run(feeds_);
  }

  // Runs both and expects bit-identical outputs. Returns false (after a GTEST_SKIP message
  // from the caller's check) when ORT is unavailable.
  void expect_same_as_ort(const std::string& label) {
    std::vector<Tensor> ours = run_engine();
    const auto& outs = model_.graph->outputs();
    ASSERT_EQ(ours.size(), outs.size());
    // ORT wants typed graph outputs: take the engine's types.
    for (size_t i = 0; i < outs.size(); ++i) outs[i]->type = ir::ValueType::tensor(ours[i].dtype());
    fs::path dir = fs::temp_directory_path() / ("onnxptq_quantize_" + std::to_string(getpid()) + "_" + label);
    fs::remove_all(dir);
    fs::create_directories(dir);
    ir::save_model(model_, dir / "model.onnx");
    std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " +
                          (dir / "model.onnx").string() + " --threads 2 --outputs " + (dir / "out").string() + " >/dev/null";
    if (!feeds_.empty()) command += " --inputs";
    for (const auto& [name, t] : feeds_) {
      ir::save_npy(t, dir / (name + ".npy"));
      command += " " + name + "=" + (dir / (name + ".npy")).string();
    }
    {
      std::ofstream(dir / "run.sh") << command << "\n";
    }
    ASSERT_EQ(std::system(command.c_str()), 0) << "ONNX Runtime failed: see " << (dir / "run.sh").string();
    for (size_t i = 0; i < outs.size(); ++i) {
      Tensor expected = ir::load_npy(dir / "out" / (outs[i]->name() + ".npy"));
      expect_identical(expected, ours[i], label + " output " + outs[i]->name() + " (node " +
                                              outs[i]->producer()->op_type + ")");
    }
    fs::remove_all(dir);
  }

  ir::Model& model() { return model_; }
  const std::map<std::string, Tensor>& feeds() const { return feeds_; }

 private:
  static double element(const Tensor& t, int64_t i) {
    const std::byte* p = t.bytes().data();
    switch (t.dtype()) {
      case DataType::Float: return reinterpret_cast<const float*>(p)[i];
      case DataType::Float16: return ir::half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
      case DataType::Int8: return reinterpret_cast<const int8_t*>(p)[i];
      case DataType::UInt8: return reinterpret_cast<const uint8_t*>(p)[i];
      case DataType::Int16: return reinterpret_cast<const int16_t*>(p)[i];
      case DataType::UInt16: return reinterpret_cast<const uint16_t*>(p)[i];
      case DataType::Int32: return reinterpret_cast<const int32_t*>(p)[i];
      default: return NAN;
    }
  }

  static void expect_identical(const Tensor& expected, const Tensor& got, const std::string& what) {
    ASSERT_EQ(expected.dtype(), got.dtype()) << what;
    ASSERT_EQ(expected.dims(), got.dims()) << what;
    if (expected.byte_size() == got.byte_size() &&
        std::memcmp(expected.bytes().data(), got.bytes().data(), got.byte_size()) == 0)
      return;
    size_t width = std::max<size_t>(1, got.byte_size() / std::max<int64_t>(got.size(), 1));
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < got.size(); ++i)
      if (std::memcmp(expected.bytes().data() + i * width, got.bytes().data() + i * width, width) != 0) {
        if (first < 0) first = i;
        ++bad;
      }
    ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements differ; first at " << first
                  << ": ORT " << element(expected, first) << ", engine " << element(got, first);
  }

  ir::Model model_;
  std::map<std::string, Tensor> feeds_;
  int counter_ = 0;
};

bool ort_available() {
  return std::system("node --version >/dev/null 2>&1") == 0 && fs::exists(kSource / "node_modules/onnxruntime-node");
}

#define SKIP_WITHOUT_ORT()                                                                                 \
  if (!ort_available())                                                                                    \
  GTEST_SKIP() << "node or " << (kSource / "node_modules/onnxruntime-node").string()                     \
               << " is missing: ONNX Runtime comparisons skipped"

// Runs one node of opset `opset` (inputs fed, or constants) and returns its outputs.
std::vector<Tensor> run_at_opset(const std::string& op, const std::string& domain, int64_t opset,
                                 const std::vector<In>& inputs, std::vector<Attribute> attrs = {}, size_t outputs = 1,
                                 int threads = 2) {
  CaseModel m(opset, 10, domain == "com.microsoft");
  std::vector<std::string> names, outs;
  for (const In& in : inputs) {
    if (in.name.empty()) names.push_back("");
    else names.push_back(in.constant ? m.constant(in.name, in.value) : m.feed(in.name, in.value));
  }
  for (size_t i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  m.node(op, domain, names, outs, std::move(attrs));
  return m.run_engine(threads);
}

using testing::error_of;

// ---------------------------------------------------------------------------------------------
// The arithmetic (closed forms)

TEST(QuantizeMath, RoundsHalfToEvenAndSaturates) {
  EXPECT_EQ(quantize_value<int8_t>(2.5f, 1.0f, 0), 2);
  EXPECT_EQ(quantize_value<int8_t>(3.5f, 1.0f, 0), 4);
  EXPECT_EQ(quantize_value<int8_t>(-2.5f, 1.0f, 0), -2);
  EXPECT_EQ(quantize_value<int8_t>(-0.5f, 1.0f, 0), 0);
  EXPECT_EQ(quantize_value<int8_t>(0.25f, 0.5f, 0), 0);   // 0.5 -> 0
  EXPECT_EQ(quantize_value<int8_t>(0.75f, 0.5f, 0), 2);   // 1.5 -> 2
  EXPECT_EQ(quantize_value<uint8_t>(1.25f, 0.5f, 7), 9);  // 2.5 -> 2, + 7
  EXPECT_EQ(quantize_value<int8_t>(1000.0f, 1.0f, 0), 127);
  EXPECT_EQ(quantize_value<int8_t>(-1000.0f, 1.0f, 0), -128);
  EXPECT_EQ(quantize_value<uint8_t>(-100.0f, 1.0f, 10), 0);
  EXPECT_EQ(quantize_value<uint8_t>(250.0f, 1.0f, 10), 255);
  EXPECT_EQ(quantize_value<int16_t>(40000.0f, 1.0f, 0), 32767);
  EXPECT_EQ(quantize_value<uint16_t>(65535.4f, 1.0f, 0), 65535);
  EXPECT_EQ(quantize_value<uint16_t>(1.5f, 1.0f, 60000), 60002);
  EXPECT_EQ(quantize_value<int32_t>(3e9f, 1.0f, 0), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(quantize_value<int32_t>(-3e9f, 1.0f, 5), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(quantize_value<int32_t>(2.5f, 1.0f, 0), 2);
  EXPECT_EQ(quantize_value<int32_t>(1e9f, 1.0f, 100), 1000000100);
}

TEST(QuantizeMath, NaNAndInfinities) {
  // ONNX Runtime (MLAS) maps NaN to the lowest value; infinities saturate.
  EXPECT_EQ(quantize_value<int8_t>(kNaN, 1.0f, 0), -128);
  EXPECT_EQ(quantize_value<uint8_t>(kNaN, 1.0f, 100), 0);
  EXPECT_EQ(quantize_value<int16_t>(kNaN, 0.5f, 3), -32768);
  EXPECT_EQ(quantize_value<int32_t>(kNaN, 1.0f, 0), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(quantize_value<int8_t>(kInf, 1.0f, 0), 127);
  EXPECT_EQ(quantize_value<int8_t>(-kInf, 1.0f, 0), -128);
  EXPECT_EQ(quantize_value<uint8_t>(1.0f, 0.0f, 3), 255);  // 1 / 0 = inf
}

TEST(QuantizeMath, DividesByTheScale) {
  // float(24.55) / 0.1f is 245.499985 (rounds to 245); times float(1 / 0.1f) it is 245.5 (246).
  EXPECT_EQ(quantize_value<uint8_t>(24.55f, 0.1f, 0), 245);
  EXPECT_EQ(quantize_value<int16_t>(-25.55f, 0.1f, 0), -255);
}

TEST(QuantizeMath, RequantizeAndDequantize) {
  EXPECT_EQ(qmath::requantize_value<uint8_t>(100, 0.5f, 3), 53);
  EXPECT_EQ(qmath::requantize_value<uint8_t>(5, 0.5f, 3), 5);  // 2.5 -> 2
  EXPECT_EQ(qmath::requantize_value<uint8_t>(7, 0.5f, 3), 7);  // 3.5 -> 4
  EXPECT_EQ(qmath::requantize_value<int8_t>(-1000, 1.0f, 0), -128);
  EXPECT_EQ(qmath::dequantize_value<uint8_t>(200, 0.5f, 100), 50.0f);
  EXPECT_EQ(qmath::dequantize_value<int8_t>(-128, 0.25f, 127), -63.75f);
  std::vector<int32_t> q{std::numeric_limits<int32_t>::min(), 0};
  std::vector<float> y(2);
  qmath::dequantize_values(q.data(), 2, 1.0f, 1, y.data());  // the difference leaves int32
  EXPECT_EQ(y[0], -2147483649.0f);
  EXPECT_EQ(y[1], -1.0f);
}

// The SSE2 bulk loops against the scalar functions (themselves checked by the closed forms
// above), over values that hit every branch: NaN, infinities, huge values, ties, odd tails.
template <class T>
void expect_bulk_matches_scalar(std::mt19937& rng) {
  std::vector<float> x{kNaN, kInf, -kInf, 1e30f, -1e30f, 0.5f, 1.5f, -2.5f, 24.55f};
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f), small(-300.0f, 300.0f);
  while (x.size() < 1001) x.push_back(x.size() % 2 ? d(rng) : small(rng));
  for (float scale : {1.0f, 0.37f, 0.0123f}) {
    for (int32_t zp : {0, static_cast<int32_t>(std::numeric_limits<T>::max() / 3)}) {
      std::vector<T> q(x.size());
      qmath::quantize_values<T>(x.data(), x.size(), scale, zp, q.data());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(q[i], quantize_value<T>(x[i], scale, zp)) << i << " " << x[i];
      std::vector<float> y(x.size());
      qmath::dequantize_values<T>(q.data(), q.size(), scale, zp, y.data());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], qmath::dequantize_value<T>(q[i], scale, zp)) << i;
      std::vector<int32_t> acc(x.size());
      for (size_t i = 0; i < x.size(); ++i) acc[i] = static_cast<int32_t>(std::isfinite(x[i]) ? x[i] * 1000.0f : 7);
      qmath::requantize_values<T>(acc.data(), acc.size(), -5, scale * 0.01f, zp, q.data());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(q[i], qmath::requantize_value<T>(static_cast<int32_t>(static_cast<uint32_t>(acc[i]) - 5u),
                                                   scale * 0.01f, zp))
            << i;  // acc - 5, wrapping around as int32 additions do
    }
  }
}

TEST(QuantizeMath, BulkLoopsMatchTheScalarFunctions) {
  std::mt19937 rng(9);
  expect_bulk_matches_scalar<int8_t>(rng);
  expect_bulk_matches_scalar<uint8_t>(rng);
  expect_bulk_matches_scalar<int16_t>(rng);
  expect_bulk_matches_scalar<uint16_t>(rng);
  expect_bulk_matches_scalar<int32_t>(rng);
}

TEST(QuantizeMath, NarrowRangeAndFakeQuantization) {
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<float>(i) - 18.0f) * 9.25f;  // -166.5 .. 166.5
  std::vector<int8_t> q(x.size());
  qmath::quantize_values<int8_t>(x.data(), x.size(), 1.0f, 0, q.data(), {-127, 127});
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(q[i], std::clamp(std::nearbyint(static_cast<double>(x[i])), -127.0, 127.0)) << i;
  std::vector<float> y(x.size());
  qmath::fake_quantize_values<uint8_t>(x.data(), x.size(), 0.5f, 100, y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    double qd = std::clamp(std::nearbyint(static_cast<double>(x[i]) / 0.5) + 100, 0.0, 255.0);
    EXPECT_EQ(y[i], static_cast<float>((qd - 100) * 0.5)) << i;
  }
  qmath::fake_quantize_values<int8_t>(x.data(), x.size(), 16.0f, 0, y.data(), qmath::kInt4Range);
  EXPECT_EQ(y[0], -128.0f);  // -166.5 / 16 -> -10 -> saturates to -8
  EXPECT_EQ(y[36], 112.0f);  // 166.5 / 16 -> 10 -> 7
  EXPECT_EQ(y[18], 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Q/DQ kernels (closed forms)

TEST(QuantizeLinear, PerTensorWithTiesNaNAndSaturation) {
  Tensor x = make<float>({9}, {0.0f, 1.0f, 3.0f, -1.0f, 1000.0f, -1000.0f, kNaN, kInf, 24.55f});
  auto y = run_at_opset("QuantizeLinear", "", 13, {{"x", x}, {"s", scalar(2.0f)}, {"z", scalar_of<uint8_t>(10)}});
  std::vector<uint8_t> want{10, 10, 12, 10, 255, 0, 0, 255, 22};  // 0.5 -> 0, 1.5 -> 2, -0.5 -> 0
  auto got = y[0].values<uint8_t>();
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), want);
}

TEST(QuantizeLinear, ZeroPointOmittedMeansUint8) {
  auto y =
      run_at_opset("QuantizeLinear", "", 13, {{"x", make<float>({3}, {-1.0f, 1.0f, 600.0f})}, {"s", scalar(2.0f)}});
  EXPECT_EQ(y[0].dtype(), DataType::UInt8);
  EXPECT_EQ(y[0].values<uint8_t>()[0], 0);
  EXPECT_EQ(y[0].values<uint8_t>()[1], 0);  // 0.5 -> 0
  EXPECT_EQ(y[0].values<uint8_t>()[2], 255);
}

TEST(QuantizeLinear, OutputDtypeAttributeAtOpset21) {
  auto y = run_at_opset("QuantizeLinear", "", 21, {{"x", make<float>({2}, {-70000.0f, 3.0f})}, {"s", scalar(1.0f)}},
                        attrs(Attribute::of_int("output_dtype", static_cast<int64_t>(DataType::Int16))));
  ASSERT_EQ(y[0].dtype(), DataType::Int16);
  EXPECT_EQ(y[0].values<int16_t>()[0], -32768);
  EXPECT_EQ(y[0].values<int16_t>()[1], 3);
}

TEST(QuantizeLinear, PerAxisNegativeAxisOddSizes) {
  // x [2, 13, 3], axis -2: scale per middle index.
  std::vector<float> xs(2 * 13 * 3), scales(13);
  std::vector<int8_t> zps(13);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.37f - 20.0f;
  for (int c = 0; c < 13; ++c) {
    scales[c] = 0.05f + 0.01f * c;
    zps[c] = static_cast<int8_t>(c - 6);
  }
  auto y = run_at_opset(
      "QuantizeLinear", "", 13,
      {{"x", make<float>({2, 13, 3}, xs)}, {"s", make<float>({13}, scales)}, {"z", make<int8_t>({13}, zps)}},
      attrs(Attribute::of_int("axis", -2)));
  auto got = y[0].values<int8_t>();
  for (int64_t i = 0; i < 78; ++i) {
    int64_t c = (i / 3) % 13;
    double q = std::nearbyint(static_cast<double>(xs[i] / scales[c])) + zps[c];
    EXPECT_EQ(got[i], static_cast<int8_t>(std::clamp(q, -128.0, 127.0))) << i;
  }
}

TEST(QuantizeLinear, Int4PackingAndBack) {
  Tensor x = make<float>({5}, {1.0f, -2.0f, 7.0f, -8.0f, 9.0f});
  CaseModel m(21, 10, false);
  m.feed("x", x);
  m.constant("s", scalar(1.0f));
  m.constant("z", Tensor(DataType::Int4, {}));
  m.node("QuantizeLinear", "", {"x", "s", "z"}, {"q"});
  m.node("DequantizeLinear", "", {"q", "s", "z"}, {"y"});
  auto out = m.run_engine();
  ASSERT_EQ(out[0].dtype(), DataType::Int4);
  ASSERT_EQ(out[0].byte_size(), 3u);
  const auto* b = reinterpret_cast<const uint8_t*>(out[0].bytes().data());
  EXPECT_EQ(b[0], 0xE1);  // 1 in the low nibble, -2 (0xE) in the high one
  EXPECT_EQ(b[1], 0x87);  // 7, -8
  EXPECT_EQ(b[2], 0x07);  // 9 saturates to 7
  auto y = out[1].values<float>();
  EXPECT_EQ(std::vector<float>(y.begin(), y.end()), (std::vector<float>{1, -2, 7, -8, 7}));
}

TEST(QuantizeLinear, BlockedScales) {
  // x [2, 5] blocked along axis 1 by 2: scale [2, 3].
  Tensor x = make<float>({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor s = make<float>({2, 3}, {1, 2, 4, 1, 0.5f, 0.25f});
  Tensor z = make<int8_t>({2, 3}, {0, 1, -1, 0, 0, 10});
  auto y = run_at_opset("QuantizeLinear", "", 21, {{"x", x}, {"s", s}, {"z", z}},
                        attrs(Attribute::of_int("axis", 1), Attribute::of_int("block_size", 2)));
  auto q = y[0].values<int8_t>();
  // Row 0: 1/1, 2/1, 3/2+1, 4/2+1, 5/4-1; row 1: 6/1, 7/1, 8/0.5, 9/0.5, 10/0.25+10
  EXPECT_EQ(std::vector<int8_t>(q.begin(), q.end()), (std::vector<int8_t>{1, 2, 3, 3, 0, 6, 7, 16, 18, 50}));
  auto d = run_at_opset("DequantizeLinear", "", 21, {{"q", y[0]}, {"s", s}, {"z", z}},
                        attrs(Attribute::of_int("axis", 1), Attribute::of_int("block_size", 2)));
  auto f = d[0].values<float>();
  EXPECT_EQ(std::vector<float>(f.begin(), f.end()), (std::vector<float>{1, 2, 4, 4, 4, 6, 7, 8, 9, 10}));
}

TEST(QuantizeLinear, EmptyTensors) {
  auto y = run_at_opset("QuantizeLinear", "", 13,
                        {{"x", Tensor(DataType::Float, {0, 3})}, {"s", scalar(1.0f)}, {"z", scalar_of<int8_t>(0)}});
  EXPECT_EQ(y[0].dims(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(y[0].dtype(), DataType::Int8);
  auto d = run_at_opset(
      "DequantizeLinear", "", 13,
      {{"x", Tensor(DataType::UInt8, {2, 0})}, {"s", make<float>({2}, {1, 2})}, {"z", Tensor(DataType::UInt8, {2})}},
      attrs(Attribute::of_int("axis", 0)));
  EXPECT_EQ(d[0].dims(), (std::vector<int64_t>{2, 0}));
}

TEST(QuantizeLinear, LargeTensorSameWithOneOrTwoThreads) {
  std::mt19937 rng(3);
  Tensor x = uniform_floats({3, 70001}, rng, -30.0f, 30.0f);
  std::vector<In> in{{"x", x}, {"s", scalar(0.117f)}, {"z", scalar_of<int8_t>(-3)}};
  auto one = run_at_opset("QuantizeLinear", "", 13, in, {}, 1, 1);
  auto two = run_at_opset("QuantizeLinear", "", 13, in, {}, 1, 2);
  ASSERT_EQ(one[0].byte_size(), two[0].byte_size());
  EXPECT_EQ(std::memcmp(one[0].bytes().data(), two[0].bytes().data(), one[0].byte_size()), 0);
  auto xs = x.values<float>();
  auto q = one[0].values<int8_t>();
  for (int64_t i = 0; i < x.size(); i += 997)
    EXPECT_EQ(q[i], std::clamp(std::nearbyint(xs[i] / 0.117f) - 3.0f, -128.0f, 127.0f)) << i;
}

TEST(DequantizeLinear, Int32AndFloat16Scale) {
  auto y =
      run_at_opset("DequantizeLinear", "", 13, {{"x", make<int32_t>({3}, {-2000000000, 0, 7})}, {"s", scalar(0.5f)}});
  EXPECT_EQ(y[0].values<float>()[0], -1e9f);
  EXPECT_EQ(y[0].values<float>()[2], 3.5f);
  Tensor s16 = make<uint16_t>({}, {ir::float_to_half(0.5f)});
  Tensor s = Tensor(DataType::Float16, {}, ir::Bytes::copy_of(s16.bytes().data(), 2));
  auto h = run_at_opset("DequantizeLinear", "", 19,
                        {{"x", make<uint8_t>({2}, {3, 255})}, {"s", s}, {"z", scalar_of<uint8_t>(1)}});
  ASSERT_EQ(h[0].dtype(), DataType::Float16);
  EXPECT_EQ(ir::half_to_float(h[0].values<uint16_t>()[0]), 1.0f);
  EXPECT_EQ(ir::half_to_float(h[0].values<uint16_t>()[1]), 127.0f);
}

TEST(DynamicQuantizeLinear, AllZerosGetScaleOne) {
  auto y = run_at_opset("DynamicQuantizeLinear", "", 11, {{"x", make<float>({4}, {0, 0, 0, 0})}}, {}, 3);
  EXPECT_EQ(y[1].values<float>()[0], 1.0f);
  EXPECT_EQ(y[2].values<uint8_t>()[0], 0);
  // Range [-1, 3]: scale 4/255, zp = round(255/4) = round(63.75) = 64.
  auto z = run_at_opset("DynamicQuantizeLinear", "", 11, {{"x", make<float>({3}, {-1.0f, 3.0f, 1.0f})}}, {}, 3);
  EXPECT_EQ(z[1].values<float>()[0], 4.0f / 255.0f);
  EXPECT_EQ(z[2].values<uint8_t>()[0], 64);
  EXPECT_EQ(z[0].values<uint8_t>()[0], 0);
  EXPECT_EQ(z[0].values<uint8_t>()[1], 255);
}

TEST(QLinearBinary, OmittedZeroPointsAndBroadcasting) {
  // Unit scales and no zero points: exact sums and products, saturated. A [2,1,3] with B [4,1].
  std::vector<int8_t> av{-100, 0, 100, 1, 2, 3}, bv{-100, 1, 50, 127};
  for (const char* op : {"QLinearAdd", "QLinearMul"}) {
    auto y = run_at_opset(op, "com.microsoft", 13,
                          {{"a", make<int8_t>({2, 1, 3}, av)},
                           {"as", scalar(1.0f)},
                           {"", Tensor()},
                           {"b", make<int8_t>({4, 1}, bv)},
                           {"bs", scalar(1.0f)},
                           {"", Tensor()},
                           {"cs", scalar(1.0f)}});
    ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{2, 4, 3}));
    auto got = y[0].values<int8_t>();
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k) {
          int x = av[i * 3 + k], z = bv[j];
          int want = std::string(op) == "QLinearAdd" ? x + z : x * z;
          EXPECT_EQ(got[(i * 4 + j) * 3 + k], std::clamp(want, -128, 127)) << op << " " << i << j << k;
        }
  }
}

TEST(QuantizeErrors, BadAttributesAndShapes) {
  auto x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_NE(error_of([&] {
              run_at_opset("QuantizeLinear", "", 21, {{"x", x}, {"s", scalar(1.0f)}},
                           attrs(Attribute::of_int("block_size", -1)));
            }).find("block_size must not be negative, got -1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QuantizeLinear", "", 21, {{"x", x}, {"s", scalar(1.0f)}},
                           attrs(Attribute::of_int("output_dtype", 1)));
            }).find("cannot quantize to float"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QuantizeLinear", "", 21, {{"x", x}, {"s", scalar(1.0f)}},
                           attrs(Attribute::of_int("output_dtype", 17)));
            }).find("float8e4m3fn is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("DequantizeLinear", "", 13,
                           {{"x", make<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6})}, {"s", make<float>({2}, {1, 2})}});
            }).find("a per-axis scale must be 1-D with 3 values"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("DequantizeLinear", "", 13,
                           {{"x", make<uint8_t>({2}, {1, 2})}, {"s", scalar(1.0f)}, {"z", scalar_of<int8_t>(0)}});
            }).find("the zero point has type int8, the input uint8"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QuantizeLinear", "", 13, {{"x", x}, {"s", make<float>({3}, {1, 1, 1})}},
                           attrs(Attribute::of_int("axis", 2)));
            }).find("axis"),
            std::string::npos);
  Tensor w = make<int8_t>({1, 1, 1, 1}, {1});
  EXPECT_NE(error_of([&] {
              run_at_opset("QLinearConv", "", 10,
                           {{"x", make<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4})},
                            {"xs", scalar(1.0f)},
                            {"xz", scalar_of<uint8_t>(0)},
                            {"w", w},
                            {"ws", scalar(1.0f)},
                            {"wz", scalar_of<int8_t>(0)},
                            {"ys", scalar(1.0f)},
                            {"yz", scalar_of<uint8_t>(0)}},
                           attrs(Attribute::of_int("group", 0)));
            }).find("group must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QLinearAveragePool", "com.microsoft", 13,
                           {{"x", make<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4})},
                            {"xs", scalar(1.0f)},
                            {"xz", scalar_of<uint8_t>(0)},
                            {"ys", scalar(1.0f)},
                            {"yz", scalar_of<uint8_t>(0)}});
            }).find("kernel_shape is required"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QLinearConcat", "com.microsoft", 13,
                           {{"ys", scalar(1.0f)},
                            {"yz", scalar_of<uint8_t>(0)},
                            {"a", make<uint8_t>({1}, {1})},
                            {"as", scalar(1.0f)},
                            {"az", scalar_of<uint8_t>(0)}});
            }).find("the axis attribute is required"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QLinearAdd", "com.microsoft", 13,
                           {{"a", make<uint8_t>({2}, {1, 2})},
                            {"as", scalar(1.0f)},
                            {"az", scalar_of<uint8_t>(0)},
                            {"b", make<uint8_t>({3}, {1, 2, 3})},
                            {"bs", scalar(1.0f)},
                            {"bz", scalar_of<uint8_t>(0)},
                            {"cs", scalar(1.0f)},
                            {"cz", scalar_of<uint8_t>(0)}});
            }).find("cannot be broadcast"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QLinearConv", "", 10,
                           {{"x", make<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4})},
                            {"xs", scalar(1.0f)},
                            {"xz", scalar_of<uint8_t>(0)},
                            {"w", w},
                            {"ws", scalar(1.0f)},
                            {"wz", scalar_of<int8_t>(0)}});
            }).find("input 6 (y_scale) is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset("QLinearConv", "", 10,
                           {{"x", make<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4})},
                            {"xs", scalar(1.0f)},
                            {"xz", scalar_of<uint8_t>(0)},
                            {"w", w},
                            {"ws", make<float>({2}, {1, 1})},
                            {"wz", scalar_of<int8_t>(0)},
                            {"ys", scalar(1.0f)},
                            {"yz", scalar_of<uint8_t>(0)}});
            }).find("w_scale has 2 values, expected 1 or 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run_at_opset(
                  "MatMulInteger", "", 10,
                  {{"a", make<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", make<uint8_t>({2, 2}, {1, 2, 3, 4})}});
            }).find("cannot be multiplied"),
            std::string::npos);
}


// ---------------------------------------------------------------------------------------------
// ONNX Runtime as the oracle: the com.microsoft ops

// Scale and zero point inputs of one operand, fed or constant.
struct QArgs {
  std::string scale, zp;
};
template <class T>
QArgs qargs(CaseModel& m, const std::string& base, float scale, std::mt19937& rng, bool with_zp, bool constant) {
  auto add = [&](const std::string& n, Tensor t) { return constant ? m.constant(m.name(n), t) : m.feed(m.name(n), t); };
  QArgs q;
  q.scale = add(base + "_scale", scalar(scale));
  if (with_zp) q.zp = add(base + "_zp", scalar_of<T>(random_zp<T>(rng)));
  return q;
}

template <class T>
void add_binary_case(CaseModel& m, const std::string& op, std::vector<int64_t> ad, std::vector<int64_t> bd,
                     std::mt19937& rng, bool with_zp = true, bool constant = false) {
  std::string a = m.feed(m.name("a"), random_ints<T>(ad, rng));
  std::string b = m.feed(m.name("b"), random_ints<T>(bd, rng));
  float sa = random_scale(rng), sb = random_scale(rng);
  float sc = op == "QLinearAdd" ? (sa + sb) * std::uniform_real_distribution<float>(0.4f, 1.5f)(rng)
                                : sa * sb * std::uniform_real_distribution<float>(30.0f, 150.0f)(rng);
  QArgs qa = qargs<T>(m, "a", sa, rng, with_zp, constant), qb = qargs<T>(m, "b", sb, rng, with_zp, constant),
        qc = qargs<T>(m, "c", sc, rng, with_zp, constant);
  m.node(op, "com.microsoft", {a, qa.scale, qa.zp, b, qb.scale, qb.zp, qc.scale, qc.zp}, {m.name("y")});
}

// QLinearAdd and QLinearMul parameters (uint8) under which the orders of float operations ORT
// could use disagree on at least one of the 65536 input pairs (found by a search over random
// parameters). For Add: the fixed part with or without FMA, the span kernel with or without FMA,
// dequantize-add-requantize, an unfused scalar span; for Mul: an FMA, dequantize-multiply-
// requantize, the ratio s_a * (s_b / s_c). Run over every pair, they pin the exact order down.
struct AddParams {
  float sa, sb, sc;
  int za, zb, zc;
};
const AddParams kAddTies[] = {
    {0x1.74f098p-3f, 0x1.1d8752p-3f, 0x1.a1f214p-3f, 88, 115, 237},
    {0x1.7db42cp-3f, 0x1.ba4c9p-5f, 0x1.a4c9fep-4f, 192, 153, 65},
    {0x1.856098p-3f, 0x1.5d4ca4p-3f, 0x1.e29a1cp-3f, 44, 140, 202},
    {0x1.0eac94p-3f, 0x1.daf5bep-5f, 0x1.3a6856p-3f, 235, 117, 110},
    {0x1.4db39ep-3f, 0x1.88ccd4p-4f, 0x1.cd70c2p-3f, 241, 153, 188},
};
const AddParams kMulTies[] = {
    {0x1.94322cp-3f, 0x1.176542p-3f, 0x1.e6656p+0f, 124, 61, 109},
    {0x1.2d5ba8p-4f, 0x1.31c0b8p-3f, 0x1.1aa4c2p-1f, 67, 111, 250},
    {0x1.1294bcp-3f, 0x1.fd90dep-4f, 0x1.03ed46p+1f, 36, 210, 177},
    {0x1.ee18a4p-8f, 0x1.221208p-5f, 0x1.d7b674p-6f, 141, 71, 96},
    {0x1.b66288p-4f, 0x1.28086ep-3f, 0x1.664602p+0f, 207, 81, 46},
};

void add_every_pair_cases(CaseModel& m, const std::string& op, std::span<const AddParams> params) {
  std::vector<uint8_t> rows(256 * 256), cols(256 * 256), col(256);
  for (int i = 0; i < 256 * 256; ++i) {
    rows[i] = static_cast<uint8_t>(i / 256);
    cols[i] = static_cast<uint8_t>(i % 256);
  }
  for (int i = 0; i < 256; ++i) col[i] = static_cast<uint8_t>(i);
  std::string r = m.feed("pairs_rows", make<uint8_t>({256, 256}, rows));
  std::string c = m.feed("pairs_cols", make<uint8_t>({256, 256}, cols));
  std::string v = m.feed("pairs_column", make<uint8_t>({256, 1}, col));
  for (const AddParams& p : params) {
    auto param = [&](const std::string& base, Tensor t) { return m.constant(m.name(base), std::move(t)); };
    std::string sa = param("sa", scalar(p.sa)), sb = param("sb", scalar(p.sb)), sc = param("sc", scalar(p.sc));
    std::string za = param("za", scalar_of<uint8_t>(p.za)), zb = param("zb", scalar_of<uint8_t>(p.zb)),
                zc = param("zc", scalar_of<uint8_t>(p.zc));
    m.node(op, "com.microsoft", {c, sa, za, r, sb, zb, sc, zc}, {m.name("both")});
    m.node(op, "com.microsoft", {c, sa, za, v, sb, zb, sc, zc}, {m.name("scalar_b")});
    m.node(op, "com.microsoft", {v, sb, zb, c, sa, za, sc, zc}, {m.name("scalar_a")});
  }
}

template <class T>
void add_binary_cases(CaseModel& m, const std::string& op, std::mt19937& rng) {
  add_binary_case<T>(m, op, {2, 3, 17, 13}, {2, 3, 17, 13}, rng);
  add_binary_case<T>(m, op, {2, 3, 5, 7}, {1, 3, 1, 1}, rng);   // B constant along the span
  add_binary_case<T>(m, op, {3, 1, 1}, {2, 3, 5, 7}, rng);      // A constant along the span
  add_binary_case<T>(m, op, {1, 40}, {37, 1}, rng);
  add_binary_case<T>(m, op, {4, 1, 6}, {5, 1}, rng);
  add_binary_case<T>(m, op, {129}, {}, rng);                    // B a scalar
  add_binary_case<T>(m, op, {1}, {3, 33}, rng);                 // A one element
  add_binary_case<T>(m, op, {5, 1}, {5, 1}, rng);
  add_binary_case<T>(m, op, {3, 20}, {3, 1}, rng, true, true);  // constant parameters
  add_binary_case<T>(m, op, {0, 4}, {1, 4}, rng);               // empty
  // Many parameter draws: the order of float operations must match ORT's exactly.
  for (int i = 0; i < 24; ++i) add_binary_case<T>(m, op, {256}, {256}, rng);
  for (int i = 0; i < 12; ++i) add_binary_case<T>(m, op, {2, 2, 64}, {2, 1}, rng);
  for (int i = 0; i < 12; ++i) add_binary_case<T>(m, op, {2, 1}, {2, 64}, rng);
}

template <class T>
void add_concat_cases(CaseModel& m, std::mt19937& rng) {
  auto concat = [&](std::vector<std::vector<int64_t>> shapes, int64_t axis, int same_as_output) {
    float sy = random_scale(rng);
    QArgs qy = qargs<T>(m, "y", sy, rng, true, false);
    std::vector<std::string> ins{qy.scale, qy.zp};
    for (size_t i = 0; i < shapes.size(); ++i) {
      ins.push_back(m.feed(m.name("x"), random_ints<T>(shapes[i], rng)));
      if (static_cast<int>(i) == same_as_output) {
        ins.push_back(qy.scale);
        ins.push_back(qy.zp);
      } else {
        QArgs q = qargs<T>(m, "x", random_scale(rng), rng, true, i % 2 == 1);
        ins.push_back(q.scale);
        ins.push_back(q.zp);
      }
    }
    m.node("QLinearConcat", "com.microsoft", ins, {m.name("y")}, attrs(Attribute::of_int("axis", axis)));
  };
  concat({{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, 1, 1);
  concat({{3, 2}, {3, 7}}, -1, -1);
  concat({{4, 3}, {1, 3}, {2, 3}}, 0, 0);
}

template <class T>
void add_pool_cases(CaseModel& m, std::mt19937& rng) {
  auto global = [&](std::vector<int64_t> dims, int64_t channels_last) {
    float sx = random_scale(rng);
    QArgs qx = qargs<T>(m, "x", sx, rng, true, false);
    QArgs qy = qargs<T>(m, "y", sx * std::uniform_real_distribution<float>(0.3f, 2.0f)(rng), rng, true, false);
    std::string x = m.feed(m.name("x"), random_ints<T>(dims, rng));
    m.node("QLinearGlobalAveragePool", "com.microsoft", {x, qx.scale, qx.zp, qy.scale, qy.zp}, {m.name("y")},
           attrs(Attribute::of_int("channels_last", channels_last)));
  };
  global({2, 5, 7, 7}, 0);
  global({2, 6, 5, 3}, 1);
  global({1, 3, 13}, 0);
  global({3, 1, 4, 9}, 1);

  auto average = [&](std::vector<int64_t> dims, std::vector<Attribute> a) {
    float sx = random_scale(rng);
    QArgs qx = qargs<T>(m, "x", sx, rng, true, false);
    QArgs qy = qargs<T>(m, "y", sx * std::uniform_real_distribution<float>(0.3f, 2.0f)(rng), rng, true, true);
    std::string x = m.feed(m.name("x"), random_ints<T>(dims, rng));
    m.node("QLinearAveragePool", "com.microsoft", {x, qx.scale, qx.zp, qy.scale, qy.zp}, {m.name("y")}, std::move(a));
  };
  auto ints = [](const char* n, std::vector<int64_t> v) { return Attribute::of_ints(n, std::move(v)); };
  average({2, 3, 9, 11}, attrs(ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})));
  average({2, 3, 9, 11}, attrs(ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}),
                               Attribute::of_int("count_include_pad", 1)));
  average({2, 3, 9, 11}, attrs(ints("kernel_shape", {2, 2}), ints("strides", {2, 2}), Attribute::of_int("ceil_mode", 1)));
  average({1, 2, 9, 10}, attrs(ints("kernel_shape", {3, 2}), ints("strides", {2, 1}),
                               Attribute::of_string("auto_pad", "SAME_UPPER")));
  average({2, 3, 17}, attrs(ints("kernel_shape", {4}), ints("strides", {3})));
  average({2, 9, 11, 3}, attrs(ints("kernel_shape", {3, 3}), ints("pads", {0, 1, 2, 1}),
                               Attribute::of_int("channels_last", 1)));
  average({2, 3, 9, 11}, attrs(ints("kernel_shape", {9, 11})));  // the global fallback
  average({1, 2, 5, 6, 7}, attrs(ints("kernel_shape", {2, 3, 2}), ints("strides", {1, 2, 2})));
}

template <class T>
void add_lookup_cases(CaseModel& m, std::mt19937& rng) {
  std::vector<T> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<T>(i);
  for (int i = 0; i < 4; ++i) {
    for (const char* op : {"QLinearSigmoid", "QLinearLeakyRelu"}) {
      std::string x = m.feed(m.name("x"), make<T>({16, 16}, all));
      float sx = std::uniform_real_distribution<float>(0.01f, 0.12f)(rng);
      QArgs qx = qargs<T>(m, "x", sx, rng, true, i == 1);
      // Sigmoid outputs in [0, 1]: the usual 1/256 scale, or a random one.
      float sy = std::string(op) == "QLinearSigmoid" ? (i == 0 ? 1.0f / 256.0f : 0.004f + 0.001f * i) : sx;
      QArgs qy = qargs<T>(m, "y", sy, rng, i != 3, i == 1);
      std::vector<Attribute> a;
      if (std::string(op) == "QLinearLeakyRelu" && i != 2) a = attrs(Attribute::of_float("alpha", 0.1f + 0.05f * i));
      m.node(op, "com.microsoft", {x, qx.scale, qx.zp, qy.scale, qy.zp}, {m.name("y")}, std::move(a));
    }
  }
}

// QLinearSigmoid parameters (uint8: x_scale, x_zp, y_scale, y_zp) under which MLAS's logistic
// approximation (FMA kernel) and the exact sigmoid, or the approximation without FMA, round one
// table entry differently (found by a search).
struct SigmoidParams {
  float sx;
  int zx;
  float sy;
  int zy;
};
const SigmoidParams kSigmoidTies[] = {
    {0x1.604858p-6f, 89, 0x1.a154f8p-9f, 14},
    {0x1.bfff0ap-4f, 225, 0x1.afe2b6p-9f, 6},
    {0x1.54a206p-4f, 93, 0x1.38c2ecp-8f, 26},
};

// Average pool parameters (uint8: x_scale, x_zp, y_scale, y_zp) under which ORT's float average
// (dequantize, sum, divide, y = round(avg / y_scale + y_zp)) rounds some pair differently from
// round(avg / y_scale) + y_zp and from the integer sum of the global average (found by a search).
const SigmoidParams kPoolTies[] = {
    {0x1.349f3ep-3f, 86, 0x1.bd624ap-5f, 153},
    {0x1.61f086p-3f, 186, 0x1.6eabd2p-3f, 97},
};

// Every pair of uint8 values averaged: by QLinearAveragePool (1-D, kernel 2, stride 2) and by
// QLinearGlobalAveragePool (one channel per pair).
void add_pool_tie_cases(CaseModel& m) {
  std::vector<uint8_t> pairs(2 * 65536);
  for (int i = 0; i < 65536; ++i) {
    pairs[2 * i] = static_cast<uint8_t>(i / 256);
    pairs[2 * i + 1] = static_cast<uint8_t>(i % 256);
  }
  std::string line = m.feed("pairs_line", make<uint8_t>({1, 1, 2 * 65536}, pairs));
  std::string channels = m.feed("pairs_channels", make<uint8_t>({1, 65536, 2}, pairs));
  for (const SigmoidParams& p : kPoolTies) {
    std::vector<std::string> q{m.constant(m.name("sx"), scalar(p.sx)), m.constant(m.name("zx"), scalar_of<uint8_t>(p.zx)),
                               m.constant(m.name("sy"), scalar(p.sy)), m.constant(m.name("zy"), scalar_of<uint8_t>(p.zy))};
    m.node("QLinearAveragePool", "com.microsoft", {line, q[0], q[1], q[2], q[3]}, {m.name("avg")},
           attrs(Attribute::of_ints("kernel_shape", {2}), Attribute::of_ints("strides", {2})));
    m.node("QLinearGlobalAveragePool", "com.microsoft", {channels, q[0], q[1], q[2], q[3]}, {m.name("global")});
  }
}

void add_sigmoid_tie_cases(CaseModel& m) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  std::string x = m.feed("every_byte", make<uint8_t>({256}, all));
  for (const SigmoidParams& p : kSigmoidTies) {
    m.node("QLinearSigmoid", "com.microsoft",
           {x, m.constant(m.name("sx"), scalar(p.sx)), m.constant(m.name("zx"), scalar_of<uint8_t>(p.zx)),
            m.constant(m.name("sy"), scalar(p.sy)), m.constant(m.name("zy"), scalar_of<uint8_t>(p.zy))},
           {m.name("y")});
  }
}

// com.microsoft QuantizeLinear / DequantizeLinear: 16-bit types with an opset-13 model.
template <class T>
void add_contrib_qdq_cases(CaseModel& m, std::mt19937& rng) {
  Tensor x = uniform_floats({2, 3, 11}, rng, -300.0f, 300.0f);
  std::string xn = m.feed(m.name("x"), x);
  std::string s = m.feed(m.name("s"), scalar(0.0123f));
  std::string z = m.feed(m.name("z"), scalar_of<T>(random_zp<T>(rng) / 2));
  std::string q = m.name("q");
  m.node("QuantizeLinear", "com.microsoft", {xn, s, z}, {q});
  m.node("DequantizeLinear", "com.microsoft", {q, s, z}, {m.name("y")});
  std::string sa = m.feed(m.name("s"), make<float>({11}, std::vector<float>(11, 0.0071f)));
  std::vector<T> zps(11);
  for (T& v : zps) v = random_zp<T>(rng);
  std::string za = m.constant(m.name("z"), make<T>({11}, zps));
  std::string qa = m.name("q");
  m.node("QuantizeLinear", "com.microsoft", {xn, sa, za}, {qa}, attrs(Attribute::of_int("axis", -1)));
  m.node("DequantizeLinear", "com.microsoft", {qa, sa, za}, {m.name("y")}, attrs(Attribute::of_int("axis", 2)));
}

// One model (and one ONNX Runtime run) per group of cases, so that a failure names its group.
void expect_group_same_as_ort(const std::string& label, int64_t opset, int64_t ir_version, bool contrib,
                              const std::function<void(CaseModel&, std::mt19937&)>& add_cases) {
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(label)));
  CaseModel m(opset, ir_version, contrib);
  add_cases(m, rng);
  m.expect_same_as_ort(label);
}

TEST(QuantizeOracle, QLinearAdd) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("add_u8", 13, 7, true, [](CaseModel& m, std::mt19937& rng) { add_binary_cases<uint8_t>(m, "QLinearAdd", rng); });
  expect_group_same_as_ort("add_i8", 13, 7, true, [](CaseModel& m, std::mt19937& rng) { add_binary_cases<int8_t>(m, "QLinearAdd", rng); });
  expect_group_same_as_ort("add_pairs", 13, 7, true, [](CaseModel& m, std::mt19937&) { add_every_pair_cases(m, "QLinearAdd", kAddTies); });
}

TEST(QuantizeOracle, QLinearMul) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("mul_u8", 13, 7, true, [](CaseModel& m, std::mt19937& rng) { add_binary_cases<uint8_t>(m, "QLinearMul", rng); });
  expect_group_same_as_ort("mul_i8", 13, 7, true, [](CaseModel& m, std::mt19937& rng) { add_binary_cases<int8_t>(m, "QLinearMul", rng); });
  expect_group_same_as_ort("mul_pairs", 13, 7, true, [](CaseModel& m, std::mt19937&) { add_every_pair_cases(m, "QLinearMul", kMulTies); });
}

TEST(QuantizeOracle, QLinearConcat) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("concat", 13, 7, true, [](CaseModel& m, std::mt19937& rng) {
    add_concat_cases<uint8_t>(m, rng);
    add_concat_cases<int8_t>(m, rng);
  });
}

TEST(QuantizeOracle, QLinearPools) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("pool_u8", 13, 7, true, [](CaseModel& m, std::mt19937& rng) { add_pool_cases<uint8_t>(m, rng); });
  expect_group_same_as_ort("pool_i8", 13, 7, true, [](CaseModel& m, std::mt19937& rng) { add_pool_cases<int8_t>(m, rng); });
  expect_group_same_as_ort("pool_pairs", 13, 7, true, [](CaseModel& m, std::mt19937&) { add_pool_tie_cases(m); });
}

TEST(QuantizeOracle, QLinearSigmoidAndLeakyRelu) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("lookup", 13, 7, true, [](CaseModel& m, std::mt19937& rng) {
    add_lookup_cases<uint8_t>(m, rng);
    add_lookup_cases<int8_t>(m, rng);
    add_sigmoid_tie_cases(m);
  });
}

TEST(QuantizeOracle, ComMicrosoftQuantizeLinear) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("contrib_qdq", 13, 7, true, [](CaseModel& m, std::mt19937& rng) {
    add_contrib_qdq_cases<uint16_t>(m, rng);
    add_contrib_qdq_cases<int16_t>(m, rng);
    add_contrib_qdq_cases<uint8_t>(m, rng);
  });
}

// ---------------------------------------------------------------------------------------------
// ONNX Runtime as the oracle: the ONNX-domain ops at the types, layouts and opsets the backend
// tests do not reach.

Tensor float16_of(const Tensor& f) {
  auto v = f.values<float>();
  std::vector<uint16_t> h(v.size());
  ir::float_to_half(v.data(), h.data(), v.size());
  return Tensor(DataType::Float16, f.dims(), ir::Bytes::copy_of(h.data(), h.size() * 2));
}

// Special values, ties and the division-vs-reciprocal case, then random values.
Tensor awkward_floats(int64_t n, std::mt19937& rng, float range) {
  std::vector<float> v{0.0f, -0.0f, kNaN, kInf, -kInf, 24.55f, -25.55f, 1e30f, -1e30f, 0.05f, 0.15f, -0.25f};
  std::uniform_real_distribution<float> d(-range, range);
  while (static_cast<int64_t>(v.size()) < n) v.push_back(d(rng));
  v.resize(n);
  return make<float>({n}, v);
}

template <class T>
void add_qdq_cases(CaseModel& m, std::mt19937& rng, bool contrib_domain = false) {
  const std::string domain = contrib_domain ? "com.microsoft" : "";
  // Per tensor: scale 0.1 (the reciprocal trap), then a random one.
  for (float scale : {0.1f, random_scale(rng)}) {
    std::string x = m.feed(m.name("x"), awkward_floats(301, rng, 40.0f));
    std::string s = m.feed(m.name("s"), scalar(scale));
    std::string z = m.constant(m.name("z"), scalar_of<T>(random_zp<T>(rng)));
    std::string q = m.name("q");
    m.node("QuantizeLinear", domain, {x, s, z}, {q});
    m.node("DequantizeLinear", domain, {q, s, z}, {m.name("y")});
  }
  // Per axis, axis 1 and -1, odd sizes.
  for (int64_t axis : {1, -1}) {
    std::vector<int64_t> dims{2, 5, 7};
    int64_t c = dims[axis < 0 ? 2 : 1];
    std::vector<float> scales(c);
    std::vector<T> zps(c);
    for (int64_t i = 0; i < c; ++i) {
      scales[i] = random_scale(rng);
      zps[i] = random_zp<T>(rng);
    }
    std::string x = m.feed(m.name("x"), uniform_floats(dims, rng, -20.0f, 20.0f));
    std::string s = m.constant(m.name("s"), make<float>({c}, scales));
    std::string z = m.feed(m.name("z"), make<T>({c}, zps));
    std::string q = m.name("q");
    m.node("QuantizeLinear", domain, {x, s, z}, {q}, attrs(Attribute::of_int("axis", axis)));
    m.node("DequantizeLinear", domain, {q, s, z}, {m.name("y")}, attrs(Attribute::of_int("axis", axis)));
  }
  // Dequantization of every value.
  std::vector<T> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<T>(i);
  m.node("DequantizeLinear", domain,
         {m.feed(m.name("q"), make<T>({256}, all)), m.constant(m.name("s"), scalar(random_scale(rng))),
          m.constant(m.name("z"), scalar_of<T>(random_zp<T>(rng)))},
         {m.name("y")});
}

TEST(QuantizeOracle, QuantizeDequantizeOpset13) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("qdq13", 13, 7, false, [](CaseModel& m, std::mt19937& rng) {
    add_qdq_cases<uint8_t>(m, rng);
    add_qdq_cases<int8_t>(m, rng);
    // No zero point: uint8.
    m.node("QuantizeLinear", "", {m.feed("x_nozp", awkward_floats(50, rng, 30.0f)), m.constant("s_nozp", scalar(0.2f))},
           {"y_nozp"});
    // int32 dequantization (the bias of quantized convolutions).
    m.node("DequantizeLinear", "",
           {m.feed("q32", random_ints<int32_t>({40}, rng, -2000000000, 2000000000)), m.constant("s32", scalar(1.7e-5f))},
           {"y32"});
  });
}

TEST(QuantizeOracle, QuantizeDequantizeOpset19Float16) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("qdq19", 19, 9, false, [](CaseModel& m, std::mt19937& rng) {
    Tensor x = uniform_floats({3, 17}, rng, -10.0f, 10.0f);
    std::string xh = m.feed("xh", float16_of(x));
    std::string sh = m.feed("sh", float16_of(scalar(0.0371f)));
    m.node("QuantizeLinear", "", {xh, sh, m.constant("zh", scalar_of<int8_t>(3))}, {"qh"});
    m.node("DequantizeLinear", "", {"qh", sh, "zh"}, {"yh"});
    std::vector<float> sc(17);
    for (float& v : sc) v = random_scale(rng);
    std::string sa = m.constant("sa", float16_of(make<float>({17}, sc)));
    m.node("QuantizeLinear", "", {xh, sa, m.constant("za", random_ints<uint8_t>({17}, rng))}, {"qa"},
           attrs(Attribute::of_int("axis", 1)));
    m.node("DequantizeLinear", "", {"qa", sa, "za"}, {"ya"}, attrs(Attribute::of_int("axis", 1)));
    m.node("DequantizeLinear", "", {m.feed("q8", random_ints<uint8_t>({64}, rng)), sh}, {"y8"});
  });
}

TEST(QuantizeOracle, QuantizeDequantizeOpset21) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("qdq21", 21, 10, false, [](CaseModel& m, std::mt19937& rng) {
    add_qdq_cases<int16_t>(m, rng);
    add_qdq_cases<uint16_t>(m, rng);
    add_qdq_cases<int8_t>(m, rng);
    // 4-bit: quantized and dequantized in the model (npy has no 4-bit type).
    for (DataType t : {DataType::Int4, DataType::UInt4}) {
      std::string x = m.feed(m.name("x"), awkward_floats(37, rng, 3.0f));
      std::string s = m.constant(m.name("s"), scalar(0.37f));
      Tensor zt(t, {});
      zt.mutable_bytes()[0] = static_cast<std::byte>(t == DataType::Int4 ? 0x0F : 0x03);  // -1, or 3
      std::string z = m.constant(m.name("z"), zt);
      std::string q = m.name("q");
      m.node("QuantizeLinear", "", {x, s, z}, {q}, {}, false);
      m.node("DequantizeLinear", "", {q, s, z}, {m.name("y")});
    }
    // Blocked, along axis 1 by 4 (3 blocks of 10 columns, the last one short).
    Tensor x = uniform_floats({3, 10}, rng, -5.0f, 5.0f);
    std::vector<float> sc(9);
    for (float& v : sc) v = random_scale(rng) * 10.0f;
    std::string xb = m.feed("xb", x), sb = m.constant("sb", make<float>({3, 3}, sc));
    std::string zb = m.constant("zb", random_ints<int8_t>({3, 3}, rng, -20, 20));
    auto blocked = [] { return attrs(Attribute::of_int("axis", 1), Attribute::of_int("block_size", 4)); };
    m.node("QuantizeLinear", "", {xb, sb, zb}, {"qb"}, blocked());
    m.node("DequantizeLinear", "", {"qb", sb, zb}, {"yb"}, blocked());
    // output_dtype without a zero point.
    m.node("QuantizeLinear", "", {m.feed("xo", awkward_floats(20, rng, 9000.0f)), m.constant("so", scalar(0.25f))}, {"yo"},
           attrs(Attribute::of_int("output_dtype", static_cast<int64_t>(DataType::Int16))));
  });
}

TEST(QuantizeOracle, DynamicQuantizeLinear) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("dynamic", 13, 7, false, [](CaseModel& m, std::mt19937& rng) {
    auto add = [&](Tensor x) {
      m.node("DynamicQuantizeLinear", "", {m.feed(m.name("x"), std::move(x))}, {m.name("y"), m.name("s"), m.name("z")});
    };
    add(uniform_floats({3, 41}, rng, -3.0f, 7.0f));
    add(uniform_floats({100}, rng, 0.5f, 2.0f));    // all positive: zp 0
    add(uniform_floats({100}, rng, -9.0f, -0.1f));  // all negative: zp 255
    add(uniform_floats({2, 2}, rng, -1e-3f, 1e-3f));
    add(make<float>({3}, {0.0f, 0.0f, 0.0f}));      // scale 1
  });
}

// Requantization parameters (x_scale, w_scale, y_scale, x_zp, y_zp) under which the multiplier
// (x_scale * w_scale) / y_scale rounds some product differently from x_scale * (w_scale /
// y_scale) or from scaling the accumulator step by step (found by a search).
struct RequantParams {
  float xs, ws, ys;
  int zx, zy;
};
const RequantParams kRequantTies[] = {
    {0x1.1c7e3p-3f, 0x1.8f759ap-4f, 0x1.649298p+1f, 6, 185},
    {0x1.88b486p-3f, 0x1.8e4928p-3f, 0x1.1aa5dp+3f, 217, 48},
    {0x1.7c9b24p-3f, 0x1.6ea852p-5f, 0x1.10a0b4p+0f, 212, 204},
};

// Every uint8 activation times every int8 weight, through QLinearMatMul (K = 1) and a 1x1
// QLinearConv with one output channel per weight value.
void add_requant_tie_cases(CaseModel& m) {
  std::vector<uint8_t> a(256);
  std::vector<int8_t> w(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = static_cast<uint8_t>(i);
    w[i] = static_cast<int8_t>(i - 128);
  }
  std::string col = m.feed("every_u8_column", make<uint8_t>({256, 1}, a));
  std::string img = m.feed("every_u8_image", make<uint8_t>({1, 1, 16, 16}, a));
  std::string row = m.constant("every_s8_row", make<int8_t>({1, 256}, w));
  std::string filters = m.constant("every_s8_filter", make<int8_t>({256, 1, 1, 1}, w));
  for (const RequantParams& p : kRequantTies) {
    std::string xs = m.constant(m.name("xs"), scalar(p.xs)), zx = m.constant(m.name("zx"), scalar_of<uint8_t>(p.zx));
    std::string ws = m.constant(m.name("ws"), scalar(p.ws)), zw = m.constant(m.name("zw"), scalar_of<int8_t>(0));
    std::string ys = m.constant(m.name("ys"), scalar(p.ys)), zy = m.constant(m.name("zy"), scalar_of<uint8_t>(p.zy));
    m.node("QLinearMatMul", "", {col, xs, zx, row, ws, zw, ys, zy}, {m.name("matmul")});
    std::string wsc = m.constant(m.name("wsc"), make<float>({256}, std::vector<float>(256, p.ws)));
    m.node("QLinearConv", "", {img, xs, zx, filters, wsc, zw, ys, zy}, {m.name("conv")});
  }
}

// QLinearConv / ConvInteger case: x [N, C, spatial...], weights [M, C/group, kernel...].
template <class X, class W, class Y>
void add_qlinearconv_case(CaseModel& m, std::mt19937& rng, std::vector<int64_t> x_dims, std::vector<int64_t> w_dims,
                          std::vector<Attribute> a, bool per_channel, bool bias) {
  int64_t M = w_dims[0];
  // Signed weights in [-64, 63]: ORT's u8s8 kernels without VNNI saturate pairs of products.
  Tensor w = std::is_signed_v<W> ? random_ints<W>(w_dims, rng, -64, 63) : random_ints<W>(w_dims, rng);
  std::vector<float> ws(per_channel ? M : 1);
  for (float& v : ws) v = random_scale(rng);
  float xs = random_scale(rng);
  int64_t k = ir::element_count(w_dims) / M;
  float ys = xs * ws[0] * std::sqrt(static_cast<float>(k)) * std::uniform_real_distribution<float>(20.0f, 60.0f)(rng);
  std::vector<std::string> ins{m.feed(m.name("x"), random_ints<X>(x_dims, rng)), m.constant(m.name("xs"), scalar(xs)),
                               m.constant(m.name("xz"), scalar_of<X>(random_zp<X>(rng))),
                               m.constant(m.name("w"), w),
                               m.constant(m.name("ws"), per_channel ? make<float>({M}, ws) : scalar(ws[0])),
                               m.constant(m.name("wz"), scalar_of<W>(std::is_signed_v<W> ? 0 : random_zp<W>(rng))),
                               m.constant(m.name("ys"), scalar(ys)), m.constant(m.name("yz"), scalar_of<Y>(random_zp<Y>(rng)))};
  if (bias) ins.push_back(m.constant(m.name("b"), random_ints<int32_t>({M}, rng, -5000, 5000)));
  m.node("QLinearConv", "", ins, {m.name("y")}, std::move(a));
}

TEST(QuantizeOracle, QLinearConv) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("qlinearconv", 13, 7, false, [](CaseModel& m, std::mt19937& rng) {
    auto ints = [](const char* n, std::vector<int64_t> v) { return Attribute::of_ints(n, std::move(v)); };
    add_qlinearconv_case<uint8_t, int8_t, uint8_t>(m, rng, {1, 3, 11, 13}, {8, 3, 3, 3},
                                                   attrs(ints("pads", {1, 1, 1, 1}), ints("strides", {2, 2})), true, true);
    add_qlinearconv_case<uint8_t, uint8_t, uint8_t>(m, rng, {2, 4, 9, 8}, {6, 2, 3, 2},
                                                    attrs(Attribute::of_int("group", 2), ints("dilations", {2, 1}),
                                                          ints("pads", {2, 0, 1, 1})),
                                                    false, false);
    add_qlinearconv_case<uint8_t, uint8_t, uint8_t>(m, rng, {1, 2, 8, 9}, {3, 2, 3, 2},
                                                    attrs(ints("strides", {2, 3}), Attribute::of_string("auto_pad", "SAME_UPPER")),
                                                    false, true);
    add_qlinearconv_case<int8_t, int8_t, int8_t>(m, rng, {1, 4, 7, 7}, {4, 1, 3, 3},
                                                 attrs(Attribute::of_int("group", 4), ints("pads", {1, 1, 1, 1})), true, true);
    add_qlinearconv_case<uint8_t, int8_t, uint8_t>(m, rng, {2, 4, 17}, {6, 4, 3}, attrs(ints("strides", {2})), true, true);
    add_qlinearconv_case<uint8_t, int8_t, uint8_t>(m, rng, {1, 16, 7, 5}, {8, 16, 1, 1}, {}, true, false);
    add_qlinearconv_case<uint8_t, int8_t, uint8_t>(m, rng, {1, 2, 5, 6, 4}, {3, 2, 2, 3, 2},
                                                   attrs(ints("pads", {0, 1, 0, 1, 1, 0})), false, true);
    add_qlinearconv_case<uint8_t, int8_t, uint8_t>(m, rng, {1, 3, 5, 5}, {4, 3, 2, 2},
                                                   attrs(Attribute::of_string("auto_pad", "SAME_LOWER")), true, true);
    add_requant_tie_cases(m);
  });
}

TEST(QuantizeOracle, QLinearMatMulAndMatMulInteger) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("matmul", 13, 7, false, [](CaseModel& m, std::mt19937& rng) {
    auto qlinear = [&](auto a_tag, auto b_tag, std::vector<int64_t> ad, std::vector<int64_t> bd, bool per_column) {
      using A = decltype(a_tag);
      using B = decltype(b_tag);
      int64_t N = bd.back(), K = ad.back();
      Tensor b = std::is_signed_v<B> ? random_ints<B>(bd, rng, -64, 63) : random_ints<B>(bd, rng);
      std::vector<float> bs(per_column ? N : 1);
      for (float& v : bs) v = random_scale(rng);
      std::vector<B> bz(per_column ? N : 1);
      for (B& v : bz) v = std::is_signed_v<B> ? B{0} : random_zp<B>(rng);
      float as = random_scale(rng);
      float ys = as * bs[0] * std::sqrt(static_cast<float>(K)) * 40.0f;
      std::vector<int64_t> col{N};
      m.node("QLinearMatMul", "",
             {m.feed(m.name("a"), random_ints<A>(ad, rng)), m.constant(m.name("as"), scalar(as)),
              m.constant(m.name("az"), scalar_of<A>(random_zp<A>(rng))), m.constant(m.name("b"), b),
              m.constant(m.name("bs"), per_column ? make<float>(col, bs) : scalar(bs[0])),
              m.constant(m.name("bz"), per_column ? make<B>(col, bz) : scalar_of<B>(bz[0])),
              m.constant(m.name("ys"), scalar(ys)), m.constant(m.name("yz"), scalar_of<A>(random_zp<A>(rng)))},
             {m.name("y")});
    };
    qlinear(uint8_t{}, int8_t{}, {2, 5, 7}, {7, 9}, false);
    qlinear(uint8_t{}, uint8_t{}, {3, 6}, {6, 11}, true);
    qlinear(int8_t{}, int8_t{}, {4, 8}, {2, 8, 5}, false);
    qlinear(uint8_t{}, int8_t{}, {8}, {8, 5}, true);
    qlinear(uint8_t{}, int8_t{}, {3, 1, 4, 33}, {2, 33, 3}, false);

    auto integer = [&](auto a_tag, auto b_tag, std::vector<int64_t> ad, std::vector<int64_t> bd, int zp_kind) {
      using A = decltype(a_tag);
      using B = decltype(b_tag);
      int64_t N = bd.back();
      Tensor b = std::is_signed_v<B> ? random_ints<B>(bd, rng, -64, 63) : random_ints<B>(bd, rng);
      std::vector<std::string> ins{m.feed(m.name("a"), random_ints<A>(ad, rng)), m.feed(m.name("b"), b)};
      if (zp_kind >= 1) ins.push_back(m.constant(m.name("az"), scalar_of<A>(random_zp<A>(rng))));
      if (zp_kind == 2) ins.push_back(m.constant(m.name("bz"), scalar_of<B>(random_zp<B>(rng))));
      if (zp_kind == 3) ins.push_back(m.constant(m.name("bz"), random_ints<B>({N}, rng, 0, 9)));  // per column
      m.node("MatMulInteger", "", ins, {m.name("y")});
    };
    integer(uint8_t{}, int8_t{}, {3, 4, 10}, {10, 6}, 1);
    integer(uint8_t{}, uint8_t{}, {5, 12}, {12, 7}, 2);
    integer(uint8_t{}, uint8_t{}, {2, 5, 12}, {12, 7}, 3);
    integer(int8_t{}, int8_t{}, {6}, {2, 6, 3}, 0);
  });
}

TEST(QuantizeOracle, ConvInteger) {
  SKIP_WITHOUT_ORT();
  expect_group_same_as_ort("convinteger", 13, 7, false, [](CaseModel& m, std::mt19937& rng) {
    auto conv = [&](std::vector<int64_t> xd, std::vector<int64_t> wd, std::vector<Attribute> a, bool w_zp) {
      std::vector<std::string> ins{m.feed(m.name("x"), random_ints<uint8_t>(xd, rng)),
                                   m.constant(m.name("w"), random_ints<uint8_t>(wd, rng)),
                                   m.constant(m.name("xz"), scalar_of<uint8_t>(random_zp<uint8_t>(rng)))};
      if (w_zp) ins.push_back(m.constant(m.name("wz"), scalar_of<uint8_t>(random_zp<uint8_t>(rng))));
      m.node("ConvInteger", "", ins, {m.name("y")}, std::move(a));
    };
    conv({1, 2, 7, 8}, {3, 2, 3, 3}, attrs(Attribute::of_ints("pads", {1, 0, 1, 2})), true);
    conv({2, 4, 6, 5}, {4, 2, 2, 2}, attrs(Attribute::of_int("group", 2), Attribute::of_ints("strides", {2, 1})), false);
    conv({1, 3, 9}, {2, 3, 4}, attrs(Attribute::of_ints("dilations", {2})), true);
  });
}

// Not into the files a unity build compiles after this one.
#undef SKIP_WITHOUT_ORT

}  // namespace
}  // namespace onnxptq
