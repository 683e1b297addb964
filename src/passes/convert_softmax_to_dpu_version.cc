// Replaces Softmax by the DPU's bfloat16 exp-polynomial and division (vai_q_onnx ConvertSoftmaxToDPUVersion).
#include "ir/float16.h"
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// Builds the nodes of one replacement, named "<softmax name>/<part>".
class SoftmaxBuilder {
 public:
  SoftmaxBuilder(ir::Graph& graph, const ir::Node* before, std::string prefix)
      : graph_(graph), before_(before), prefix_(std::move(prefix)) {}

  ir::Value* node(const std::string& op, std::vector<ir::Value*> inputs, const std::string& part,
                  ir::Value* out = nullptr) {
    if (!out) {
      out = graph_.add_unique_value(prefix_ + "/" + part);
      out->type = ir::ValueType::tensor(ir::DataType::Float);
    }
    last_ = graph_.insert_node_before(before_, op, std::move(inputs), {out}, graph_.fresh_name(prefix_ + "/" + part));
    return out;
  }
  // The value rounded to bfloat16 and back: what a bfloat16 op writes when computed in float
  // (one rounding of float's 24 bits to 8 is the correctly rounded bfloat16 result for + - * /).
  ir::Value* bf16(ir::Value* v, const std::string& part, ir::Value* out = nullptr) {
    ir::Value* b = node("Cast", {v}, part + "/cast_bf16");
    last_->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(ir::DataType::BFloat16)));
    b->type = ir::ValueType::tensor(ir::DataType::BFloat16);
    ir::Value* f = node("Cast", {b}, part + "/cast_f", out);
    last_->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(ir::DataType::Float)));
    return f;
  }
  // A float constant holding `value` rounded to bfloat16 (the reference's BFLOAT16 Constant cast to float).
  ir::Value* constant(float value, const std::string& part) {
    float rounded = ir::bfloat16_to_float(ir::float_to_bfloat16(value));
    ir::Value* v = graph_.add_unique_value(prefix_ + "/" + part);
    v->type = ir::ValueType::tensor(ir::DataType::Float, {});
    ir::Node* n = graph_.insert_node_before(before_, "Constant", {}, {v}, graph_.fresh_name(prefix_ + "/" + part));
    n->set_attribute(
        ir::Attribute::of_tensor("value", ir::Tensor::from_values<float>({}, std::vector<float>{rounded})));
    return v;
  }
  ir::Node* last() const { return last_; }
  ir::Value* int64s(const std::vector<int64_t>& values, const std::string& part) {
    ir::Value* v = graph_.add_unique_value(prefix_ + "/" + part);
    v->type = ir::ValueType::tensor(ir::DataType::Int64, {static_cast<int64_t>(values.size())});
    ir::Node* n = graph_.insert_node_before(before_, "Constant", {}, {v}, graph_.fresh_name(prefix_ + "/" + part));
    n->set_attribute(ir::Attribute::of_tensor(
        "value", ir::Tensor::from_values<int64_t>({static_cast<int64_t>(values.size())}, values)));
    return v;
  }

 private:
  ir::Graph& graph_;
  const ir::Node* before_;
  ir::Node* last_ = nullptr;
  std::string prefix_;
};

}  // namespace

// As vai_q_onnx 1.16's ConvertSoftmaxToDPUVersion, with x in bfloat16:
//   t = floor(x * 1/ln2), r = x - t * ln2, p = ((0.21875 r + 0.486328125) r + 1) r + 1 (Horner,
//   each step in float and rounded to bfloat16), e = 2^t * p, y = e / sum(e over the axis).
// The reference builds bfloat16 Mul/Floor/Pow/ReduceSum/Div nodes, which ONNX Runtime's CPU
// provider may not have; here every bfloat16 op is the float op followed by a Cast to
// bfloat16 and back, which rounds to the same value (float has more than 2 * 8 + 2 bits). The sum
// is accumulated in float and rounded once; how the reference's bfloat16 ReduceSum accumulates is
// not known. Constants are rounded to bfloat16 to nearest even (1/ln2 -> 1.4453125; a truncating
// conversion would give 1.4375). No max is subtracted, as in the reference: inputs above ~88 give inf.
// The axis is the Softmax's (ONNX default -1 from opset 13, 1 before, where vai_q_onnx reads -1);
// below opset 13 Softmax flattens from the axis, so only a last axis is converted. vai_q_onnx also
// excludes every new node but the last Cast from quantization: they are named "<softmax>/...".
bool convert_softmax_to_dpu_version(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  int64_t opset = model.opset("");
  if (opset < 7) return false;
  size_t converted = 0;
  for (ir::Node* softmax : nodes_in_order(graph)) {
    if (!is_op(softmax, "Softmax") || !softmax->input(0) || !softmax->output(0)) continue;
    if (!context.should_quantize(*softmax)) continue;
    const ir::ValueType& type = softmax->input(0)->type;
    if (type.is_tensor() && type.elem_type != ir::DataType::Float) continue;
    int64_t axis = softmax->attr_int("axis", opset >= 13 ? -1 : 1);
    if (opset < 13) {
      if (!type.has_shape) continue;
      int64_t rank = static_cast<int64_t>(type.shape.size());
      if ((axis < 0 ? axis + rank : axis) != rank - 1) continue;
    }
    if (softmax->name.empty()) softmax->name = softmax->output(0)->name();
    ir::Value* out = softmax->output(0);
    ir::Value* x = softmax->input(0);
    graph.set_node_output(softmax, 0, nullptr);  // the last Cast writes it; the Softmax marks the place
    SoftmaxBuilder b(graph, softmax, softmax->name);
    ir::Value* xb = b.bf16(x, "exp_poly/round");
    ir::Value* scaled =
        b.bf16(b.node("Mul", {xb, b.constant(1.4426950408889634f, "inv_ln2")}, "exp_poly/mul"), "exp_poly/mul");
    ir::Value* t = b.node("Floor", {scaled}, "exp_poly/floor");  // the floor of a bfloat16 is one
    ir::Value* tl =
        b.bf16(b.node("Mul", {t, b.constant(0.6931471805599453f, "ln2")}, "exp_poly/mul_ln2"), "exp_poly/mul_ln2");
    ir::Value* r = b.bf16(b.node("Sub", {xb, tl}, "exp_poly/sub"), "exp_poly/sub");
    ir::Value* p = b.node("Mul", {r, b.constant(0.21875f, "c3")}, "poly1/mul");
    p = b.bf16(b.node("Add", {p, b.constant(0.486328125f, "c2")}, "poly1/add"), "poly1");
    p = b.node("Mul", {r, p}, "poly2/mul");
    p = b.bf16(b.node("Add", {p, b.constant(1.0f, "c1")}, "poly2/add"), "poly2");
    p = b.node("Mul", {r, p}, "poly3/mul");
    p = b.bf16(b.node("Add", {p, b.constant(1.0f, "c0")}, "poly3/add"), "poly3");
    ir::Value* power = b.bf16(b.node("Pow", {b.constant(2.0f, "two"), t}, "pow"), "pow");
    ir::Value* e = b.bf16(b.node("Mul", {power, p}, "exp"), "exp");
    ir::Value* sum;
    if (opset >= 13) {
      sum = b.node("ReduceSum", {e, b.int64s({axis}, "axes")}, "sum");
    } else {
      sum = b.node("ReduceSum", {e}, "sum");
      b.last()->set_attribute(ir::Attribute::of_ints("axes", {axis}));
    }
    b.last()->set_attribute(ir::Attribute::of_int("keepdims", 1));
    ir::Value* s = b.bf16(sum, "sum");
    b.bf16(b.node("Div", {e, s}, "div"), "div", out);
    graph.remove_node(softmax);
    ++converted;
  }
  if (converted)
    context.log.push_back("convert_softmax_to_dpu_version: " + std::to_string(converted) + " Softmax nodes");
  return converted > 0;
}

}  // namespace onnxptq::passes
