// infer_shapes: every value gets a known element type and rank: libonnx's static inference first
// (keeping the model's symbolic dims where it propagates them), then what a run of the engine on
// one random sample shows for the values static inference could not type.
#include <map>
#include <random>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "passes/onnx_bridge.h"
#include "passes/pipeline.h"

namespace onnxptq::passes {
namespace {

bool dim_known(const ir::Dim& d) { return d.has_value || !d.param.empty(); }

bool type_complete(const ir::ValueType& t) {
  return t.kind == ir::ValueType::Kind::Other ||
         (t.is_tensor() && t.elem_type != ir::DataType::Undefined && t.has_shape);
}

// Merges what `from` knows into `to` where `to` knows less (never overriding what `to` says);
// true when `to` changed.
bool merge_type(ir::ValueType& to, const ir::ValueType& from) {
  if (from.kind == ir::ValueType::Kind::Other) {
    if (to.kind != ir::ValueType::Kind::None) return false;
    to = from;
    return true;
  }
  if (!from.is_tensor() || to.kind == ir::ValueType::Kind::Other) return false;
  bool changed = false;
  if (to.kind == ir::ValueType::Kind::None) {
    to.kind = ir::ValueType::Kind::Tensor;
    changed = true;
  }
  if (to.elem_type == ir::DataType::Undefined && from.elem_type != ir::DataType::Undefined) {
    to.elem_type = from.elem_type;
    changed = true;
  }
  if (!from.has_shape) return changed;
  if (!to.has_shape) {
    to.has_shape = true;
    to.shape = from.shape;
    return true;
  }
  if (to.shape.size() != from.shape.size()) return changed;  // a disagreement: ours stands
  for (size_t i = 0; i < to.shape.size(); ++i)
    if (!dim_known(to.shape[i]) && dim_known(from.shape[i])) {
      to.shape[i] = from.shape[i];
      changed = true;
    }
  return changed;
}

// Sets what `type` adds to a node output of the main graph; it is written as value_info
// unless the graph's interface already carries it.
bool annotate(ir::Graph& graph, ir::Value* value, const ir::ValueType& type) {
  if (!merge_type(value->type, type)) return false;
  if (!graph.is_input(value) && !graph.is_output(value) && !value->has_initializer()) graph.add_value_info(value);
  return true;
}

template <class Fn>
void for_each_node_output(ir::Graph& graph, Fn fn) {
  for (const auto& node : graph.nodes())
    for (ir::Value* v : node->outputs())
      if (v) fn(node.get(), v);
}

size_t untyped_count(ir::Graph& graph) {
  size_t n = 0;
  for_each_node_output(graph, [&](ir::Node*, ir::Value* v) { n += !type_complete(v->type); });
  return n;
}

size_t infer_with_onnx(ir::Model& model, PassContext& context) {
  ir::Model inferred;
  try {
    inferred = onnx_infer_shapes(model);
  } catch (const Error&) {
    // Declared intermediate types may contradict the graph: infer again from the interface only.
    ir::Model bare = ir::clone_model(model);
    for (ir::Value* v : std::vector<ir::Value*>(bare.graph->value_info())) v->type = {};
    try {
      inferred = onnx_infer_shapes(bare);
    } catch (const Error& e) {
      context.log.push_back(std::string("infer_shapes: ") + e.what() + "; static shapes left as they were");
      return 0;
    }
  }
  size_t changed = 0;
  for_each_node_output(*model.graph, [&](ir::Node*, ir::Value* v) {
    if (const ir::Value* t = inferred.graph->find_value(v->name())) changed += annotate(*model.graph, v, t->type);
  });
  return changed;
}

// The sample's shape for each fed input: given dims, else the model's, a dynamic dim being 1 in
// front (batch) and 64 elsewhere (image sides, sequence lengths: large enough for strided models).
std::map<std::string, ir::Tensor> sample_feeds(const engine::Session& session, const PassContext& context) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : session.inputs()) {
    if (!v->type.is_tensor() || !v->type.has_shape)
      throw Error("input '" + v->name() + "' has no known rank: give its shape (--shape " + v->name() + "=AxB...)");
    std::vector<int64_t> dims;
    auto given = context.input_shapes.find(v->name());
    if (given != context.input_shapes.end()) {
      dims = given->second;
      if (dims.size() != v->type.shape.size())
        throw Error("the shape given for input '" + v->name() + "' has rank " + std::to_string(dims.size()) +
                    "; the model says " + v->type.to_string());
    } else {
      for (const ir::Dim& d : v->type.shape) dims.push_back(d.has_value ? d.value : dims.empty() ? 1 : 64);
    }
    ir::Tensor t(v->type.elem_type, dims);  // zeros: valid indices and sizes for integer inputs
    if (v->type.elem_type == ir::DataType::Float)
      for (float& x : t.mutable_values<float>()) x = uniform(rng);
    feeds[v->name()] = std::move(t);
  }
  return feeds;
}

bool has_dynamic_input(const ir::Graph& graph) {
  for (const ir::Value* v : graph.fed_inputs())
    if (!v->type.static_shape()) return true;
  return false;
}

// Element types and ranks the engine sees on one sample; the dims too when no input is dynamic
// (with dynamic inputs one sample's sizes are not the model's).
size_t infer_from_run(ir::Model& model, PassContext& context) {
  std::map<std::string, ir::ValueType> seen;
  bool exact = !has_dynamic_input(*model.graph) && context.input_shapes.empty();
  auto record = [&](const std::string& name, const ir::Tensor& t) {
    ir::ValueType type = ir::ValueType::tensor(t.dtype(), t.dims());
    if (!exact)
      for (ir::Dim& d : type.shape) d = ir::Dim{};
    seen[name] = type;
  };
  try {
    engine::SessionOptions options;
    options.optimize = false;  // every node output as ONNX defines it
    options.constant_transform = [&](const std::string& name, ir::Tensor& t) { record(name, t); };
    engine::Session session(model, options);
    engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) { record(name, t); };
    session.run_for_hooks(sample_feeds(session, context), {&observe});
  } catch (const std::exception& e) {  // onnxptq::Error, or out of memory at a large default size
    context.log.push_back(std::string("infer_shapes: the engine's sample run failed (") + e.what() +
                          "); values static inference could not type stay unknown");
    return 0;
  }
  size_t changed = 0;
  for_each_node_output(*model.graph, [&](ir::Node*, ir::Value* v) {
    auto it = seen.find(v->name());
    if (it != seen.end() && !type_complete(v->type)) changed += annotate(*model.graph, v, it->second);
  });
  return changed;
}

// ORT's guess_output_rank: an output nothing could type gets the type and rank of input 0.
size_t guess_output_ranks(ir::Model& model) {
  size_t changed = 0;
  for (ir::Node* node : model.graph->topological_order()) {
    const ir::Value* first = node->input(0);
    if (!first || !first->type.is_tensor()) continue;
    ir::ValueType guess = first->type;
    for (ir::Dim& d : guess.shape) d = ir::Dim{};
    for (ir::Value* v : node->outputs())
      if (v && !type_complete(v->type)) changed += annotate(*model.graph, v, guess);
  }
  return changed;
}

}  // namespace

bool infer_shapes(ir::Model& model, PassContext& context) {
  size_t from_onnx = context.onnx_shape ? infer_with_onnx(model, context) : 0;
  size_t from_run = context.engine_shape && untyped_count(*model.graph) ? infer_from_run(model, context) : 0;
  size_t guessed = context.guess_output_rank ? guess_output_ranks(model) : 0;
  size_t left = untyped_count(*model.graph);
  if (from_onnx + from_run + guessed > 0 || left > 0)
    context.log.push_back("infer_shapes: " + std::to_string(from_onnx) + " values typed by ONNX inference, " +
                          std::to_string(from_run) + " from the engine's sample run" +
                          (context.guess_output_rank ? ", " + std::to_string(guessed) + " guessed" : "") + "; " +
                          std::to_string(left) + " without element type or rank");
  return from_onnx + from_run + guessed > 0;
}

}  // namespace onnxptq::passes
