// Engine-internal fusion: a Conv and the activation after it (or x * Sigmoid(x), SiLU) become one
// FusedConv node (domain onnxptq.engine), one kernel with a post-op (oneDNN's, or the engine's own
// pass over the output: see make_conv_plan), wherever no observer needs the tensor between them.
#include "engine/fusion.h"

#include <optional>
#include <set>

namespace onnxptq::engine {
namespace {

bool is_default_domain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The float scalar a value holds for good: an initializer, or the output of a Constant node
// (exporters such as PyTorch's write Clip bounds that way).
std::optional<float> constant_float_scalar(const ir::Value* v) {
  const ir::Tensor* t = nullptr;
  if (v->has_initializer()) {
    t = &v->initializer();
  } else if (const ir::Node* p = v->producer(); p && p->op_type == "Constant" && is_default_domain(*p)) {
    const ir::Attribute* value = p->find_attribute("value");
    if (value && value->type == ir::AttrType::Tensor) t = &value->t;
  }
  if (!t || t->dtype() != ir::DataType::Float || t->size() != 1) return std::nullopt;
  return t->values<float>()[0];
}

// The activation's parameters as FusedConv attributes, or false if it cannot be fused (a Clip
// whose bounds are not constants, say).
bool activation_attributes(const ir::Node& act, std::vector<ir::Attribute>& out) {
  static const std::set<std::string> kFusable = {"Relu", "LeakyRelu", "Clip", "HardSigmoid",
                                                 "HardSwish", "Sigmoid", "Tanh"};
  if (!is_default_domain(act) || !kFusable.count(act.op_type)) return false;
  float alpha = 0, beta = 0;
  if (act.op_type == "LeakyRelu") {
    alpha = act.attr_float("alpha", 0.01f);
  } else if (act.op_type == "HardSigmoid") {
    alpha = act.attr_float("alpha", 0.2f);
    beta = act.attr_float("beta", 0.5f);
  } else if (act.op_type == "Clip") {
    alpha = act.attr_float("min", -3.402823466e38f);  // opset < 11: attributes
    beta = act.attr_float("max", 3.402823466e38f);
    for (size_t i = 1; i < act.inputs().size() && i < 3; ++i) {  // opset >= 11: optional inputs
      const ir::Value* bound = act.input(i);
      if (!bound) continue;
      std::optional<float> value = constant_float_scalar(bound);
      if (!value) return false;
      (i == 1 ? alpha : beta) = *value;
    }
  }
  out.push_back(ir::Attribute::of_string("activation", act.op_type));
  out.push_back(ir::Attribute::of_floats("activation_params", {alpha, beta}));
  return true;
}

// x * Sigmoid(x) after the Conv whose output is `mid` (SiLU as exporters write it: the Conv's
// output read by a Sigmoid and by a Mul of it with the Sigmoid's output): the Mul, or null.
ir::Node* swish_after(const ir::Graph& graph, ir::Value* mid,
                      const std::function<bool(const ir::Value*)>& visible) {
  if (mid->uses().size() != 2) return nullptr;
  ir::Node* sigmoid = nullptr;
  ir::Node* mul = nullptr;
  for (const auto& use : mid->uses()) {
    ir::Node* n = use.node;
    if (n->graph() != &graph || !is_default_domain(*n) || n->outputs().size() != 1) return nullptr;
    if (n->op_type == "Sigmoid") sigmoid = n;
    if (n->op_type == "Mul") mul = n;
  }
  if (!sigmoid || !mul) return nullptr;
  ir::Value* gate = sigmoid->output(0);
  if (!gate || gate->uses().size() != 1 || gate->uses()[0].node != mul || graph.is_output(gate) || visible(gate))
    return nullptr;
  const bool operands =
      (mul->input(0) == mid && mul->input(1) == gate) || (mul->input(0) == gate && mul->input(1) == mid);
  return operands && mul->inputs().size() == 2 ? mul : nullptr;
}

}  // namespace

int fuse_conv_activations(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible) {
  int fused = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    ir::Node* conv = graph.nodes()[i].get();
    if (conv->op_type != "Conv" || !is_default_domain(*conv) || conv->outputs().size() != 1) continue;
    ir::Value* mid = conv->output(0);
    if (!mid || graph.is_output(mid) || visible(mid)) continue;
    std::vector<ir::Attribute> extra;
    ir::Node* act = nullptr;
    ir::Node* sigmoid = nullptr;  // of a Swish, removed with its Mul
    if (ir::Node* mul = swish_after(graph, mid, visible)) {
      act = mul;
      sigmoid = mid->uses()[0].node == mul ? mid->uses()[1].node : mid->uses()[0].node;
      extra.push_back(ir::Attribute::of_string("activation", "Swish"));
      extra.push_back(ir::Attribute::of_floats("activation_params", {1.f, 0.f}));
    } else {
      if (mid->uses().size() != 1) continue;
      act = mid->uses()[0].node;
      if (act->graph() != &graph || act->input(0) != mid || act->outputs().size() != 1) continue;
      if (!activation_attributes(*act, extra)) continue;
    }

    ir::Value* out = act->output(0);
    std::vector<ir::Value*> inputs = conv->inputs();
    std::string name = conv->name;
    std::vector<ir::Attribute> attributes = std::move(conv->attributes);
    graph.remove_node(act);
    if (sigmoid) {
      ir::Value* gate = sigmoid->output(0);
      graph.remove_node(sigmoid);
      graph.remove_value(gate);
    }
    ir::Node* f = graph.insert_node_before(conv, "FusedConv", inputs, {}, name, kEngineDomain);
    graph.remove_node(conv);
    graph.set_node_output(f, 0, out);
    f->attributes = std::move(attributes);
    for (auto& a : extra) f->attributes.push_back(std::move(a));
    graph.remove_value(mid);
    ++fused;
  }
  return fused;
}

}  // namespace onnxptq::engine
