// The channels-last pass (engine/layout.h). Convolutions are wrapped in Transposes that keep the
// graph's meaning, then the Transposes are moved down through elementwise ops until pairs meet
// and cancel: a chain of convolutions, activations and residual Adds then runs NHWC end to end,
// with Transposes left only where an NCHW-only op or a visible value needs one.
#include "engine/layout.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "engine/block_quantizer.h"
#include "engine/fusion.h"

namespace onnxptq::engine {
namespace {

bool is_default_domain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The tensor a value holds for good: an initializer that no feed can override, or the output
// of a Constant node.
const ir::Tensor* constant_tensor(const ir::Value* v, const ir::Graph& graph) {
  if (v->has_initializer()) return graph.is_input(v) ? nullptr : &v->initializer();
  const ir::Node* p = v->producer();
  if (!p || p->op_type != "Constant" || !is_default_domain(*p)) return nullptr;
  const ir::Attribute* value = p->find_attribute("value");
  return value && value->type == ir::AttrType::Tensor ? &value->t : nullptr;
}

// `type` with its dims permuted as Transpose(perm) permutes them, when the rank is known.
ir::ValueType permuted(const ir::ValueType& type, const std::vector<int64_t>& perm) {
  if (!type.is_tensor() || !type.has_shape || type.shape.size() != perm.size()) return ir::ValueType{};
  ir::ValueType out = type;
  for (size_t i = 0; i < perm.size(); ++i) out.shape[i] = type.shape[perm[i]];
  return out;
}

// The inverse of Transpose(perm): the dims of its input from those of its output.
std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

ir::Node* add_transpose(ir::Graph& graph, const ir::Node* before, ir::Value* from, ir::Value* to,
                        const std::vector<int64_t>& perm, std::string_view name) {
  ir::Node* t = graph.insert_node_before(before, "Transpose", {from}, {}, graph.fresh_name(name));
  graph.set_node_output(t, 0, to);
  t->set_attribute(ir::Attribute::of_ints("perm", perm));
  return t;
}

bool is_nhwc_candidate(const ir::Node& n, const ir::Graph& graph) {
  bool conv = (n.op_type == "Conv" && is_default_domain(n)) || (n.op_type == "FusedConv" && n.domain == kEngineDomain);
  if (!conv || n.outputs().size() != 1 || !n.output(0) || !n.input(0) || !n.input(1) || n.inputs().size() > 3) return false;
  const ir::Tensor* w = constant_tensor(n.input(1), graph);
  if (!w || w->dtype() != ir::DataType::Float || w->rank() != 4) return false;
  const ir::ValueType& x = n.input(0)->type;
  return !(x.is_tensor() && ((x.has_shape && x.shape.size() != 4) ||
                             (x.elem_type != ir::DataType::Undefined && x.elem_type != ir::DataType::Float)));
}

}  // namespace

int convert_convolutions_to_nhwc(ir::Graph& graph) {
  std::vector<ir::Node*> convs;
  for (const auto& n : graph.nodes())
    if (is_nhwc_candidate(*n, graph)) convs.push_back(n.get());
  std::unordered_map<const ir::Value*, ir::Value*> nhwc_of;  // convolutions reading one X share its Transpose
  for (ir::Node* conv : convs) {
    ir::Value* x = conv->input(0);
    ir::Value* y = conv->output(0);
    ir::Value*& x_nhwc = nhwc_of[x];
    if (!x_nhwc) {
      x_nhwc = graph.add_unique_value(x->name() + ".nhwc");
      x_nhwc->type = permuted(x->type, kToNhwc);
      add_transpose(graph, conv, x, x_nhwc, kToNhwc, conv->name + ".to_nhwc");  // before the first reader
    }
    ir::Value* y_nhwc = graph.add_unique_value(y->name() + ".nhwc");
    y_nhwc->type = permuted(y->type, kToNhwc);
    std::vector<ir::Value*> inputs = conv->inputs();
    inputs[0] = x_nhwc;
    ir::Node* nhwc = graph.insert_node_before(conv, "NhwcConv", inputs, {y_nhwc}, conv->name, kEngineDomain);
    nhwc->attributes = std::move(conv->attributes);
    ir::Node* back = graph.insert_node_before(conv, "Transpose", {y_nhwc}, {}, graph.fresh_name(conv->name + ".to_nchw"));
    back->set_attribute(ir::Attribute::of_ints("perm", kToNchw));
    graph.remove_node(conv);
    graph.set_node_output(back, 0, y);
  }
  return static_cast<int>(convs.size());
}

namespace {

// Which inputs of an elementwise op are tensors it combines element by element (broadcasting);
// empty when the op is not one the pass moves Transposes through.
std::vector<size_t> elementwise_data_inputs(const ir::Node& n) {
  static const std::set<std::string> kUnary = {
      "Relu",  "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",     "Elu",  "Selu",  "Celu",
      "Gelu",  "Mish",      "Softplus", "Softsign",   "Exp",       "Log",      "Abs",  "Neg",   "Sqrt",
      "Reciprocal", "Erf",  "Floor",   "Ceil",        "Round",     "Sign",     "ThresholdedRelu", "Identity"};
  static const std::set<std::string> kBroadcasting = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where"};
  if (!is_default_domain(n) || n.outputs().size() != 1 || !n.output(0)) return {};
  if (kUnary.count(n.op_type) || n.op_type == "Clip") return {0};  // Clip's bounds are scalars
  if (!kBroadcasting.count(n.op_type)) return {};
  std::vector<size_t> all(n.inputs().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

// Quark's BFPQuantizeDequantize / MXQuantizeDequantize: blocks of consecutive values along one
// axis, the same blocks in any layout once the axis follows the Transpose (channels-last makes
// channel blocks contiguous, which their kernel reads fastest).
bool is_block_quantize(const ir::Node& n) {
  return is_block_quantize_node(n) && n.inputs().size() == 1 && n.outputs().size() == 1 && n.output(0);
}

class TransposeElimination {
 public:
  TransposeElimination(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible, int64_t onnx_opset,
                       std::map<std::string, std::string>* same_elements)
      : graph_(graph), visible_(visible), onnx_opset_(onnx_opset), same_elements_(same_elements) {}

  int run() {
    int total = 0;
    for (bool changed = true; changed;) {
      changed = false;
      removed_.clear();
      for (ir::Node* n : graph_.topological_order()) {
        if (removed_.count(n)) continue;
        int moved = n->op_type == "Transpose" && is_default_domain(*n) ? cancel_pair(n) : push_below(n);
        total += moved;
        changed = changed || moved > 0;
      }
    }
    return total;
  }

 private:
  bool seen(const ir::Value* v) const { return graph_.is_output(v) || visible_(v); }

  // The perm of a Transpose of this graph producing `v`, when `v` may be bypassed.
  std::optional<std::vector<int64_t>> transposed_by(const ir::Value* v) const {
    const ir::Node* p = v ? v->producer() : nullptr;
    if (!p || p->graph() != &graph_ || p->op_type != "Transpose" || !is_default_domain(*p) || seen(v)) return std::nullopt;
    std::vector<int64_t> perm = p->attr_ints("perm", {});
    if (perm.empty()) return std::nullopt;  // the reversing default: rank unknown here
    return perm;
  }

  bool used_in_subgraph(const ir::Value* v) const {
    for (const ir::Use& u : v->uses())
      if (u.node->graph() != &graph_) return true;
    return false;
  }

  // Removes the Transpose producing `v` once nothing reads `v`.
  void drop_if_unused(ir::Value* v) {
    if (!v->uses().empty() || seen(v)) return;
    ir::Node* t = v->producer();
    if (same_elements_) (*same_elements_)[v->name()] = t->input(0)->name();
    removed_.insert(t);
    graph_.remove_node(t);
    graph_.remove_value(v);
  }

  // Transpose(Q) of Transpose(P) of x, with P then Q the identity: readers read x.
  int cancel_pair(ir::Node* t2) {
    ir::Value* mid = t2->input(0);
    ir::Value* out = t2->output(0);
    std::optional<std::vector<int64_t>> p = transposed_by(mid);
    std::vector<int64_t> q = t2->attr_ints("perm", {});
    if (!p || !out || seen(out) || used_in_subgraph(out) || q.size() != p->size()) return 0;
    for (size_t i = 0; i < q.size(); ++i)
      if ((*p)[q[i]] != static_cast<int64_t>(i)) return 0;
    graph_.replace_uses(out, mid->producer()->input(0));
    drop_if_unused(out);
    drop_if_unused(mid);
    return 1;
  }

  // The inputs of `n` that a Transpose(perm) may move below, or empty when it cannot.
  std::vector<size_t> movable_inputs(const ir::Node& n, const std::vector<int64_t>& perm) const {
    std::vector<size_t> data = elementwise_data_inputs(n);
    if (is_block_quantize(n)) return {0};
    if (!data.empty() || !is_default_domain(n) || n.outputs().empty() || !n.output(0)) return data;
    if (n.op_type == "Concat") {
      for (size_t i = 0; i < n.inputs().size(); ++i) data.push_back(i);
    } else if ((n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool") && perm == kToNchw) {
      data.push_back(0);
    } else if (n.op_type == "MaxPool" && perm == kToNchw && n.attr_ints("kernel_shape", {}).size() == 2 &&
               (n.outputs().size() == 1 || !n.output(1))) {
      data.push_back(0);  // without Indices, whose numbering depends on the layout
    } else if (n.op_type == "Resize" && perm == kToNchw && onnx_opset_ >= 11 && n.attr_string("mode", "nearest") == "nearest") {
      data.push_back(0);  // roi, scales and sizes stay in N C H W order: NhwcResize reads them so
    }
    return data;
  }

  // Whether a Transpose(perm) producing `v` could be moved below (or cancelled by) every reader
  // of `v` but `n`: then moving it below `n` does not leave a copy behind for good.
  bool others_take_transposed(const ir::Value* v, const ir::Node* n, const std::vector<int64_t>& perm) const {
    for (const ir::Use& u : v->uses()) {
      if (u.node == n) continue;
      if (u.node->graph() != &graph_) return false;
      if (u.node->op_type == "Transpose" && is_default_domain(*u.node)) {
        std::vector<int64_t> q = u.node->attr_ints("perm", {});
        if (q.size() != perm.size()) return false;
        for (size_t i = 0; i < q.size(); ++i)
          if (perm[q[i]] != static_cast<int64_t>(i)) return false;
        continue;
      }
      std::vector<size_t> data = movable_inputs(*u.node, perm);
      if (std::find(data.begin(), data.end(), u.input) == data.end()) return false;
    }
    return true;
  }

  // Op(Transpose(P) of a, Transpose(P) of b, scalar) becomes Transpose(P) of Op(a, b, scalar);
  // likewise Concat and the block quantize ops (their axis moved) and global pools (run
  // channels-last).
  int push_below(ir::Node* n) {
    const ir::Value* first = n->input(0);
    std::optional<std::vector<int64_t>> perm = transposed_by(first);
    for (size_t i = 1; !perm && i < n->inputs().size(); ++i) perm = transposed_by(n->input(i));
    if (!perm) return 0;
    std::vector<size_t> data = movable_inputs(*n, *perm);
    if (data.empty()) return 0;
    bool concat = n->op_type == "Concat";
    bool block = is_block_quantize(*n);

    bool frees_one = false;  // moving a Transpose must not add one for good
    for (size_t i : data) {
      ir::Value* v = n->input(i);
      if (!v) continue;
      std::optional<std::vector<int64_t>> p = transposed_by(v);
      if (p) {
        if (*p != *perm) return 0;
        frees_one = frees_one || others_take_transposed(v, n, *perm);
        continue;
      }
      const ir::Tensor* c = concat ? nullptr : constant_tensor(v, graph_);
      if (!c || c->size() != 1 || c->rank() > perm->size()) return 0;
    }
    if (!frees_one) return 0;
    int64_t rank = static_cast<int64_t>(perm->size());
    int64_t axis = concat ? n->attr_int("axis", 0) : block ? n->attr_int("axis", 1) : 0;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return 0;  // the kernel reports it

    std::vector<ir::Value*> above;
    for (size_t i : data) {
      ir::Value* v = n->input(i);
      if (!v || !transposed_by(v)) continue;
      graph_.set_node_input(n, i, v->producer()->input(0));
      above.push_back(v);
    }
    for (ir::Value* v : above)
      if (v->uses().empty()) drop_if_unused(v);
    if (concat || block) {
      n->set_attribute(ir::Attribute::of_int("axis", (*perm)[axis]));
    } else if (n->op_type == "GlobalAveragePool" || n->op_type == "GlobalMaxPool" || n->op_type == "Resize" ||
               n->op_type == "MaxPool") {
      if (n->op_type == "Resize") n->set_attribute(ir::Attribute::of_int("onnx_opset", onnx_opset_));
      n->op_type = "Nhwc" + n->op_type;
      n->domain = kEngineDomain;
    }
    ir::Value* out = n->output(0);
    ir::Value* inner = graph_.add_unique_value(out->name() + ".t");
    inner->type = permuted(out->type, inverse(*perm));
    graph_.set_node_output(n, 0, inner);
    ir::Node* after = graph_.add_node("Transpose", {inner}, {}, graph_.fresh_name(n->name + ".moved_transpose"));
    graph_.set_node_output(after, 0, out);
    after->set_attribute(ir::Attribute::of_ints("perm", *perm));
    return 1;
  }

  ir::Graph& graph_;
  const std::function<bool(const ir::Value*)>& visible_;
  int64_t onnx_opset_;
  std::map<std::string, std::string>* same_elements_;
  std::unordered_set<const ir::Node*> removed_;
};

}  // namespace

int eliminate_transposes(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible, int64_t onnx_opset,
                         std::map<std::string, std::string>* same_elements) {
  return TransposeElimination(graph, visible, onnx_opset, same_elements).run();
}

namespace {

// The Transpose of this graph with `perm` producing `v`, or nullptr.
ir::Node* transpose_producing(const ir::Value* v, const std::vector<int64_t>& perm, const ir::Graph& graph) {
  ir::Node* p = v ? v->producer() : nullptr;
  bool match = p && p->graph() == &graph && p->op_type == "Transpose" && is_default_domain(*p) &&
               p->attr_ints("perm", {}) == perm;
  return match ? p : nullptr;
}

}  // namespace

int revert_isolated_nhwc_convolutions(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible) {
  std::vector<ir::Node*> isolated;
  for (const auto& n : graph.nodes()) {
    if (n->op_type != "NhwcConv" || n->domain != kEngineDomain) continue;
    const ir::Value* y = n->output(0);
    if (!transpose_producing(n->input(0), kToNhwc, graph) || y->uses().size() != 1 || graph.is_output(y)) continue;
    const ir::Node* after = y->uses()[0].node;
    if (after->graph() == &graph && transpose_producing(after->output(0), kToNchw, graph) == after)
      isolated.push_back(n.get());
  }
  for (ir::Node* n : isolated) {
    ir::Node* before = n->input(0)->producer();
    ir::Value* x_nhwc = n->input(0);
    ir::Value* y_nhwc = n->output(0);
    ir::Node* after = y_nhwc->uses()[0].node;
    ir::Value* y = after->output(0);
    std::vector<ir::Value*> inputs = n->inputs();
    inputs[0] = before->input(0);
    bool fused = n->find_attribute("activation") != nullptr;
    ir::Node* conv = graph.insert_node_before(n, fused ? "FusedConv" : "Conv", inputs, {}, n->name,
                                              fused ? kEngineDomain : "");
    conv->attributes = std::move(n->attributes);
    graph.remove_node(after);
    graph.remove_node(n);
    graph.remove_value(y_nhwc);
    graph.set_node_output(conv, 0, y);
    if (x_nhwc->uses().empty() && !graph.is_output(x_nhwc) && !visible(x_nhwc)) {  // a model's own Transpose may stay
      graph.remove_node(before);
      graph.remove_value(x_nhwc);
    }
  }
  return static_cast<int>(isolated.size());
}

int run_convolutions_nhwc(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible, int64_t onnx_opset,
                          std::map<std::string, std::string>* same_elements) {
  int converted = convert_convolutions_to_nhwc(graph);
  if (converted == 0) return 0;
  eliminate_transposes(graph, visible, onnx_opset, same_elements);
  return converted - revert_isolated_nhwc_convolutions(graph, visible);
}

}  // namespace onnxptq::engine
