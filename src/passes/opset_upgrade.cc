// upgrade_opset: a model below the target opset converted to it by libonnx's version converter,
// with onnxptq's own adapters where libonnx's need what it cannot know or give other results.
//
// - Softmax, LogSoftmax, Hardmax (axis coerced to 2-D before opset 13): libonnx's 12->13 adapter
//   needs the input's full shape and writes a Reshape of its known sizes (wrong for more than one
//   dynamic dim). Ours, before libonnx runs: Flatten(axis) -> op(axis 1) -> Reshape(Shape(x)),
//   exact for any rank and any dynamic dims.
// - Upsample (opsets 7-9) and Resize-10 become Resize-11 without coordinate_transformation_mode,
//   i.e. half_pixel; the old ops map coordinates asymmetrically and pick the nearest pixel by
//   truncation when growing an axis and ceil when shrinking it (as ONNX Runtime runs them). After
//   libonnx converts, we set those modes.
// - libonnx's other adapters (Clip, Slice, Pad, TopK, Dropout, Squeeze/Unsqueeze, ReduceSum,
//   Split, BatchNormalization, Scatter, ...) are used as they are: they read ranks from value_info,
//   which infer_shapes fills first.
#include <cmath>

#include "onnxptq/error.h"
#include "passes/onnx_bridge.h"
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// IR version 7 is the one of ONNX 1.8, which brought opset 13.
constexpr int64_t kIrVersionOfOpset13 = 7;

bool is_softmax_family(const ir::Node& node) {
  return is_op(&node, "Softmax") || is_op(&node, "LogSoftmax") || is_op(&node, "Hardmax");
}

// Before opset 13 these ops flatten the input to 2-D at `axis` and work on the second dim. Nodes
// whose axis is not already the last one become Flatten -> op(axis 1) -> Reshape(Shape(x)): the
// same at every opset, and at 13 libonnx only renames axis 1 of a 2-D input to -1.
size_t flatten_softmax_axes(ir::Model& model) {
  ir::Graph& graph = *model.graph;
  size_t rewritten = 0;
  for (ir::Node* node : nodes_in_order(graph)) {
    if (!is_softmax_family(*node) || !node->input(0) || !node->output(0)) continue;
    ir::Value* x = node->input(0);
    int64_t axis = node->attr_int("axis", 1);
    int64_t rank = x->type.has_shape ? static_cast<int64_t>(x->type.shape.size()) : -1;
    if (axis == -1 || (rank >= 0 && axis == rank - 1)) continue;  // libonnx's adapter is exact here
    if (axis < 0) {
      if (rank < 0)
        throw Error("opset upgrade: " + node->describe() + " has axis " + std::to_string(axis) +
                    " and an input of unknown rank");
      axis += rank;
    }
    ir::DataType elem =
        x->type.is_tensor() && x->type.elem_type != ir::DataType::Undefined ? x->type.elem_type : ir::DataType::Float;
    std::string base = node->name.empty() ? node->op_type : node->name;
    ir::Value* flat = graph.add_unique_value(base + "_flat");
    flat->type = ir::ValueType::tensor(elem);
    flat->type.has_shape = true;
    flat->type.shape.resize(2);
    graph.add_value_info(flat);
    graph.insert_node_before(node, "Flatten", {x}, {flat}, graph.fresh_name(base + "_flatten"))
        ->set_attribute(ir::Attribute::of_int("axis", axis));
    ir::Value* shape = graph.add_unique_value(base + "_shape");
    shape->type = ir::ValueType::tensor(ir::DataType::Int64, {rank >= 0 ? rank : 0});
    if (rank < 0) shape->type.shape[0] = ir::Dim{};
    graph.add_value_info(shape);
    graph.insert_node_before(node, "Shape", {x}, {shape}, graph.fresh_name(base + "_shape"));

    ir::Value* y = node->output(0);
    ir::Value* y2d = graph.add_unique_value(base + "_2d");
    y2d->type = flat->type;
    graph.add_value_info(y2d);
    graph.set_node_input(node, 0, flat);
    graph.set_node_output(node, 0, y2d);
    node->set_attribute(ir::Attribute::of_int("axis", 1));
    // After `node` in the list: the graph is sorted again below.
    graph.add_node("Reshape", {y2d, shape}, {y}, graph.fresh_name(base + "_unflatten"));
    ++rewritten;
  }
  if (rewritten) graph.sort_nodes();
  return rewritten;
}

// Upsample and Resize-10 map output to input coordinates asymmetrically (x / scale) and pick the
// nearest pixel by truncation on a growing axis and ceil on a shrinking one (ORT's rule, which
// the engine follows). Resize-11 says so with coordinate_transformation_mode and nearest_mode.
void set_legacy_resize_modes(ir::Model& model) {
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "Resize")) continue;
    node->set_attribute(ir::Attribute::of_string("coordinate_transformation_mode", "asymmetric"));
    if (node->attr_string("mode", "nearest") != "nearest") continue;
    const ir::Tensor* scales = constant_of(node->input(2));
    if (!scales || scales->dtype() != ir::DataType::Float)
      throw Error("opset upgrade: " + node->describe() +
                  " (from Upsample or Resize-10) has scales computed at run time: cannot tell whether it grows or "
                  "shrinks, which decides its nearest-pixel rule from opset 11 on");
    bool grows = false, shrinks = false;
    for (float s : scales->values<float>()) {
      grows = grows || s > 1;
      shrinks = shrinks || s < 1;
    }
    if (grows && shrinks)
      throw Error("opset upgrade: " + node->describe() +
                  " (from Upsample or Resize-10) grows some axes and shrinks others: no Resize-11 nearest_mode "
                  "rounds both ways");
    node->set_attribute(ir::Attribute::of_string("nearest_mode", shrinks ? "ceil" : "floor"));
  }
}

bool needs_ranks(const ir::Graph& graph) {
  for (const auto& node : graph.nodes())
    for (const ir::Value* v : node->outputs())
      if (v && (!v->type.is_tensor() || !v->type.has_shape)) return true;
  return false;
}

}  // namespace

bool upgrade_opset(ir::Model& model, PassContext& context) {
  int64_t from = model.opset("");
  int64_t target = context.target_opset;
  if (from == 0 || from >= target) return false;
  // libonnx's adapters read ranks from value_info.
  if (needs_ranks(*model.graph)) {
    PassContext shapes = context;
    shapes.onnx_shape = shapes.engine_shape = true;
    shapes.log.clear();
    infer_shapes(model, shapes);
  }
  ir::Model work = ir::clone_model(model);
  size_t softmax = target >= 13 && from < 13 ? flatten_softmax_axes(work) : 0;
  ir::Model converted = onnx_convert_version(work, target);
  if (from < 11 && target >= 11) set_legacy_resize_modes(converted);
  if (converted.ir_version < kIrVersionOfOpset13 && target >= 13) converted.ir_version = kIrVersionOfOpset13;
  model = std::move(converted);
  context.log.push_back(
      "upgrade_opset: opset " + std::to_string(from) + " -> " + std::to_string(target) +
      " by libonnx's version converter" +
      (softmax ? " (" + std::to_string(softmax) + " Softmax-like nodes flattened to 2-D first)" : ""));
  return true;
}

}  // namespace onnxptq::passes
