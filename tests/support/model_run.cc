#include "support/model_run.h"

#include <algorithm>
#include <cmath>

namespace onnxptq::testing {

std::vector<ir::Tensor> run_model(const ir::Model& model, const std::map<std::string, ir::Tensor>& feeds, bool optimize,
                                  engine::SessionOptions options, const engine::TensorTransform* transform) {
  options.optimize = optimize;
  options.threads = 2;
  engine::Session session(model, std::move(options));
  engine::RunHooks hooks;
  hooks.transform = transform;
  return session.run(feeds, hooks);
}

size_t count_ops(const ir::Model& model, std::string_view op_type) {
  return std::count_if(model.graph->nodes().begin(), model.graph->nodes().end(),
                       [&](const auto& n) { return n->op_type == op_type; });
}

const ir::Node* producer(const ir::Model& model, const std::string& name) {
  const ir::Value* v = model.graph->find_value(name);
  return v ? v->producer() : nullptr;
}

double range_relative_error(const ir::Tensor& expected, const ir::Tensor& got) {
  auto e = expected.values<float>();
  auto g = got.values<float>();
  if (e.empty()) return 0;
  auto [lo, hi] = std::minmax_element(e.begin(), e.end());
  double range = std::max(static_cast<double>(*hi - *lo), 1e-12);
  double worst = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    double d = std::fabs(static_cast<double>(e[i]) - g[i]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst / range;
}

}  // namespace onnxptq::testing
