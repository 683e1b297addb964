// ExtendedQuantFormat.QDQ's float16 and bfloat16 Q/DQ in standard ops (the Cast form, by default):
// ONNX Runtime runs the written model and computes exactly what onnxptq's simulation of the plan
// computes, on a model whose float ops round the same way in any runtime (elementwise ops, MaxPool,
// a MatMul of inner size 1); the custom-op form is still written when asked; each key's effect is
// checked on the nodes written. Whole real models are compared in tests/e2e/float_cast_vs_ort_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "quant/config_keys.h"
#include "quant/export.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
using nlohmann::json;
using testing::fresh_dir;
using testing::producer;
using testing::saved_and_loaded;

// ONNX's TensorProto element types of the Cast `to` attribute.
constexpr int64_t kToFloat = 1, kToFloat16 = 10, kToBfloat16 = 16;
// The largest finite bfloat16, 0x7F7F: (2 - 2^-7) 2^127.
const float kBf16Max = std::ldexp(255.0f, 120);

ir::Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& e : v) e = u(rng);
  return ir::Tensor::from_values<float>(std::move(dims), v);
}

// x [2,3,4,4] -> Mul(k [1,3,1,1]) -> Add(c [1,3,1,1]) -> Relu -> MaxPool 2x2 -> p [2,3,2,2];
// p -> Reshape [24,1] -> MatMul(w [1,5]) -> Sub(d [5]) -> y [24,5]; p -> Div(e [1,3,1,1]) -> z.
// Every float op rounds once (a MatMul of inner size 1 is one product), so two correct runtimes
// agree bit for bit and any difference is the quantization's.
ir::Model exact_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.name = "exact";
  std::mt19937 rng(11);
  auto init = [&](const std::string& name, ir::Tensor t) {
    ir::Value* v = g.add_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  };
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {2, 3, 4, 4});
  g.add_input(x);
  g.add_node("Mul", {x, init("k", random_tensor({1, 3, 1, 1}, rng, 0.5f, 1.5f))}, {g.add_value("a")}, "mul");
  g.add_node("Add", {g.find_value("a"), init("c", random_tensor({1, 3, 1, 1}, rng, -0.3f, 0.3f))}, {g.add_value("b")},
             "add");
  g.add_node("Relu", {g.find_value("b")}, {g.add_value("r")}, "relu");
  ir::Node* pool = g.add_node("MaxPool", {g.find_value("r")}, {g.add_value("p")}, "maxpool");
  pool->set_attribute(ir::Attribute::of_ints("kernel_shape", {2, 2}));
  pool->set_attribute(ir::Attribute::of_ints("strides", {2, 2}));
  ir::Value* shape = init("shape", ir::Tensor::from_values<int64_t>({2}, std::vector<int64_t>{24, 1}));
  g.add_node("Reshape", {g.find_value("p"), shape}, {g.add_value("f")}, "reshape");
  g.add_node("MatMul", {g.find_value("f"), init("w", random_tensor({1, 5}, rng, -2.0f, 2.0f))}, {g.add_value("mm")},
             "matmul");
  g.add_node("Sub", {g.find_value("mm"), init("d", random_tensor({5}, rng, -0.5f, 0.5f))}, {g.add_value("y")}, "sub");
  g.add_node("Div", {g.find_value("p"), init("e", random_tensor({1, 3, 1, 1}, rng, 0.7f, 1.9f))}, {g.add_value("z")},
             "div");
  g.find_value("y")->type = ir::ValueType::tensor(DataType::Float, {24, 5});
  g.find_value("z")->type = ir::ValueType::tensor(DataType::Float, {2, 3, 2, 2});
  g.add_output(g.find_value("y"));
  g.add_output(g.find_value("z"));
  return m;
}

// The config of a JSON config as a user writes it (the keys go through the parser).
QuantConfig config_from_json(const json& j) {
  QuantConfig c;
  c.calib.threads = 2;
  apply_config_json(c, j);
  check_config(c);
  return c;
}

json extended_json(const char* activation, const char* weight, json extra = json::object()) {
  return {{"quant_format", "ExtendedQuantFormat.QDQ"},
          {"calibrate_method", "MinMax"},
          {"activation_type", activation},
          {"weight_type", weight},
          {"extra_options", extra}};
}

// How many values differ (as floats: NaN never appears here; -0 equals 0).
size_t differ(const ir::Tensor& a, const ir::Tensor& b) {
  if (a.dims() != b.dims()) return std::numeric_limits<size_t>::max();
  auto x = a.values<float>(), y = b.values<float>();
  size_t n = 0;
  for (size_t k = 0; k < x.size(); ++k) n += x[k] != y[k];
  return n;
}

std::string key(const ir::Node& n) { return (n.domain.empty() ? "" : n.domain + ":") + n.op_type; }

int count(const ir::Model& m, const std::string& domain_op) {
  int n = 0;
  for (const auto& node : m.graph->nodes()) n += key(*node) == domain_op;
  return n;
}

int casts_to(const ir::Model& m, int64_t to) {
  int n = 0;
  for (const auto& node : m.graph->nodes())
    if (node->op_type == "Cast") n += node->find_attribute("to") && node->find_attribute("to")->i == to;
  return n;
}

// The op types of the nodes from `value` back to `start` (or to a value no node writes).
std::vector<std::string> chain_back(const ir::Model& m, const std::string& value, const std::string& start) {
  std::vector<std::string> ops;
  for (const ir::Node* n = producer(m, value); n; n = n->input(0)->producer()) {
    ops.push_back(n->op_type);
    if (n->input(0)->name() == start) break;
  }
  return ops;
}

// bfloat16 rounding to nearest even by integer arithmetic on the float's bits (finite values).
float bf16_round(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  return std::bit_cast<float>(u);
}

struct OrtCase {
  std::string label;
  json config;
};

class FloatCastInOrt : public ::testing::TestWithParam<OrtCase> {};

// ONNX Runtime (graph optimizations off, and on as deployed) computes the written model exactly as
// the simulation of its plan, on two inputs; the engine's run of it too.
TEST_P(FloatCastInOrt, ComputesTheSimulationBitForBit) {
  ir::Model model = exact_model();
  QuantConfig config = config_from_json(GetParam().config);
  Plan plan = testing::calibrated_plan(model, config);
  fs::path dir = fresh_dir("extended_cast_" + GetParam().label);
  ir::Model q = saved_and_loaded(export_model(model, plan, config), dir / "q.onnx");
  for (const auto& n : q.graph->nodes())
    EXPECT_NE(n->domain, "com.amd.quark") << n->name << ": the Cast form writes no custom op";
  EXPECT_EQ(count(q, "Cast") > 0, !config.enable_vaiml_bf16);  // EnableVaimlBF16 removes bfloat16's
  Simulation simulation(model, plan, config, 2);
  for (uint32_t seed : {7u, 8u}) {
    auto feeds = testing::random_feeds(model, seed);
    std::vector<ir::Tensor> expected = simulation.run(feeds);
    std::vector<ir::Tensor> literal = testing::ort_run(dir / "q.onnx", q, feeds, dir / "literal", true);
    std::vector<ir::Tensor> optimized = testing::ort_run(dir / "q.onnx", q, feeds, dir / "optimized");
    std::vector<ir::Tensor> engine = testing::run_model(q, feeds, false);
    ASSERT_EQ(literal.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string& name = q.graph->outputs()[i]->name();
      EXPECT_EQ(differ(literal[i], expected[i]), 0u) << name << ", seed " << seed << ": ORT (literal) vs simulation";
      EXPECT_EQ(differ(optimized[i], expected[i]), 0u)
          << name << ", seed " << seed << ": ORT (optimized) vs simulation";
      EXPECT_EQ(differ(engine[i], expected[i]), 0u) << name << ", seed " << seed << ": engine vs simulation";
    }
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, FloatCastInOrt,
    ::testing::Values(
        // Quark's FP16 and BF16 presets (asymmetric activations: bfloat16 zero points, Add / Sub).
        OrtCase{"fp16", extended_json("QFloat16", "QFloat16", {{"ForceQuantizeNoInputCheck", true}})},
        OrtCase{"bf16", extended_json("QBFloat16", "QBFloat16",
                                      {{"ForceQuantizeNoInputCheck", true}, {"QuantizeAllOpTypes", true}})},
        OrtCase{"bf16_symmetric", extended_json("QBFloat16", "QBFloat16", {{"ActivationSymmetric", true}})},
        // Scaled ranges: Div and Mul, per tensor and per channel (MatMul's weight along axis 1).
        OrtCase{"fp16_scaled",
                extended_json("QFloat16", "QFloat16",
                              {{"ActivationScaled", true}, {"WeightScaled", true}, {"ActivationSymmetric", true}})},
        OrtCase{"bf16_scaled",
                extended_json("QBFloat16", "QBFloat16", {{"ActivationScaled", true}, {"WeightScaled", true}})},
        OrtCase{"bf16_scaled_per_channel",
                [] {
                  json j =
                      extended_json("QBFloat16", "QBFloat16",
                                    {{"ActivationScaled", true}, {"WeightScaled", true}, {"WeightSymmetric", false}});
                  j["per_channel"] = true;
                  return j;
                }()},
        OrtCase{"fp16_scaled_per_channel",
                [] {
                  json j = extended_json("QFloat16", "QFloat16", {{"WeightScaled", true}});
                  j["per_channel"] = true;
                  return j;
                }()},
        // Integer activations with bfloat16 weights, float weights as pairs, a pair per reader.
        OrtCase{"u8_bf16", extended_json("QUInt8", "QBFloat16", {{"WeightScaled", true}})},
        OrtCase{"bf16_weight_pairs",
                extended_json("QBFloat16", "QBFloat16", {{"AddQDQPairToWeight", true}, {"WeightScaled", true}})},
        OrtCase{"fp16_dedicated_pairs", extended_json("QFloat16", "QFloat16", {{"DedicatedQDQPair", true}})},
        OrtCase{"bf16_clip",
                extended_json("QBFloat16", "QBFloat16", {{"BF16WithClip", true}, {"ActivationScaled", true}})},
        OrtCase{"bf16_vaiml",
                extended_json("QBFloat16", "QBFloat16", {{"EnableVaimlBF16", true}, {"WeightScaled", true}})},
        // Quark's own combination: float16 custom ops are not run here, so bfloat16 throughout.
        OrtCase{"bf16_to_cast_explicit",
                extended_json("QBFloat16", "QBFloat16", {{"FloatQDQAsCustomOps", true}, {"BF16QDQToCast", true}})}),
    [](const ::testing::TestParamInfo<OrtCase>& info) { return info.param.label; });

// The Cast pairs of the presets: every quantize is a Cast to the type, every dequantize a Cast back;
// weights are stored as 16-bit initializers followed by a Cast; no custom op, no Div or Mul (scale 1).
TEST(FloatCastForm, PresetsWriteCastPairsInPlaceOfTheCustomOps) {
  ir::Model model = testing::export_test_model();
  for (auto [type, to, name] : {std::tuple{"QFloat16", kToFloat16, DataType::Float16},
                                std::tuple{"QBFloat16", kToBfloat16, DataType::BFloat16}}) {
    SCOPED_TRACE(type);
    QuantConfig config = config_from_json(
        extended_json(type, type, {{"ForceQuantizeNoInputCheck", true}, {"ActivationSymmetric", true}}));
    Plan plan = testing::calibrated_plan(model, config);
    ir::Model q = export_model(model, plan, config);
    int weights = 0;
    for (const TensorPlan& t : plan.tensors) weights += t.role == Role::Weight;
    for (const auto& n : q.graph->nodes()) {
      EXPECT_NE(n->domain, "com.amd.quark") << n->name;
      EXPECT_NE(n->op_type, "Div") << n->name;
      EXPECT_TRUE(n->op_type != "Mul" || n->name == "mul") << n->name;
    }
    EXPECT_GE(casts_to(q, to), 10);
    // One Cast back per Cast to the type, and one per stored weight.
    EXPECT_EQ(casts_to(q, kToFloat), casts_to(q, to) + weights);
    // The activation x: Cast to the type, then back.
    const ir::Node* back = producer(q, "x_DequantizeLinear_Output");
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(back->op_type, "Cast");
    EXPECT_EQ(back->find_attribute("to")->i, kToFloat);
    const ir::Node* there = back->input(0)->producer();
    ASSERT_NE(there, nullptr);
    EXPECT_EQ(there->op_type, "Cast");
    EXPECT_EQ(there->find_attribute("to")->i, to);
    EXPECT_EQ(there->input(0)->name(), "x");
    // The weight: its 16-bit values, then a Cast (the float weight is gone).
    EXPECT_EQ(q.graph->find_value("w"), nullptr);
    const ir::Value* stored = q.graph->find_value("w_quantized");
    ASSERT_TRUE(stored && stored->has_initializer());
    EXPECT_EQ(stored->initializer().dtype(), name);
    EXPECT_EQ(producer(q, "w_DequantizeLinear_Output")->op_type, "Cast");
    EXPECT_EQ(producer(q, "w_DequantizeLinear_Output")->input(0), stored);
    // Graph outputs keep their names, written by the Cast back.
    EXPECT_EQ(producer(q, "y")->op_type, "Cast");
    EXPECT_EQ(q.opset("com.amd.quark"), 1);  // imported as Quark does, though no node uses it
  }
}

// ActivationScaled / WeightScaled: a Div before and a Mul after every Cast pair; a bfloat16
// asymmetric range adds its zero point (Add before, Sub after).
TEST(FloatCastForm, ScaledRangesWriteDivAndMulAndZeroPointsAddAndSub) {
  ir::Model model = testing::export_test_model();
  QuantConfig config =
      config_from_json(extended_json("QBFloat16", "QBFloat16", {{"ActivationScaled", true}, {"WeightScaled", true}}));
  Plan plan = testing::calibrated_plan(model, config);
  ir::Model q = export_model(model, plan, config);
  // The Relu's output: range [0, max], so Quark's zero point is the scaled range's low end, -2.
  const TensorPlan& r = plan.provider("r");
  ASSERT_NE(r.params[0].scale, 1.0);
  EXPECT_EQ(r.params[0].float_zero_point, -2.0);
  EXPECT_EQ(chain_back(q, "r_DequantizeLinear_Output", "r"),
            (std::vector<std::string>{"Mul", "Sub", "Cast", "Cast", "Add", "Div"}));
  const ir::Node* mul = producer(q, "r_DequantizeLinear_Output");
  EXPECT_EQ(mul->input(1)->initializer().values<float>()[0], static_cast<float>(r.params[0].scale));
  EXPECT_EQ(mul->input(0)->producer()->input(1)->initializer().values<float>()[0], -2.0f);
  // The symmetric weight: its bfloat16 values, Cast, Mul by its scale; no zero point.
  EXPECT_EQ(chain_back(q, "w_DequantizeLinear_Output", "w_quantized"), (std::vector<std::string>{"Mul", "Cast"}));
  EXPECT_EQ(q.graph->find_value("w_quantized")->initializer().dtype(), DataType::BFloat16);

  // Per channel: the Mul's scale has the weight's rank, the channels on its axis.
  json j = extended_json("QFloat16", "QFloat16", {{"WeightScaled", true}});
  j["per_channel"] = true;
  QuantConfig per_channel = config_from_json(j);
  Plan pc = testing::calibrated_plan(model, per_channel);
  ir::Model qc = export_model(model, pc, per_channel);
  const ir::Node* w_mul = producer(qc, "w_DequantizeLinear_Output");
  ASSERT_EQ(w_mul->op_type, "Mul");
  EXPECT_EQ(w_mul->input(1)->initializer().dims(), (std::vector<int64_t>{8, 1, 1, 1}));
  for (const auto& n : qc.graph->nodes()) EXPECT_NE(n->op_type, "Sub") << n->name << ": float16 has no zero point";
}

// FloatQDQAsCustomOps writes Quark's custom ops for both types (float weights as pairs);
// BF16QDQToCast false keeps bfloat16's only; with both keys, Quark's mix: float16 custom,
// bfloat16 Casts. The engine runs each as the simulation computes it.
TEST(FloatCastForm, CustomOpsWhenAsked) {
  ir::Model model = testing::export_test_model();
  json mixed =
      extended_json("QFloat16", "QFloat16", {{"NodePrecision", {{"gemm", "QBFloat16"}, {"matmul", "QBFloat16"}}}});
  struct Case {
    json extra;
    bool fp16_custom, bf16_custom;
  } cases[] = {{{{"FloatQDQAsCustomOps", true}}, true, true},
               {{{"BF16QDQToCast", false}}, false, true},
               {{{"FloatQDQAsCustomOps", true}, {"BF16QDQToCast", true}}, true, false},
               {json::object(), false, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra.dump());
    json j = mixed;
    j["extra_options"].update(c.extra);
    QuantConfig config = config_from_json(j);
    Plan plan = testing::calibrated_plan(model, config);
    ir::Model q = export_model(model, plan, config);
    int fp16_custom = 0, bf16_custom = 0;
    for (const auto& n : q.graph->nodes()) {
      if (n->domain != "com.amd.quark") continue;
      DataType zp = n->input(2)->initializer().dtype();
      (zp == DataType::Float16 ? fp16_custom : bf16_custom)++;
      EXPECT_TRUE(zp == DataType::Float16 || zp == DataType::BFloat16) << n->name;
    }
    EXPECT_EQ(fp16_custom > 0, c.fp16_custom);
    EXPECT_EQ(bf16_custom > 0, c.bf16_custom);
    EXPECT_EQ(casts_to(q, kToFloat16) > 0, !c.fp16_custom);
    EXPECT_EQ(casts_to(q, kToBfloat16) > 0, !c.bf16_custom);
    // float16 weights of custom ops stay float with a pair (Quark's default); Cast form: stored 16-bit.
    const ir::Value* w = q.graph->find_value("w");
    EXPECT_EQ(w && w->has_initializer(), c.fp16_custom);
    auto feeds = testing::random_feeds(model, 7);
    std::vector<ir::Tensor> got = testing::run_model(q, feeds, false),
                            expected = Simulation(model, plan, config, 2).run(feeds);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(differ(got[i], expected[i]), 0u) << i;
  }
}

// BF16WithClip: a Clip to the bfloat16 range before every bfloat16 quantize of a run-time value
// (not of weights), in either form. Values beyond the largest bfloat16 then stay finite: ONNX
// Runtime gives the largest bfloat16 where the unclipped model gives infinity.
TEST(FloatCastForm, BF16WithClipKeepsValuesBeyondTheBfloat16RangeFinite) {
  ir::Model model = exact_model();
  std::map<std::string, ir::Tensor> feeds = testing::random_feeds(model, 7);
  // The largest float, and the float halfway between the two largest bfloat16 values (a tie that
  // rounds to even: infinity), in the first elements of x; x's Mul scales them by k >= 0.5.
  std::vector<float> x(feeds["x"].values<float>().begin(), feeds["x"].values<float>().end());
  x[0] = std::numeric_limits<float>::max();
  x[1] = std::bit_cast<float>(0x7F7F8000u);
  x[2] = -std::numeric_limits<float>::max();
  feeds["x"] = ir::Tensor::from_values<float>({2, 3, 4, 4}, x);
  fs::path dir = fresh_dir("extended_cast_clip");
  for (bool clip : {false, true}) {
    SCOPED_TRACE(clip ? "BF16WithClip" : "no clip");
    QuantConfig config = config_from_json(
        extended_json("QBFloat16", "QBFloat16", {{"ActivationSymmetric", true}, {"BF16WithClip", clip}}));
    Plan plan = testing::calibrated_plan(model, config);
    fs::path file = dir / (clip ? "clip.onnx" : "plain.onnx");
    ir::Model q = saved_and_loaded(export_model(model, plan, config), file);
    int clips = count(q, "Clip");
    int activation_casts = 0;  // Casts to bfloat16 of a value computed at run time
    for (const auto& n : q.graph->nodes())
      if (n->op_type == "Cast" && n->find_attribute("to")->i == kToBfloat16) {
        bool weight = n->input(0)->has_initializer();
        activation_casts += !weight;
        const ir::Node* before = n->input(0)->producer();
        if (!weight) {
          EXPECT_EQ(before && before->op_type == "Clip", clip) << n->name;
        }
      }
    EXPECT_EQ(clips, clip ? activation_casts : 0);
    ASSERT_GT(activation_casts, 5);
    std::vector<ir::Tensor> ort = testing::ort_run(file, q, feeds, dir / (clip ? "ort_clip" : "ort_plain"), true);
    std::vector<ir::Tensor> expected = Simulation(model, plan, config, 2).run(feeds);
    // z = Div(MaxPool(Relu(x k + c)), e): its first value is the pool over x[0] and x[1]; the
    // largest float rounds to infinity in bfloat16, unless clipped first.
    auto z = ort[1].values<float>();
    EXPECT_EQ(std::isinf(z[0]), !clip) << z[0];
    if (clip) {
      EXPECT_LE(z[0], kBf16Max);
    }
    for (size_t i = 0; i < ort.size(); ++i) {
      auto a = ort[i].values<float>(), b = expected[i].values<float>();
      size_t n = 0;
      for (size_t k = 0; k < a.size(); ++k) n += !(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k])));
      EXPECT_EQ(n, 0u) << "output " << i << ": ORT vs simulation";
    }
  }
  // The custom-op form gets the Clip too, before its ExtendedQuantizeLinear.
  QuantConfig custom =
      config_from_json(extended_json("QBFloat16", "QBFloat16", {{"BF16WithClip", true}, {"BF16QDQToCast", false}}));
  Plan plan = testing::calibrated_plan(model, custom);
  ir::Model q = export_model(model, plan, custom);
  const ir::Node* quantize = producer(q, "x_QuantizeLinear_Output");
  ASSERT_NE(quantize, nullptr);
  EXPECT_EQ(quantize->op_type, "ExtendedQuantizeLinear");
  EXPECT_EQ(quantize->input(0)->producer()->op_type, "Clip");
  if (!HasFailure()) fs::remove_all(dir);
}

// EnableVaimlBF16 (Quark's remove_bf16_cast): no bfloat16 Cast and no Div / Mul is left; weights are
// float32 initializers under their own names holding bfloat16-rounded values, times the scale.
TEST(FloatCastForm, EnableVaimlBF16StoresRoundedFloatWeightsAndNoCasts) {
  ir::Model model = exact_model();
  QuantConfig config = config_from_json(extended_json("QBFloat16", "QBFloat16", {{"EnableVaimlBF16", true}}));
  Plan plan = testing::calibrated_plan(model, config);
  ir::Model q = export_model(model, plan, config);
  EXPECT_EQ(count(q, "Cast"), 0);
  EXPECT_EQ(q.graph->nodes().size(), model.graph->nodes().size());
  for (const char* name : {"k", "c", "w", "d", "e"}) {
    const ir::Value* v = q.graph->find_value(name);
    ASSERT_TRUE(v && v->has_initializer()) << name;
    ASSERT_EQ(v->initializer().dtype(), DataType::Float);
    auto got = v->initializer().values<float>();
    auto original = model.graph->find_value(name)->initializer().values<float>();
    size_t changed = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], bf16_round(original[i])) << name << "[" << i << "]";
      changed += got[i] != original[i];
    }
    EXPECT_GT(changed, 0u) << name;
  }
  // ActivationScaled leaves no Div / Mul either (Quark's leaves a Mul by 1/s and a Mul by s).
  QuantConfig scaled = config_from_json(
      extended_json("QBFloat16", "QBFloat16", {{"EnableVaimlBF16", true}, {"ActivationScaled", true}}));
  Plan sp = testing::calibrated_plan(model, scaled);
  ir::Model qs = export_model(model, sp, scaled);
  EXPECT_EQ(qs.graph->nodes().size(), model.graph->nodes().size());
  // float16 is not bfloat16: its Cast pairs stay.
  QuantConfig mixed = config_from_json(extended_json("QFloat16", "QBFloat16", {{"EnableVaimlBF16", true}}));
  Plan mp = testing::calibrated_plan(model, mixed);
  ir::Model qm = export_model(model, mp, mixed);
  EXPECT_GT(casts_to(qm, kToFloat16), 5);
  EXPECT_EQ(casts_to(qm, kToBfloat16), 0);
}

// The bfloat16 Cast needs opset 13 (Cast-13 takes bfloat16); the custom ops do not.
TEST(FloatCastForm, BfloatCastsNeedOpset13) {
  ir::Model model = testing::export_test_model(11);
  QuantConfig config = config_from_json(extended_json("QBFloat16", "QBFloat16"));
  Plan plan = testing::calibrated_plan(model, config);
  EXPECT_EQ(testing::error_of([&] { export_model(model, plan, config); }),
            "the Cast form of bfloat16 Q/DQ needs opset 13 or later (Cast takes bfloat16 from 13); the model has "
            "opset 11 (upgrade it first, or set FloatQDQAsCustomOps)");
  QuantConfig custom = config_from_json(extended_json("QBFloat16", "QBFloat16", {{"FloatQDQAsCustomOps", true}}));
  EXPECT_GT(count(export_model(model, testing::calibrated_plan(model, custom), custom),
                  "com.amd.quark:ExtendedQuantizeLinear"),
            5);
}

// Each key is refused where it would do nothing, naming itself.
TEST(FloatCastForm, KeysAreRefusedWhereTheyDoNothing) {
  auto error = [](const json& j) { return testing::error_of([&] { config_from_json(j); }); };
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  json vitis = extended_json("QBFloat16", "QBFloat16", {{"ActivationScaled", true}});
  vitis["quant_format"] = "VitisQuantFormat.QDQ";
  EXPECT_EQ(error(vitis),
            "extra option ActivationScaled takes effect only with ExtendedQuantFormat.QDQ (VitisQuantFormat.QDQ "
            "writes no Quark float16/bfloat16 Q/DQ)");
  EXPECT_EQ(
      error(extended_json("QFloat16", "QFloat16", {{"BF16QDQToCast", true}})),
      "extra option BF16QDQToCast takes effect only with bfloat16, and the config asks for none "
      "(activation_type, weight_type, NodePrecision, TensorQuantOverrides, MixedPrecisionTensor, AutoMixprecision)");
  EXPECT_TRUE(has(error(extended_json("QBFloat16", "QInt8", {{"WeightScaled", true}})),
                  "WeightScaled takes effect only with float16 or bfloat16 weights,"));
  EXPECT_TRUE(has(error(extended_json("QInt8", "QFloat16", {{"ActivationScaled", true}})),
                  "ActivationScaled takes effect only with float16 or bfloat16 activations,"));
  EXPECT_TRUE(has(error(extended_json("QInt8", "QInt8", {{"FloatQDQAsCustomOps", true}})),
                  "FloatQDQAsCustomOps takes effect only with float16 or bfloat16,"));
  // Quark's float16 op ignores the zero point: a scaled float16 range must be symmetric.
  EXPECT_TRUE(has(error(extended_json("QFloat16", "QFloat16", {{"ActivationScaled", true}})),
                  "ActivationScaled with float16 activations needs ActivationSymmetric true"));
  EXPECT_TRUE(has(error(extended_json("QFloat16", "QFloat16", {{"WeightScaled", true}, {"WeightSymmetric", false}})),
                  "WeightScaled with float16 weights needs WeightSymmetric true"));
  EXPECT_TRUE(has(error(extended_json("QInt8", "QBFloat16", {{"BF16WithClip", true}})),
                  "BF16WithClip takes effect only with bfloat16 activations,"));
  EXPECT_TRUE(has(error(extended_json("QFloat16", "QFloat16", {{"EnableVaimlBF16", true}})),
                  "EnableVaimlBF16 takes effect only with bfloat16,"));
  EXPECT_EQ(error(extended_json("QBFloat16", "QBFloat16", {{"EnableVaimlBF16", true}, {"BF16QDQToCast", false}})),
            "extra options EnableVaimlBF16 true and BF16QDQToCast false: EnableVaimlBF16 removes the Casts of the "
            "bfloat16 Cast form, which BF16QDQToCast false does not write");
  // A type asked for by NodePrecision is enough; false values ask for nothing and are accepted.
  EXPECT_NO_THROW(config_from_json(
      extended_json("QInt8", "QInt8", {{"NodePrecision", {{"conv", "QBFloat16"}}}, {"BF16WithClip", true}})));
  EXPECT_NO_THROW(config_from_json(extended_json(
      "QInt8", "QInt8", {{"BF16WithClip", false}, {"EnableVaimlBF16", false}, {"BF16QDQToCast", false}})));
}

}  // namespace
}  // namespace onnxptq::quant
