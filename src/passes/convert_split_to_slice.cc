// Turns a Split with explicit sizes into one Slice per output (vai_q_onnx ConvertSplitToSlice).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

ir::Value* int64_constant(ir::Graph& graph, const std::string& name, int64_t value) {
  ir::Value* v = graph.add_unique_value(name);
  v->type = ir::ValueType::tensor(ir::DataType::Int64, {1});
  ir::Node* c = graph.add_node("Constant", {}, {v}, graph.fresh_name(name));
  c->set_attribute(
      ir::Attribute::of_tensor("value", ir::Tensor::from_values<int64_t>({1}, std::vector<int64_t>{value})));
  return v;
}

}  // namespace

// As vai_q_onnx 1.16 (optimize.py): sizes from a constant second input or the `split` attribute;
// output i becomes Slice(x, starts, ends, axes, steps) named "<out_i>_<i>", its four int64 [1]
// Constants "<out_i>_starts_<i>", "_ends_", "_axes_" and "_steps_". Two of vai_q_onnx 1.16's bugs
// are not copied: a Split without sizes (equal parts) is skipped instead of stopping the
// pass for every later Split, and a missing `axis` is ONNX's default 0 instead of a crash. Slice
// takes its bounds as inputs from opset 10 on; older models are left alone.
bool convert_split_to_slice(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  if (model.opset("") < 10) return false;
  size_t converted = 0;
  for (ir::Node* split : nodes_in_order(graph)) {
    if (!is_op(split, "Split") || !split->input(0) || split->inputs().size() > 2) continue;
    if (!context.should_quantize(*split)) continue;
    std::optional<std::vector<int64_t>> sizes;
    if (split->inputs().size() == 2 && split->input(1)) {
      sizes = constant_ints(split->input(1));
    } else if (split->find_attribute("split")) {
      sizes = split->attr_ints("split", {});
    }
    if (!sizes || sizes->size() != split->outputs().size()) continue;
    int64_t axis = split->attr_int("axis", 0);
    ir::Value* x = split->input(0);
    ir::Value* sizes_input = split->input(1);
    std::vector<ir::Value*> outputs = split->outputs();
    graph.remove_node(split);
    int64_t start = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      int64_t end = start + (*sizes)[i];
      if (ir::Value* out = outputs[i]) {
        std::string base = out->name(), index = std::to_string(i);
        std::vector<ir::Value*> inputs = {x, int64_constant(graph, base + "_starts_" + index, start),
                                          int64_constant(graph, base + "_ends_" + index, end),
                                          int64_constant(graph, base + "_axes_" + index, axis),
                                          int64_constant(graph, base + "_steps_" + index, 1)};
        graph.add_node("Slice", inputs, {out}, graph.fresh_name(base + "_" + index));
      }
      start = end;
    }
    remove_unused_constant(graph, sizes_input);
    ++converted;
  }
  if (converted) graph.sort_nodes();  // the Slices were appended
  if (converted)
    context.log.push_back("convert_split_to_slice: " + std::to_string(converted) + " Split nodes to Slice");
  return converted > 0;
}

}  // namespace onnxptq::passes
