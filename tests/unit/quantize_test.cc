// quantize_static's steps before the plan: RemoveInputInit.
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "calib/data_reader.h"

namespace onnxptq::quant {
namespace {

// x -> Conv(w) -> y, with the weight w also listed as a graph input (as old exporters write).
ir::Model conv_with_weight_input() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 2, 3, 3});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, ir::Tensor::from_values<float>({2, 2, 1, 1}, std::vector<float>{1, -2, 0.5f, 0.25f}));
  w->type = ir::ValueType::tensor(ir::DataType::Float, {2, 2, 1, 1});
  g.add_input(w);
  ir::Value* y = g.add_value("y");
  g.add_node("Conv", {x, w}, {y}, "conv");
  g.add_output(y);
  return m;
}

bool has_input(const ir::Model& m, const std::string& name) {
  for (const ir::Value* v : m.graph->inputs())
    if (v->name() == name) return true;
  return false;
}

TEST(QuantizeStatic, RemoveInputInitMakesInitializerInputsWeights) {
  ir::Model m = conv_with_weight_input();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.calib.threads = 1;
  calib::RandomReaderOptions ro;
  ro.count = 2;
  auto reader = calib::make_random_reader(m.graph->fed_inputs(), ro);
  QuantizeResult r = quantize_static(m, *reader, c);  // RemoveInputInit: true, the seeds' default
  EXPECT_FALSE(has_input(r.model, "w"));
  ASSERT_TRUE(r.plan.find("w"));
  EXPECT_EQ(r.plan.find("w")->role, Role::Weight);
  EXPECT_TRUE(has_input(m, "w"));  // the caller's model is not changed

  apply_extra_option(c, "RemoveInputInit", nlohmann::json(false));
  reader = calib::make_random_reader(m.graph->fed_inputs(), ro);
  r = quantize_static(m, *reader, c);
  EXPECT_TRUE(has_input(r.model, "w"));
}

}  // namespace
}  // namespace onnxptq::quant
