#include "support/pass_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace onnxptq::testing {

ir::Tensor random_float(std::vector<int64_t> dims, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  ir::Tensor t(ir::DataType::Float, std::move(dims));
  for (float& v : t.mutable_values<float>()) v = dist(rng);
  return t;
}

Feeds seeded_feeds(const ir::Model& model, uint32_t seed, const std::map<std::string, std::vector<int64_t>>& shapes) {
  Feeds feeds;
  for (const ir::Value* v : model.graph->fed_inputs()) {
    std::vector<int64_t> dims;
    if (auto it = shapes.find(v->name()); it != shapes.end()) {
      dims = it->second;
    } else {
      for (const ir::Dim& d : v->type.shape) dims.push_back(d.has_value ? d.value : 1);
    }
    feeds[v->name()] = random_float(dims, seed++);
  }
  return feeds;
}

double relative_diff(const std::vector<ir::Tensor>& expected, const std::vector<ir::Tensor>& got) {
  const double inf = std::numeric_limits<double>::infinity();
  if (expected.size() != got.size()) return inf;
  double worst = 0;
  for (size_t o = 0; o < expected.size(); ++o) {
    if (expected[o].dims() != got[o].dims() || expected[o].dtype() != got[o].dtype()) return inf;
    if (expected[o].dtype() != ir::DataType::Float) {
      if (expected[o].byte_size() != got[o].byte_size() ||
          !std::equal(expected[o].bytes().data(), expected[o].bytes().data() + expected[o].byte_size(),
                      got[o].bytes().data()))
        return inf;
      continue;
    }
    auto e = expected[o].values<float>();
    auto g = got[o].values<float>();
    if (e.empty()) continue;
    auto [lo, hi] = std::minmax_element(e.begin(), e.end());
    double range = std::max(static_cast<double>(*hi) - *lo, 1e-12);
    for (size_t i = 0; i < e.size(); ++i) {
      if (std::isnan(e[i]) != std::isnan(g[i])) return inf;
      if (std::isnan(e[i])) continue;
      worst = std::max(worst, std::fabs(static_cast<double>(e[i]) - g[i]) / range);
    }
  }
  return worst;
}

ir::Model run_pass_checked(const ir::Model& model, passes::PassFunction pass, bool expect_change, uint32_t seed,
                           const std::map<std::string, std::vector<int64_t>>& shapes) {
  ir::Model after = ir::clone_model(model);
  passes::PassContext context;
  EXPECT_EQ(pass(after, context), expect_change);
  Feeds feeds = seeded_feeds(model, seed, shapes);
  EXPECT_LE(relative_diff(run_model(model, feeds), run_model(after, feeds)), 1e-5);
  return after;
}

double smallest_range(const std::vector<ir::Tensor>& outputs) {
  double smallest = std::numeric_limits<double>::infinity();
  for (const ir::Tensor& t : outputs) {
    if (t.dtype() != ir::DataType::Float || t.size() == 0) continue;
    auto v = t.values<float>();
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    smallest = std::min(smallest, static_cast<double>(*hi) - *lo);
  }
  return smallest;
}

ir::Value* add_random_initializer(ir::Graph& graph, const std::string& name, std::vector<int64_t> dims, uint32_t seed,
                                  float lo, float hi) {
  ir::Value* v = graph.add_value(name);
  v->type = ir::ValueType::tensor(ir::DataType::Float, dims);
  graph.set_initializer(v, random_float(std::move(dims), seed, lo, hi));
  return v;
}

ir::Value* add_step_initializer(ir::Graph& graph, const std::string& name, std::vector<int64_t> dims, float step,
                                int offset) {
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = step * static_cast<float>(static_cast<int>((i * 7 + offset) % 11) - 5);
  ir::Value* value = graph.add_value(name);
  graph.set_initializer(value, ir::Tensor::from_values<float>(std::move(dims), v));
  return value;
}

ir::Value* add_float_value(ir::Graph& graph, const std::string& name, const std::vector<int64_t>& dims) {
  ir::Value* v = graph.add_value(name);
  v->type = ir::ValueType::tensor(ir::DataType::Float);
  v->type.has_shape = true;
  for (int64_t d : dims) v->type.shape.push_back(d < 0 ? ir::Dim::symbol("N") : ir::Dim::of(d));
  return v;
}

ir::Value* output(ir::Graph& graph, const std::string& name) {
  ir::Value* v = graph.add_value(name);
  graph.add_output(v);
  return v;
}

ir::Value* scalar(ir::Graph& graph, const std::string& name, float value) {
  ir::Value* v = graph.add_value(name);
  graph.set_initializer(v, ir::Tensor::from_values<float>({}, std::vector<float>{value}));
  return v;
}

ir::Value* ints(ir::Graph& graph, const std::string& name, const std::vector<int64_t>& values) {
  ir::Value* v = graph.add_value(name);
  graph.set_initializer(v, ir::Tensor::from_values<int64_t>({static_cast<int64_t>(values.size())}, values));
  return v;
}

}  // namespace onnxptq::testing
