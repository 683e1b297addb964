#include "support/accuracy_models.h"

#include "support/pass_check.h"

namespace onnxptq::testing {

ir::Model outlier_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {1, 2, 6, 6});
  g.add_input(x);
  ir::Value* w1 = add_random_initializer(g, "w1", {4, 2, 1, 1}, 1);
  std::vector<float> w2v(16);
  for (size_t o = 0; o < 4; ++o)
    for (size_t i = 0; i < 4; ++i) w2v[o * 4 + i] = (o == 0 ? 8.0f : 0.02f) * ((i + o) % 2 ? 1.0f : -0.7f);
  ir::Value* w2 = g.add_value("w2");
  g.set_initializer(w2, ir::Tensor::from_values<float>({4, 4, 1, 1}, w2v));
  ir::Value* w3 = g.add_value("w3");
  g.set_initializer(w3, ir::Tensor::from_values<float>({2, 4, 1, 1}, std::vector<float>{0.01f, 1, -1, 1, 0.01f, -1, 1, 1}));
  ir::Value* a = g.add_value("a");
  ir::Value* c = g.add_value("c");
  ir::Value* t = g.add_value("t");
  ir::Value* y = g.add_value("y");
  g.add_node("Conv", {x, w1}, {a}, "conv1");
  g.add_node("Conv", {a, w2}, {c}, "conv2");
  g.add_node("Tanh", {c}, {t}, "tanh");
  g.add_node("Conv", {t, w3}, {y}, "conv3");
  g.add_output(y);
  return m;
}

std::unique_ptr<DataReader> samples(const ir::Model& m, size_t count) {
  calib::RandomReaderOptions o;
  o.count = count;
  o.seed = 7;
  o.ranges["x"] = {-1.0, 1.0};
  return calib::make_random_reader(m.graph->fed_inputs(), o);
}

quant::QuantConfig qdq_config() {
  quant::QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_symmetric = true;  // no activation is removed: plans of one node match whole-model plans
  c.calib.threads = 1;
  return c;
}

}  // namespace onnxptq::testing
