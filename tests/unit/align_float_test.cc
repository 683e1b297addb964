// Quark's float-scale alignment (its align_quantize_info) on tiny graphs: Concat inputs
// take the output's parameters (over as many sweeps as a chain needs), pool outputs the input's,
// Pad inputs the output's, and AdjustBiasScale requantizes an int32 bias whose input scale moved,
// checked against Quark's formula (s_b = float32(s_in * s_w), q = rne(b / s_b)) computed here.
#include "quant/align_float.h"

#include <gtest/gtest.h>

#include <cmath>

#include "quant/export.h"
#include "quant/simulate.h"
#include "support/export_models.h"
#include "support/pass_check.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;
using testing::add_step_initializer;

// x -> ConvA -> a -> ConvC -> d -> Pad(5) -> pd (output: a wider range than d's)
// x -> ConvB (5x the weights) -> b;  Concat(a, b) -> cc -> Concat(cc, e = ConvE(x)) -> c2 -> GlobalAveragePool -> g
// (output)
ir::Model branches() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  g.name = "test";  // the ONNX checker wants one
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1, 2, 5, 5});
  g.add_input(x);
  auto v = [&](const char* name) { return g.add_value(name); };
  g.add_node("Conv", {x, add_step_initializer(g, "wa", {3, 2, 1, 1}, 0.1f), add_step_initializer(g, "ba", {3}, 0.05f)},
             {v("a")}, "conv_a");
  g.add_node("Conv",
             {x, add_step_initializer(g, "wb", {3, 2, 1, 1}, 0.5f, 3), add_step_initializer(g, "bb", {3}, 0.2f)},
             {v("b")}, "conv_b");
  g.add_node("Conv",
             {x, add_step_initializer(g, "we", {2, 2, 1, 1}, 0.9f, 5), add_step_initializer(g, "be", {2}, 0.3f)},
             {v("e")}, "conv_e");
  g.add_node("Conv",
             {g.find_value("a"), add_step_initializer(g, "wc", {2, 3, 1, 1}, 0.3f, 1),
              add_step_initializer(g, "bc", {2}, 0.07f)},
             {v("d")}, "conv_c");
  ir::Node* c1 = g.add_node("Concat", {g.find_value("a"), g.find_value("b")}, {v("cc")}, "concat");
  c1->set_attribute(ir::Attribute::of_int("axis", 1));
  ir::Node* c2 = g.add_node("Concat", {g.find_value("cc"), g.find_value("e")}, {v("c2")}, "concat2");
  c2->set_attribute(ir::Attribute::of_int("axis", 1));
  g.add_node("GlobalAveragePool", {g.find_value("c2")}, {v("g")}, "gap");
  ir::Value* pads = g.add_value("pads");
  g.set_initializer(pads, ir::Tensor::from_values<int64_t>({8}, std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1}));
  ir::Value* value = g.add_value("pad_value");
  g.set_initializer(value, ir::Tensor::from_values<float>({}, std::vector<float>{5.0f}));
  g.add_node("Pad", {g.find_value("d"), pads, value}, {v("pd")}, "pad");
  g.find_value("pd")->type = ir::ValueType::tensor(DataType::Float, {1, 2, 7, 7});
  g.find_value("g")->type = ir::ValueType::tensor(DataType::Float, {1, 8, 1, 1});
  g.add_output(g.find_value("pd"));
  g.add_output(g.find_value("g"));
  return m;
}

QuantConfig a8w8() {
  QuantConfig c;
  c.format = QuantFormat::ExtendedQDQ;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_symmetric = true;
  c.op_types_to_quantize = {"Conv", "Concat", "GlobalAveragePool", "Pad"};
  c.calib.threads = 2;
  return c;
}

const qmath::ScaleZeroPoint& params_of(const Plan& p, const std::string& name) { return p.provider(name).params.at(0); }

bool same(const qmath::ScaleZeroPoint& a, const qmath::ScaleZeroPoint& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

TEST(AlignFloat, ConcatInputsTakeTheOutputsParametersAcrossSweeps) {
  ir::Model m = branches();
  QuantConfig c = a8w8();
  Plan before = testing::calibrated_plan(m, c);
  EXPECT_FALSE(same(params_of(before, "a"), params_of(before, "c2")));
  EXPECT_TRUE(align_float_scales(before, m, c).empty());  // every Align* off by default: nothing to do

  c.align_concat = true;
  Plan p = testing::calibrated_plan(m, c);
  std::vector<AlignChange> changes = align_float_scales(p, m, c);
  // concat2 aligns cc and e to c2 after concat aligned a and b to cc: a second sweep carries c2's
  // parameters back to a and b.
  for (const char* name : {"a", "b", "cc", "e"}) EXPECT_TRUE(same(params_of(p, name), params_of(p, "c2"))) << name;
  EXPECT_TRUE(same(params_of(p, "c2"), params_of(before, "c2")));  // the outputs keep their own
  // cc changed after concat had aligned a and b to it, so a later change aligns a or b again.
  size_t cc_change = changes.size(), last_ab = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    EXPECT_EQ(changes[i].rule, changes[i].tensor == "bc" ? "AdjustBiasScale" : "AlignConcat") << changes[i].tensor;
    if (changes[i].tensor == "cc") cc_change = i;
    if (changes[i].tensor == "a" || changes[i].tensor == "b") last_ab = i;
  }
  ASSERT_LT(cc_change, changes.size());
  EXPECT_GT(last_ab, cc_change);
}

TEST(AlignFloat, AdjustBiasScaleRequantizesTheBiasOfAMovedInput) {
  ir::Model m = branches();
  QuantConfig c = a8w8();
  c.align_concat = true;
  c.adjust_bias_scale = false;
  Plan stale = testing::calibrated_plan(m, c);
  align_float_scales(stale, m, c);
  c.adjust_bias_scale = true;
  Plan p = testing::calibrated_plan(m, c);
  align_float_scales(p, m, c);

  // conv_c reads a, whose scale AlignConcat changed.
  const float s_in = static_cast<float>(params_of(p, "a").scale);
  const float s_w = static_cast<float>(p.find("wc")->params.at(0).scale);
  const float s_b = s_in * s_w;  // float32, as Quark's bias scale
  const TensorPlan& bc = *p.find("bc");
  EXPECT_EQ(bc.params.at(0).scale, static_cast<double>(s_b));
  EXPECT_NE(stale.find("bc")->params.at(0).scale, static_cast<double>(s_b));  // left stale without AdjustBiasScale
  auto floats = m.graph->find_value("bc")->initializer().values<float>();
  auto ints = bc.data->values<int32_t>();
  for (size_t i = 0; i < floats.size(); ++i)
    EXPECT_EQ(ints[i], static_cast<int32_t>(std::nearbyint(static_cast<double>(floats[i]) / static_cast<double>(s_b))))
        << i;
}

TEST(AlignFloat, PoolOutputsTakeTheInputsAndPadInputsTheOutputs) {
  ir::Model m = branches();
  QuantConfig c = a8w8();
  Plan before = testing::calibrated_plan(m, c);
  EXPECT_FALSE(same(params_of(before, "g"), params_of(before, "c2")));
  EXPECT_FALSE(same(params_of(before, "d"), params_of(before, "pd")));
  c.align_pool = true;
  c.align_pad = true;
  Plan p = testing::calibrated_plan(m, c);
  align_float_scales(p, m, c);
  EXPECT_TRUE(same(params_of(p, "g"), params_of(before, "c2")));  // input -> output
  EXPECT_TRUE(same(params_of(p, "d"), params_of(before, "pd")));  // output -> input
  EXPECT_TRUE(same(params_of(p, "pd"), params_of(before, "pd")));
}

TEST(AlignFloat, TheExportCarriesTheAlignedParametersAndSimulationEqualsIt) {
  ir::Model m = branches();
  QuantConfig c = a8w8();
  c.align_concat = c.align_pool = c.align_pad = true;
  Plan p = testing::calibrated_plan(m, c);
  align_float_scales(p, m, c);
  ir::Model q = export_model(m, p, c);
  auto scale = [&](const std::string& name) { return q.graph->find_value(name)->initializer().values<float>()[0]; };
  EXPECT_EQ(scale("a_scale"), scale("c2_scale"));
  EXPECT_EQ(scale("bc_quantized_scale"), scale("a_scale") * scale("wc_scale"));
  auto feeds = testing::random_feeds(m, 4);
  Simulation sim(m, p, c, 2);
  std::vector<ir::Tensor> s = sim.run(feeds), e = testing::run_model(q, feeds, false);
  ASSERT_EQ(s.size(), e.size());
  for (size_t i = 0; i < s.size(); ++i) {
    auto x = s[i].values<float>(), y = e[i].values<float>();
    size_t differ = 0;
    for (size_t k = 0; k < x.size(); ++k) differ += x[k] != y[k];
    EXPECT_EQ(differ, 0u) << "output " << i;
  }
}

}  // namespace
}  // namespace onnxptq::quant
