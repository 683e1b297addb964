// Turns a Clip whose lower bound is 0 into Relu, after calibration (vai_q_onnx ConvertClipToRelu).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// A scalar float bound given as a constant, directly or through an Identity (get_clip_min_max).
std::optional<float> bound_of(const ir::Value* value) {
  if (!value) return std::nullopt;
  const ir::Tensor* t = float_constant_of(value);
  if (!t && is_op(value->producer(), "Identity")) t = float_constant_of(value->producer()->input(0));
  if (!t || t->size() != 1) return std::nullopt;
  return t->values<float>()[0];
}

}  // namespace

// As in vai_q_onnx 1.16 (optimize.py), the Clip becomes Relu(input 0) with its name and output and
// its min/max constants (or their Identity/Constant producers) go when nothing else reads them.
// The upper bound is dropped on purpose: this runs after calibration, and the range calibrated on
// the Clip's output is what bounds the quantized values afterwards; the float graph is the same
// only for inputs up to max. vai_q_onnx 1.16 converts any Clip with min >= 0; min > 0 would
// let through the values in [0, min) that the Clip raised, so here min must be 0. min from the
// attribute below opset 11, else from input 1 (absent: no lower bound, kept).
bool convert_clip_to_relu(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  bool attributes = model.opset("") < 11;
  size_t converted = 0;
  for (ir::Node* clip : nodes_in_order(graph)) {
    if (!is_op(clip, "Clip") || !clip->input(0) || !clip->output(0) || !context.should_quantize(*clip)) continue;
    std::optional<float> min;
    if (attributes) {
      if (clip->find_attribute("min")) min = clip->attr_float("min", 0.0f);
    } else {
      min = bound_of(clip->input(1));
    }
    if (!min || *min != 0.0f) continue;
    std::vector<ir::Value*> bounds(clip->inputs().begin() + 1, clip->inputs().end());
    ir::Value* out = clip->output(0);
    ir::Node* relu = graph.insert_node_before(clip, "Relu", {clip->input(0)}, {}, clip->name);
    graph.remove_node(clip);
    graph.set_node_output(relu, 0, out);
    for (ir::Value* v : bounds) remove_unused_constant(graph, v);
    ++converted;
  }
  if (converted) context.log.push_back("convert_clip_to_relu: " + std::to_string(converted) + " Clip nodes to Relu");
  return converted > 0;
}

}  // namespace onnxptq::passes
