// Removes Reshape, Transpose, Cast, Slice and Pad nodes that provably leave their input as it is.
#include <cstdint>
#include <limits>
#include <optional>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

std::optional<std::vector<int64_t>> int_constant(const ir::Value* value) {
  const ir::Tensor* t = constant_of(value);
  if (!t) return std::nullopt;
  std::vector<int64_t> out;
  if (t->dtype() == ir::DataType::Int64)
    for (int64_t v : t->values<int64_t>()) out.push_back(v);
  else if (t->dtype() == ir::DataType::Int32)
    for (int32_t v : t->values<int32_t>()) out.push_back(v);
  else
    return std::nullopt;
  return out;
}

std::optional<std::vector<int64_t>> static_shape(const ir::Value* value) {
  return value ? value->type.static_shape() : std::nullopt;
}

// Reshape whose target shape, resolved against the static input shape, is that shape.
bool reshape_is_noop(const ir::Node& n, int64_t opset) {
  auto in = static_shape(n.input(0));
  auto target = opset >= 5 ? int_constant(n.input(1)) : std::optional(n.attr_ints("shape", {}));
  if (!in || !target || target->size() != in->size()) return false;
  for (int64_t d : *in)
    if (d == 0) return false;  // -1 is ambiguous with empty tensors
  bool allowzero = n.attr_int("allowzero", 0) != 0;
  for (size_t i = 0; i < in->size(); ++i) {
    int64_t d = (*target)[i];
    if (d == 0 && !allowzero) continue;  // copies the input dimension
    // -1 takes what the other dimensions leave: with all of them equal, that is this one too.
    if (d != -1 && d != (*in)[i]) return false;
  }
  return true;
}

bool transpose_is_noop(const ir::Node& n) {
  const ir::Attribute* perm = n.find_attribute("perm");
  if (!perm) {  // reverses the dimensions: a no-op for rank 0 and 1
    const ir::Value* x = n.input(0);
    return x->type.is_tensor() && x->type.has_shape && x->type.shape.size() <= 1;
  }
  for (size_t i = 0; i < perm->ints.size(); ++i)
    if (perm->ints[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool cast_is_noop(const ir::Node& n) {
  const ir::Value* x = n.input(0);
  return x->type.is_tensor() && x->type.elem_type != ir::DataType::Undefined &&
         n.attr_int("to", 0) == static_cast<int64_t>(x->type.elem_type);
}

// Slice taking every element of each sliced axis (start 0, step 1, end past the dimension).
bool slice_is_noop(const ir::Node& n, int64_t opset) {
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (opset < 10) {
    starts = n.attr_ints("starts", {});
    ends = n.attr_ints("ends", {});
    if (n.find_attribute("axes")) axes = n.attr_ints("axes", {});
  } else {
    starts = int_constant(n.input(1));
    ends = int_constant(n.input(2));
    if (n.input(3) && !(axes = int_constant(n.input(3)))) return false;
    if (n.input(4) && !(steps = int_constant(n.input(4)))) return false;
  }
  if (!starts || !ends || starts->size() != ends->size()) return false;
  const ir::Value* x = n.input(0);
  std::optional<size_t> rank;
  if (x->type.is_tensor() && x->type.has_shape) rank = x->type.shape.size();
  for (size_t i = 0; i < starts->size(); ++i) {
    int64_t axis = axes ? (*axes)[i] : static_cast<int64_t>(i);
    if (steps && (*steps)[i] != 1) return false;
    if (axis < 0) {
      if (!rank) return false;
      axis += static_cast<int64_t>(*rank);
    }
    std::optional<int64_t> dim;
    if (rank && axis >= 0 && static_cast<size_t>(axis) < *rank && x->type.shape[axis].has_value)
      dim = x->type.shape[axis].value;
    int64_t start = (*starts)[i], end = (*ends)[i];
    bool from_first = start == 0 || (dim && start <= -*dim);
    bool to_last = end == std::numeric_limits<int64_t>::max() || (dim && end >= *dim);
    if (!from_first || !to_last) return false;
  }
  return true;
}

bool pad_is_noop(const ir::Node& n, int64_t opset) {
  auto pads = opset >= 11 ? int_constant(n.input(1)) : std::optional(n.attr_ints(opset >= 2 ? "pads" : "paddings", {}));
  if (!pads || pads->empty()) return false;
  for (int64_t p : *pads)
    if (p != 0) return false;
  return true;
}

}  // namespace

bool eliminate_noop(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  int64_t opset = model.opset("");
  size_t removed = 0;
  for (ir::Node* node : nodes_in_order(graph)) {
    if (!node->input(0) || !node->output(0)) continue;
    bool noop = (is_op(node, "Reshape") && reshape_is_noop(*node, opset)) ||
                (is_op(node, "Transpose") && transpose_is_noop(*node)) ||
                (is_op(node, "Cast") && cast_is_noop(*node)) || (is_op(node, "Slice") && slice_is_noop(*node, opset)) ||
                (is_op(node, "Pad") && pad_is_noop(*node, opset));
    if (noop && bypass_node(graph, node, node->input(0))) ++removed;
  }
  if (removed) context.log.push_back("eliminate_noop: removed " + std::to_string(removed) + " nodes");
  return removed > 0;
}

}  // namespace onnxptq::passes
