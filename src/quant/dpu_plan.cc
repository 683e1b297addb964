// enable_dpu on the plan: the rewrites' node filter and vai_q_onnx's QDQ removal (VitisQDQDPUQuantizer).
#include "quant/dpu_plan.h"

#include <cmath>

#include "passes/rewrite.h"

namespace onnxptq::quant {

namespace {

// A Clip(x, 0, 6) with constant bounds (vai_q_onnx: a 3-input Clip with initializers ~0 and ~6).
bool is_clip6(const ir::Node& n) {
  if (n.op_type != "Clip" || n.inputs().size() != 3) return false;
  const ir::Tensor* lo = passes::float_constant_of(n.input(1));
  const ir::Tensor* hi = passes::float_constant_of(n.input(2));
  return lo && hi && lo->size() == 1 && hi->size() == 1 && std::fabs(lo->values<float>()[0]) < 1e-6 &&
         std::fabs(hi->values<float>()[0] - 6.0f) < 1e-6;
}

// vai_q_onnx's "needs annotation": the activations whose Q/DQ in front the NPU does without.
bool needs_annotation(const ir::Node& n, const QuantConfig& config) {
  // Quark's Gelu may be com.microsoft's (FuseGelu below opset 20); it looks at the op type only.
  if (n.op_type == "Gelu") return config.remove_qdq_conv_gelu && (n.domain.empty() || n.domain == "com.microsoft");
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  return (n.op_type == "Relu" && config.remove_qdq_conv_relu) || (is_clip6(n) && config.remove_qdq_conv_clip) ||
         (n.op_type == "LeakyRelu" && config.remove_qdq_conv_leaky_relu) ||
         (n.op_type == "PRelu" && config.remove_qdq_conv_prelu) || (n.op_type == "Gelu" && config.remove_qdq_conv_gelu);
}

bool is_average_pool(const ir::Node& n) {
  return (n.domain.empty() || n.domain == "ai.onnx") &&
         (n.op_type == "AveragePool" || n.op_type == "GlobalAveragePool");
}

// RemoveQDQInstanceNorm adds InstanceNormalization (Quark's annotate_op_type).
bool is_annotated_producer(const ir::Node& n, const QuantConfig& config) {
  static const std::set<std::string> ops = {"Conv",   "Add", "MaxPool", "AveragePool", "GlobalAveragePool",
                                            "MatMul", "Gemm"};
  return (n.domain.empty() || n.domain == "ai.onnx") &&
         (ops.count(n.op_type) || (n.op_type == "InstanceNormalization" && config.remove_qdq_instance_norm));
}

// Takes `name` out of the plan; tensors sharing its parameters keep them.
void remove_from_plan(Plan& plan, const std::string& name) {
  const TensorPlan removed = *plan.find(name);
  std::string heir;  // the first tensor sharing `name`'s parameters, when `name` had its own
  for (TensorPlan& t : plan.tensors) {
    if (t.shared_from != name) continue;
    if (!removed.shared_from.empty()) {
      t.shared_from = removed.shared_from;
    } else if (heir.empty()) {
      heir = t.name;
      t.shared_from.clear();
      t.range_from = removed.range_from.empty() ? removed.name : removed.range_from;
      t.fixed = removed.fixed;
      t.range = removed.range;
      t.relu_like = removed.relu_like;
    } else {
      t.shared_from = heir;
    }
  }
  std::vector<TensorPlan> kept;
  kept.reserve(plan.tensors.size());
  for (TensorPlan& t : plan.tensors)
    if (t.name != name) kept.push_back(std::move(t));
  plan.tensors = std::move(kept);
  plan.index.clear();
  for (size_t i = 0; i < plan.tensors.size(); ++i) plan.index[plan.tensors[i].name] = i;
}

}  // namespace

passes::PassContext dpu_pass_context(const ir::Model& model, const QuantConfig& config) {
  passes::PassContext context;
  context.op_types_to_quantize = quantized_op_types(config, *model.graph);
  context.nodes_to_quantize = std::set<std::string>(config.nodes_to_quantize.begin(), config.nodes_to_quantize.end());
  context.nodes_to_exclude = excluded_nodes(model, config);
  return context;
}

size_t fuse_annotated_activations(Plan& plan, const ir::Model& model, const QuantConfig& config) {
  const ir::Graph& graph = *model.graph;
  // Annotated tensor -> the consumer whose output stands for it, in graph order.
  std::vector<std::pair<ir::Value*, const ir::Node*>> annotated;
  for (const ir::Node* n : graph.topological_order()) {
    ir::Value* in = n->input(0);
    if (!in || !n->output(0)) continue;
    const ir::Node* producer = in->producer();
    if (!producer || producer->output(0) != in) continue;
    if ((needs_annotation(*n, config) && is_annotated_producer(*producer, config)) ||
        (is_average_pool(*n) && producer->op_type == "Pad" &&
         (producer->domain.empty() || producer->domain == "ai.onnx")))
      annotated.emplace_back(in, n);
  }
  size_t removed = 0;
  for (const auto& [value, consumer] : annotated) {
    const TensorPlan* t = plan.find(value->name());
    if (!t || t->role != Role::Activation || plan.fused_activations.count(value->name())) continue;
    // Every reader must be one the NPU fuses: vai_q_onnx re-points those only.
    bool fusable = !graph.is_output(value);
    for (const ir::Use& u : value->uses())
      fusable = fusable && (needs_annotation(*u.node, config) || is_average_pool(*u.node));
    if (!fusable) {
      plan.warnings.push_back("enable_dpu: '" + value->name() + "' is also read by another node (or is a graph " +
                              "output): its Q/DQ before " + consumer->op_type + " '" + consumer->name + "' stays");
      continue;
    }
    remove_from_plan(plan, value->name());
    plan.fused_activations[value->name()] = consumer->output(0)->name();
    ++removed;
  }
  return removed;
}

}  // namespace onnxptq::quant
