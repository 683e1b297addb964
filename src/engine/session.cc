#include "engine/session.h"

#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "engine/fusion.h"
#include "engine/kernel.h"
#include "engine/layout.h"
#include "engine/parallel.h"
#include "onnxptq/error.h"

namespace onnxptq::engine {
namespace {

std::string where(const ir::Node& node, int64_t opset) {
  std::string op = node.domain.empty() || node.domain == "ai.onnx" ? node.op_type : node.domain + "." + node.op_type;
  return "node '" + node.name + "' (" + op + ", opset " + std::to_string(opset) + ")";
}

// Errors from kernels say what is wrong with the data; the node they belong to goes in front.
template <class F>
auto with_node_context(const ir::Node& node, int64_t opset, F&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(where(node, opset) + ": " + e.what(), e.kind());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(where(node, opset) + ": " + e.what());
  }
}

}  // namespace

// One graph compiled for running: the main graph, or a subgraph of If/Loop/Scan.
class GraphExecutor : public GraphRunner {
 public:
  // Hooks see each value under its own name, except those in `shown_as`: values the engine
  // made for itself (engine/layout.h) are hidden (no names) or stand for model values that hold
  // the same elements (SessionOptions::hooks_ignore_layout).
  using ShownAs = std::unordered_map<std::string, std::vector<std::string>>;
  GraphExecutor(const ir::Model& model, const ir::Graph& graph, const std::vector<std::string>& outer_names,
                const SessionOptions& options, const ShownAs& shown_as = {});

  std::vector<Value> run(const RunContext& ctx, std::span<const Value* const> outer,
                         std::span<const Value* const> inputs) const override {
    static const RunHooks none;
    return run_with_hooks(ctx, outer, inputs, ctx.hooks ? *ctx.hooks : none);
  }

  std::vector<Value> run_with_hooks(const RunContext& ctx, std::span<const Value* const> outer,
                                    std::span<const Value* const> inputs, const RunHooks& hooks) const;

 private:
  struct Step {
    const ir::Node* node;
    int64_t opset;
    std::unique_ptr<Kernel> kernel;
    const ValueKernel* value_kernel;  // the kernel, when it takes values other than tensors
    std::vector<int> inputs;   // -1: omitted
    std::vector<int> outputs;  // -1: omitted
    std::vector<int> release;  // slots whose last use is this step
  };

  int slot_of(const std::string& name) const;
  int new_slot(const std::string& name);
  void add_node(const ir::Node& node, const SessionOptions& options);
  // Buffers of the tensor path, reused from step to step.
  struct TensorScratch {
    std::vector<const Tensor*> in;
    std::vector<Tensor> out;
  };
  // Runs a step's kernel: a ValueKernel on the values, any other on the tensors they hold.
  void run_kernel(const Step& step, const RunContext& ctx, std::span<const Value* const> in, std::span<Value> out,
                  TensorScratch& scratch) const;

  const ir::Model& model_;
  const ir::Graph& graph_;
  std::unordered_map<std::string, int> slots_;
  std::vector<std::string> slot_names_;
  std::vector<const Value*> constant_of_slot_;  // non-null for constants
  std::vector<std::unique_ptr<Value>> constants_;
  size_t outer_count_ = 0;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<Step> steps_;
  std::vector<std::vector<std::string>> hook_names_;     // per slot: the names hooks see it as
  std::vector<std::vector<std::string>> extrema_names_;  // per slot: those of them that are visible
};

int GraphExecutor::slot_of(const std::string& name) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) throw Error("value '" + name + "' is not known in graph '" + graph_.name + "'");
  return it->second;
}

int GraphExecutor::new_slot(const std::string& name) {
  int slot = static_cast<int>(slot_names_.size());
  slots_[name] = slot;
  slot_names_.push_back(name);
  constant_of_slot_.push_back(nullptr);
  return slot;
}

GraphExecutor::GraphExecutor(const ir::Model& model, const ir::Graph& graph,
                             const std::vector<std::string>& outer_names, const SessionOptions& options,
                             const ShownAs& shown_as)
    : model_(model), graph_(graph) {
  for (const std::string& name : outer_names) new_slot(name);
  outer_count_ = outer_names.size();
  for (const ir::Value* v : graph.inputs()) input_slots_.push_back(new_slot(v->name()));
  for (const ir::Value* v : graph.initializers()) {
    auto tensor = std::make_unique<Value>(v->initializer());
    if (options.constant_transform) options.constant_transform(v->name(), tensor->mutable_tensor());
    auto it = slots_.find(v->name());
    int slot = it != slots_.end() && static_cast<size_t>(it->second) >= outer_count_ ? it->second : new_slot(v->name());
    constant_of_slot_[slot] = tensor.get();  // for a graph input too: the value when none is fed
    constants_.push_back(std::move(tensor));
  }
  for (const ir::Node* node : graph.topological_order()) add_node(*node, options);
  for (const ir::Value* v : graph.outputs()) output_slots_.push_back(slot_of(v->name()));
  for (const std::string& name : slot_names_) {
    auto it = shown_as.find(name);
    hook_names_.push_back(it != shown_as.end() ? it->second : std::vector<std::string>{name});
    extrema_names_.emplace_back();
    for (const std::string& shown : hook_names_.back())
      if (options.visible.count(shown)) extrema_names_.back().push_back(shown);
  }

  // Free every produced value after its last use, unless it is an output of the graph.
  std::vector<int> last_use(slot_names_.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (int slot : steps_[s].inputs)
      if (slot >= 0) last_use[slot] = static_cast<int>(s);
    for (int slot : steps_[s].outputs)  // an output nobody reads is freed right away
      if (slot >= 0 && last_use[slot] < static_cast<int>(s)) last_use[slot] = static_cast<int>(s);
  }
  for (int slot : output_slots_) last_use[slot] = -1;
  for (size_t slot = outer_count_; slot < last_use.size(); ++slot)
    if (last_use[slot] >= 0 && !constant_of_slot_[slot])
      steps_[last_use[slot]].release.push_back(static_cast<int>(slot));
}

void GraphExecutor::add_node(const ir::Node& node, const SessionOptions& options) {
  int64_t opset = model_.opset(node.domain);
  const KernelRegistry& registry = KernelRegistry::instance();
  const KernelFactory* factory = registry.find(node.domain, node.op_type, opset);
  if (!factory) {
    if (registry.knows(node.domain, node.op_type))
      throw unsupported(where(node, opset) + ": this opset of the op is not supported");
    throw unsupported(where(node, opset) + ": no kernel for this op");
  }

  KernelInfo info{node, opset, {}, {}, {}, {}};
  info.threads = options.threads;
  Step step{&node, opset, nullptr, nullptr, {}, {}, {}};
  bool all_constant = true;
  std::vector<const Value*> constant_values;
  for (const ir::Value* v : node.inputs()) {
    int slot = v ? slot_of(v->name()) : -1;
    step.inputs.push_back(slot);
    const Value* constant = slot >= 0 ? constant_of_slot_[slot] : nullptr;
    // A graph input with an initializer can be overridden by a feed: not a constant.
    if (constant && graph_.is_input(v)) constant = nullptr;
    info.constant_inputs.push_back(constant && constant->is_tensor() ? &constant->tensor() : nullptr);
    constant_values.push_back(constant);
    info.input_types.push_back(v ? v->type : ir::ValueType{});
    all_constant = all_constant && (!v || constant);
  }
  for (const ir::Value* v : graph_.implicit_inputs(&node)) {
    info.implicit_inputs.push_back(v->name());
    step.inputs.push_back(slot_of(v->name()));
    all_constant = false;
  }
  info.compile_subgraph = [this, &options](const ir::Graph& sub, const std::vector<std::string>& outer_names) {
    return std::unique_ptr<GraphRunner>(new GraphExecutor(model_, sub, outer_names, options));
  };
  step.kernel = with_node_context(node, opset, [&] { return (*factory)(info); });
  step.value_kernel = dynamic_cast<const ValueKernel*>(step.kernel.get());

  // A node of constants only is computed now, once: shape arithmetic, Constant nodes, weights
  // given through Constant nodes (which the constant transform then sees as the weights they are).
  if (all_constant && !is_nondeterministic(node)) {
    std::vector<Value> out(node.outputs().size());
    RunContext ctx{info.prepared_threads()};
    TensorScratch scratch;
    with_node_context(node, opset, [&] { run_kernel(step, ctx, constant_values, out, scratch); });
    for (size_t i = 0; i < out.size(); ++i) {
      const ir::Value* v = node.output(i);
      if (!v) continue;
      auto tensor = std::make_unique<Value>(std::move(out[i]));
      if (options.constant_transform && tensor->is_tensor())
        options.constant_transform(v->name(), tensor->mutable_tensor());
      constant_of_slot_[new_slot(v->name())] = tensor.get();
      constants_.push_back(std::move(tensor));
    }
    return;
  }
  for (const ir::Value* v : node.outputs()) step.outputs.push_back(v ? new_slot(v->name()) : -1);
  steps_.push_back(std::move(step));
}

void GraphExecutor::run_kernel(const Step& step, const RunContext& ctx, std::span<const Value* const> in,
                               std::span<Value> out, TensorScratch& scratch) const {
  if (step.value_kernel) return step.value_kernel->run_values(ctx, in, out);
  // The tensor path: the kernel sees the tensors themselves.
  std::vector<const Tensor*>& tensors = scratch.in;
  tensors.assign(in.size(), nullptr);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i]) continue;
    if (!in[i]->is_tensor()) {
      const ir::Value* v = i < step.node->inputs().size() ? step.node->input(i) : nullptr;
      throw Error("input " + std::to_string(i) + (v ? " '" + v->name() + "'" : std::string()) + " is " +
                  in[i]->describe() + ", and the op takes tensors");
    }
    tensors[i] = &in[i]->tensor();
  }
  std::vector<Tensor>& results = scratch.out;
  results.assign(out.size(), Tensor());
  step.kernel->run(ctx, tensors, results);
  for (size_t i = 0; i < out.size(); ++i) out[i] = Value(std::move(results[i]));
}

std::vector<Value> GraphExecutor::run_with_hooks(const RunContext& ctx, std::span<const Value* const> outer,
                                                 std::span<const Value* const> inputs, const RunHooks& hooks) const {
  std::vector<Value> owned(slot_names_.size());
  std::vector<const Value*> value(slot_names_.size(), nullptr);
  for (size_t i = 0; i < slot_names_.size(); ++i) value[i] = constant_of_slot_[i];
  for (size_t i = 0; i < outer_count_; ++i) value[i] = outer[i];

  // `sink`: the extrema the kernel took of the tensor as it wrote it, if it did. Hooks see
  // tensors only: sequences and optionals are never quantized.
  auto produced = [&](int slot, const ExtremaSink* sink) {
    value[slot] = &owned[slot];
    if (!owned[slot].is_tensor()) return;
    Tensor& t = owned[slot].mutable_tensor();
    if (hooks.transform)
      for (const std::string& name : hook_names_[slot]) (*hooks.transform)(name, t);
    if (hooks.observe)
      for (const std::string& name : hook_names_[slot]) (*hooks.observe)(name, t);
    if (hooks.observe_extrema && !extrema_names_[slot].empty() &&
        (t.dtype() == DataType::Float || t.dtype() == DataType::Float16 || t.dtype() == DataType::BFloat16)) {
      Extrema e;
      if (sink && sink->taken() && t.dtype() == DataType::Float && !hooks.transform) {
        e = sink->extrema();
      } else {
        Tensor f = as_float32(t);
        e = finite_extrema(f.values<float>().data(), f.size(), ctx.threads);
      }
      for (const std::string& name : extrema_names_[slot]) (*hooks.observe_extrema)(name, t, e);
    }
  };
  for (size_t i = 0; i < input_slots_.size(); ++i) {
    int slot = input_slots_[i];
    if (i < inputs.size() && inputs[i]) value[slot] = inputs[i];
    if (!value[slot]) continue;  // an unused optional input: nothing to see
    if (hooks.transform || hooks.observe || hooks.observe_extrema) {
      owned[slot] = *value[slot];  // shares the data; a transform copies before writing
      produced(slot, nullptr);
    }
  }

  std::vector<const Value*> in;
  std::vector<Value> out;
  TensorScratch scratch;
  RunHooks body_hooks = hooks;  // a subgraph's nodes count in their If/Loop/Scan node's time
  body_hooks.time_node = nullptr;
  for (const Step& step : steps_) {
    in.assign(step.inputs.size(), nullptr);
    for (size_t i = 0; i < step.inputs.size(); ++i)
      if (step.inputs[i] >= 0) in[i] = value[step.inputs[i]];
    out.assign(step.outputs.size(), Value());
    ExtremaSink sink;
    RunContext step_ctx = ctx;
    step_ctx.hooks = hooks.time_node ? &body_hooks : &hooks;
    step_ctx.output_extrema = hooks.observe_extrema && !hooks.transform && !step.outputs.empty() &&
                                      step.outputs[0] >= 0 && !extrema_names_[step.outputs[0]].empty()
                                  ? &sink
                                  : nullptr;
    if (hooks.time_node) {
      const auto start = std::chrono::steady_clock::now();
      with_node_context(*step.node, step.opset, [&] { run_kernel(step, step_ctx, in, out, scratch); });
      (*hooks.time_node)(*step.node, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
      with_node_context(*step.node, step.opset, [&] { run_kernel(step, step_ctx, in, out, scratch); });
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      int slot = step.outputs[i];
      if (slot < 0) continue;
      owned[slot] = std::move(out[i]);
      produced(slot, i == 0 ? &sink : nullptr);
    }
    for (int slot : step.release) {
      owned[slot] = Value();
      value[slot] = nullptr;
    }
  }

  std::vector<Value> results;
  for (int slot : output_slots_) {
    if (!value[slot]) throw Error("graph '" + graph_.name + "': output '" + slot_names_[slot] + "' was not computed");
    results.push_back(*value[slot]);
  }
  return results;
}

// ------------------------------------------------------------------ Session

bool is_nondeterministic(const ir::Node& node) {
  static const std::unordered_set<std::string> ops = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                                      "RandomUniformLike", "Multinomial",   "Bernoulli"};
  return ops.count(node.op_type) > 0;
}

Session::Session(const ir::Model& model, SessionOptions options)
    : model_(ir::clone_model(model)), options_(std::move(options)) {
  if (options_.threads > kMaxThreads)
    throw Error("threads: at most " + std::to_string(kMaxThreads) + ", got " + std::to_string(options_.threads));
  if (options_.threads <= 0) options_.threads = hardware_threads();
  GraphExecutor::ShownAs shown_as;  // values made or removed by the passes below
  if (options_.optimize && KernelRegistry::instance().find(kEngineDomain, "FusedConv", 1)) {
    model_.set_opset(kEngineDomain, 1);
    auto visible = [this](const ir::Value* v) { return options_.visible.count(v->name()) > 0; };
    fold_block_quantized_constants(*model_.graph, visible);
    fuse_conv_activations(*model_.graph, visible);
    std::unordered_set<std::string> model_values;
    for (const auto& node : model_.graph->nodes())
      for (const ir::Value* v : node->outputs())
        if (v) model_values.insert(v->name());
    // After fusion, so that a convolution and its activation become one NhwcConv.
    std::map<std::string, std::string> same_elements;
    std::function<bool(const ir::Value*)> kept_in_order = visible;
    if (options_.hooks_ignore_layout) kept_in_order = [](const ir::Value*) { return false; };
    run_convolutions_nhwc(*model_.graph, kept_in_order, model_.opset(""), &same_elements);
    std::unordered_set<std::string> produced;
    for (const auto& node : model_.graph->nodes())
      for (const ir::Value* v : node->outputs())
        if (v) produced.insert(v->name());
    for (const std::string& name : produced)
      if (!model_values.count(name)) shown_as[name];  // engine-made: hidden
    // A visible value the pass removed is shown through the value now holding its elements.
    for (const std::string& name : options_.visible) {
      std::string holder = name;
      while (!model_.graph->find_value(holder) && same_elements.count(holder)) holder = same_elements.at(holder);
      if (holder == name || !model_.graph->find_value(holder)) continue;
      shown_as.try_emplace(holder, std::vector<std::string>{holder}).first->second.push_back(name);
    }
  }
  inputs_ = model_.graph->fed_inputs();
  for (const ir::Value* v : model_.graph->outputs()) outputs_.push_back(v);
  main_ = std::make_unique<GraphExecutor>(model_, *model_.graph, std::vector<std::string>{}, options_, shown_as);
}

Session::~Session() = default;

namespace {

void check_feed(const ir::Value& input, const Value& value) {
  const ir::ValueType& type = input.type;
  if (type.kind == ir::ValueType::Kind::Other && value.is_tensor())
    throw Error("input '" + input.name() + "' is " + type.to_string() + ", not a tensor: it cannot be fed " +
                value.describe());
  if (!type.is_tensor()) return;
  if (!value.is_tensor())
    throw Error("input '" + input.name() + "': expected a tensor " + type.to_string() + ", got " + value.describe());
  const Tensor& t = value.tensor();
  if (type.elem_type != DataType::Undefined && t.dtype() != type.elem_type)
    throw Error("input '" + input.name() + "': expected " + std::string(ir::data_type_name(type.elem_type)) + ", got " +
                std::string(ir::data_type_name(t.dtype())));
  if (!type.has_shape) return;
  bool fits = t.rank() == type.shape.size();
  for (size_t i = 0; fits && i < type.shape.size(); ++i)
    fits = !type.shape[i].has_value || type.shape[i].value == t.dims()[i];
  if (!fits)
    throw Error("input '" + input.name() + "': expected shape " + type.to_string() + ", got " +
                ir::dims_to_string(t.dims()));
}

}  // namespace

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& feeds, const RunHooks& hooks) const {
  std::map<std::string, Value> values(feeds.begin(), feeds.end());  // shares the tensors' data
  std::vector<Value> outputs = run_values(values, hooks);
  std::vector<Tensor> tensors;
  tensors.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_tensor())
      throw Error("output '" + outputs_[i]->name() + "' is " + outputs[i].describe() +
                  ", and only tensors can be returned");
    tensors.push_back(std::move(outputs[i].mutable_tensor()));
  }
  return tensors;
}

void Session::run_for_hooks(const std::map<std::string, Tensor>& feeds, const RunHooks& hooks) const {
  run_values(std::map<std::string, Value>(feeds.begin(), feeds.end()), hooks);
}

std::vector<Value> Session::run_values(const std::map<std::string, Value>& feeds, const RunHooks& hooks) const {
  const ir::Graph& g = *model_.graph;
  for (const auto& [name, tensor] : feeds) {
    bool known = false;
    for (const ir::Value* v : g.inputs()) known = known || v->name() == name;
    if (!known) {
      std::string names;
      for (const ir::Value* v : inputs_) names += (names.empty() ? "" : ", ") + v->name();
      throw Error("the model has no input named '" + name + "' (its inputs: " + names + ")");
    }
  }
  std::vector<const Value*> inputs;
  for (const ir::Value* v : g.inputs()) {
    auto it = feeds.find(v->name());
    if (it == feeds.end()) {
      if (!v->has_initializer()) throw Error("missing input '" + v->name() + "' (" + v->type.to_string() + ")");
      inputs.push_back(nullptr);
      continue;
    }
    check_feed(*v, it->second);
    inputs.push_back(&it->second);
  }
  RunContext ctx{options_.threads};
  return main_->run_with_hooks(ctx, {}, inputs, hooks);
}

}  // namespace onnxptq::engine
