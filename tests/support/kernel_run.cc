#include "support/kernel_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "engine/session.h"
#include "onnxptq/error.h"

namespace onnxptq::kernel_test {

ir::Tensor f32(std::vector<int64_t> dims, std::vector<float> v) {
  return ir::Tensor::from_values<float>(std::move(dims), v);
}
ir::Tensor i32(std::vector<int64_t> dims, std::vector<int32_t> v) {
  return ir::Tensor::from_values<int32_t>(std::move(dims), v);
}
ir::Tensor i64(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return ir::Tensor::from_values<int64_t>(std::move(dims), v);
}

ir::Tensor random_f32(const std::vector<int64_t>& dims, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& x : v) x = dist(gen);
  return f32(dims, v);
}

std::vector<float> floats(const ir::Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}

std::vector<ir::Tensor> run_all(const Op& op, const std::vector<std::optional<ir::Tensor>>& inputs) {
  ir::Model m;
  m.set_opset("", op.opset);
  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> ins;
  std::map<std::string, ir::Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      ins.push_back(nullptr);
      continue;
    }
    ir::Value* v = g.add_value("in" + std::to_string(i));
    if (op.constants.count(i)) {
      g.set_initializer(v, *inputs[i]);
    } else {
      g.add_input(v);
      feeds["in" + std::to_string(i)] = *inputs[i];
    }
    ins.push_back(v);
  }
  std::vector<ir::Value*> outs;
  for (int i = 0; i < op.outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i)));
  ir::Node* node = g.add_node(op.type, ins, outs, "node");
  for (const Attr& a : op.attrs) {
    if (auto* i = std::get_if<int64_t>(&a.value))
      node->set_attribute(ir::Attribute::of_int(a.name, *i));
    else if (auto* f = std::get_if<float>(&a.value))
      node->set_attribute(ir::Attribute::of_float(a.name, *f));
    else if (auto* s = std::get_if<std::string>(&a.value))
      node->set_attribute(ir::Attribute::of_string(a.name, *s));
    else if (auto* is = std::get_if<std::vector<int64_t>>(&a.value))
      node->set_attribute(ir::Attribute::of_ints(a.name, *is));
    else if (auto* fs = std::get_if<std::vector<float>>(&a.value))
      node->set_attribute(ir::Attribute::of_floats(a.name, *fs));
    else if (auto* ss = std::get_if<std::vector<std::string>>(&a.value)) {
      ir::Attribute strings;
      strings.name = a.name;
      strings.type = ir::AttrType::Strings;
      strings.strings = *ss;
      node->set_attribute(std::move(strings));
    } else
      node->set_attribute(ir::Attribute::of_tensor(a.name, std::get<ir::Tensor>(a.value)));
  }
  for (ir::Value* v : outs) g.add_output(v);
  engine::SessionOptions options;
  options.threads = op.threads;
  engine::Session session(m, options);
  return session.run(feeds);
}

ir::Tensor run_op(const Op& op, const std::vector<std::optional<ir::Tensor>>& inputs) { return run_all(op, inputs)[0]; }

std::string op_error(const Op& op, const std::vector<std::optional<ir::Tensor>>& inputs) {
  try {
    run_all(op, inputs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_near_all(const std::vector<double>& expected, const ir::Tensor& got, double rtol, double atol) {
  ASSERT_EQ(got.dtype(), ir::DataType::Float);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), got.size());
  auto g = got.values<float>();
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i]))
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    else if (std::isinf(expected[i]))
      EXPECT_EQ(expected[i], g[i]) << "element " << i;
    else
      EXPECT_NEAR(expected[i], g[i], atol + rtol * std::fabs(expected[i])) << "element " << i;
  }
}

}  // namespace onnxptq::kernel_test
