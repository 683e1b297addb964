#include "accuracy/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/kernel.h"
#include "engine/session.h"
#include "onnxptq/error.h"
#include "quant/simulate.h"

namespace onnxptq::accuracy {

void OutputError::add(const ir::Tensor& reference, const ir::Tensor& value, const std::string& what) {
  if (reference.dims() != value.dims())
    throw Error(what + ": the output has shape " + ir::dims_to_string(value.dims()) + ", the float model's " +
                ir::dims_to_string(reference.dims()));
  ir::Tensor a = reference.dtype() == ir::DataType::Float ? reference : engine::as_float32(reference);
  ir::Tensor b = value.dtype() == ir::DataType::Float ? value : engine::as_float32(value);
  std::span<const float> x = a.values<float>(), y = b.values<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    double d = static_cast<double>(x[i]) - y[i];
    signal_ += static_cast<double>(x[i]) * x[i];
    noise_ += d * d;
  }
}

double OutputError::sqnr_db() const {
  if (std::isnan(noise_)) return -std::numeric_limits<double>::infinity();  // a NaN is the worst error
  if (noise_ == 0) return std::numeric_limits<double>::infinity();
  return 10 * std::log10(signal_ / noise_);
}

ReferenceOutputs reference_outputs(const ir::Model& model, DataReader& reader, size_t output_index,
                                   size_t max_samples, int threads) {
  size_t outputs = model.graph->outputs().size();
  if (output_index >= outputs)
    throw Error("output index " + std::to_string(output_index) + ": the model has " + std::to_string(outputs) +
                " output" + (outputs == 1 ? "" : "s"));
  engine::SessionOptions options;
  options.threads = threads;
  engine::Session session(model, options);
  ReferenceOutputs r;
  r.output_index = output_index;
  while (max_samples == 0 || r.feeds.size() < max_samples) {
    std::optional<Feed> feed = reader.next();
    if (!feed) break;
    try {
      r.outputs.push_back(std::move(session.run(*feed).at(output_index)));
    } catch (const Error& e) {
      throw Error("sample " + std::to_string(r.feeds.size()) + " of " + reader.describe() + ": " + e.what());
    }
    r.feeds.push_back(std::move(*feed));
  }
  if (r.feeds.empty()) throw Error(reader.describe() + " gave no sample to measure the output error on");
  return r;
}

quant::Plan plan_of_node(const quant::Plan& plan, const ir::Graph& graph, const std::string& node_name) {
  const ir::Node* node = nullptr;
  for (const auto& n : graph.nodes())
    if (n->name == node_name) node = n.get();
  if (!node) throw Error("node '" + node_name + "' is not in the model");
  quant::Plan sub;
  auto take = [&](const std::string& name) {
    const quant::TensorPlan* t = plan.find(name);
    if (!t || sub.find(name)) return;
    quant::TensorPlan copy = *t;
    if (copy.role == quant::Role::Activation && !copy.shared_from.empty()) {
      const quant::TensorPlan& provider = plan.provider(name);
      copy.type = provider.type;
      copy.params = provider.params;
      copy.pos = provider.pos;
      copy.shared_from.clear();
    }
    sub.index[name] = sub.tensors.size();
    sub.tensors.push_back(std::move(copy));
    if (plan.removed_activations.count(name)) sub.removed_activations.insert(name);
  };
  for (const ir::Value* v : node->inputs())
    if (v) take(v->name());
  for (const ir::Value* v : node->outputs()) {
    if (!v) continue;
    take(v->name());
    // An activation removed after this node: the node writes its output, whose Q/DQ clips.
    for (const ir::Use& use : v->uses())
      if (const ir::Value* out = use.node->outputs().empty() ? nullptr : use.node->output(0))
        if (plan.removed_activations.count(out->name())) take(out->name());
  }
  sub.quantized_nodes = {node_name};
  return sub;
}

std::vector<NodeSensitivity> rank_nodes_alone(const ir::Model& model, const quant::Plan& plan,
                                              const quant::QuantConfig& config, const ReferenceOutputs& reference,
                                              int threads) {
  std::vector<NodeSensitivity> ranked;
  for (const std::string& name : plan.quantized_nodes) {
    quant::Plan sub = plan_of_node(plan, *model.graph, name);
    NodeSensitivity s{.node = name, .op_type = "", .sqnr_db = std::numeric_limits<double>::infinity()};
    for (const auto& n : model.graph->nodes())
      if (n->name == name) s.op_type = n->op_type;
    if (!sub.tensors.empty()) {
      quant::Simulation simulation(model, sub, config, threads);
      OutputError error;
      for (size_t i = 0; i < reference.feeds.size(); ++i)
        error.add(reference.outputs[i], simulation.run(reference.feeds[i]).at(reference.output_index),
                  "sample " + std::to_string(i));
      s.sqnr_db = error.sqnr_db();
    }
    ranked.push_back(std::move(s));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const NodeSensitivity& a, const NodeSensitivity& b) { return a.sqnr_db < b.sqnr_db; });
  return ranked;
}

}  // namespace onnxptq::accuracy
