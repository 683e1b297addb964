// ReplaceClip6Relu (vai_q_onnx 1.16, before CLE): the ReLU6 of a Conv, ConvTranspose or Gemm,
// Clip(0, 6), becomes Relu, so that CLE can equalize through it (the calibrated range then does the
// clipping). The reference replaces every Clip(0, 6); one elsewhere is no layer's activation, so
// CLE gains nothing, and inside a hard-swish, x * Clip(x + 3, 0, 6) / 6, it changes the function:
// the quadratic x * Relu(x + 3) / 6 overflows to infinity in PP-OCRv4 det.
#include <algorithm>
#include <cmath>
#include <optional>

#include "passes/cle.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// The min or max of a Clip from opset 11: a constant input. Unlike constant_of, an initializer
// that is also a graph input counts (the reference reads initializers by name).
const ir::Tensor* clip_bound_tensor(const ir::Value* value) {
  if (value && value->has_initializer()) return &value->initializer();
  return constant_of(value);
}

// All the tensor's values, when it is a float tensor of any width.
std::optional<std::vector<double>> float_values(const ir::Tensor& t) {
  std::vector<double> out;
  switch (t.dtype()) {
    case ir::DataType::Float:
      for (float v : t.values<float>()) out.push_back(v);
      return out;
    case ir::DataType::Double:
      for (double v : t.values<double>()) out.push_back(v);
      return out;
    default:
      return std::nullopt;
  }
}

// numpy.allclose(values, target) with its default rtol 1e-5 and atol 1e-8.
bool all_close(const std::vector<double>& values, double target) {
  return !values.empty() && std::all_of(values.begin(), values.end(), [&](double v) {
    return std::fabs(v - target) <= 1e-8 + 1e-5 * std::fabs(target);
  });
}

// The activation of a layer that CLE pairs.
bool after_layer(const ir::Value* x) {
  const ir::Node* p = x->producer();
  return p && (is_op(p, "Conv") || is_op(p, "ConvTranspose") || is_op(p, "Gemm"));
}

bool is_clip6(const ir::Node& clip, int64_t opset) {
  if (!clip.input(0) || !clip.output(0) || !after_layer(clip.input(0))) return false;
  if (opset < 11) {
    const ir::Attribute *lo = clip.find_attribute("min"), *hi = clip.find_attribute("max");
    return lo && hi && lo->type == ir::AttrType::Float && hi->type == ir::AttrType::Float && all_close({lo->f}, 0.0) &&
           all_close({hi->f}, 6.0);
  }
  // The reference fails on a Clip with an omitted bound; such a Clip is no Clip(0, 6).
  const ir::Tensor *lo = clip_bound_tensor(clip.input(1)), *hi = clip_bound_tensor(clip.input(2));
  if (!lo || !hi) return false;
  auto lo_values = float_values(*lo), hi_values = float_values(*hi);
  return lo_values && hi_values && all_close(*lo_values, 0.0) && all_close(*hi_values, 6.0);
}

// Removes a bound nothing reads any more: its initializer (and graph input entry) or the
// Constant node making it.
void remove_if_unused(ir::Graph& graph, ir::Value* value) {
  if (!value || !value->uses().empty() || graph.is_output(value) || value->graph() != &graph) return;
  if (ir::Node* p = value->producer()) {
    if (!is_op(p, "Constant")) return;
    graph.remove_node(p);
  } else if (!value->has_initializer()) {
    return;
  }
  if (graph.is_input(value)) graph.remove_input(value);
  graph.remove_value(value);
}

}  // namespace

bool replace_clip6_relu(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  int64_t opset = model.opset("");
  size_t replaced = 0;
  std::vector<ir::Value*> bounds;  // removed after the walk: a Constant node may come before the Clip
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    ir::Node* clip = graph.nodes()[i].get();
    if (!is_op(clip, "Clip") || !is_clip6(*clip, opset)) continue;
    ir::Value *x = clip->input(0), *y = clip->output(0);
    bounds.insert(bounds.end(), clip->inputs().begin() + 1, clip->inputs().end());
    std::string name = clip->name;
    // The Relu takes the Clip's place in the node list.
    const ir::Node* next = i + 1 < graph.nodes().size() ? graph.nodes()[i + 1].get() : nullptr;
    graph.remove_node(clip);
    if (next)
      graph.insert_node_before(next, "Relu", {x}, {y}, name);
    else
      graph.add_node("Relu", {x}, {y}, name);
    ++replaced;
  }
  // Clips may share their bounds: each value once.
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  for (ir::Value* b : bounds) remove_if_unused(graph, b);
  if (replaced)
    context.log.push_back("replace_clip6_relu: replaced " + std::to_string(replaced) + " Clip(0, 6) by Relu");
  return replaced > 0;
}

const PassInfo& replace_clip6_relu_pass() {
  static const PassInfo info{"replace_clip6_relu", "Clip(0, 6) becomes Relu (ReplaceClip6Relu)", replace_clip6_relu};
  return info;
}

}  // namespace onnxptq::passes
