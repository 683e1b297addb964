// convert_nchw_to_nhwc: 4-D NCHW image inputs declared NHWC, with the transpose back moved into
// the graph as far as it goes (vai_q_onnx 1.16's convert_nchw_to_nhwc, utils/model_utils.py).
#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "onnxptq/error.h"
#include "passes/model_format.h"
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

using Perm = std::vector<int64_t>;
const Perm kToNchw = {0, 3, 1, 2};  // NHWC -> NCHW
const Perm kToNhwc = {0, 2, 3, 1};  // NCHW -> NHWC

bool is_identity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Transpose(Transpose(x, first), second) == Transpose(x, composed).
Perm compose(const Perm& first, const Perm& second) {
  Perm q(second.size());
  for (size_t i = 0; i < second.size(); ++i) q[i] = first[second[i]];
  return q;
}

std::vector<ir::Dim> permuted(const std::vector<ir::Dim>& dims, const Perm& perm) {
  std::vector<ir::Dim> out;
  for (int64_t p : perm) out.push_back(dims[p]);
  return out;
}

// "" when `v` is a 4-D NCHW image (as the seed tells: fixed C, H, W, and H > C, W > C), else why not.
std::string unconvertible(const ir::Value* v) {
  const ir::ValueType& t = v->type;
  if (!t.is_tensor() || !t.has_shape) return "its rank is not known";
  if (t.shape.size() != 4) return "it has rank " + std::to_string(t.shape.size()) + ", not 4";
  for (size_t i = 1; i < 4; ++i)
    if (!t.shape[i].has_value) return "its C, H and W are not all fixed sizes (" + t.to_string() + ")";
  int64_t c = t.shape[1].value, h = t.shape[2].value, w = t.shape[3].value;
  if (w < c && w < h) return "it looks NHWC already (" + t.to_string() + ")";
  if (h <= c || w <= c) return "H and W are not both larger than C (" + t.to_string() + ")";
  return "";
}

// The permutation of a Transpose node (its default reverses the dimensions).
Perm perm_of(const ir::Node& node, size_t rank) {
  Perm p = node.attr_ints("perm", {});
  if (p.empty())
    for (size_t i = 0; i < rank; ++i) p.push_back(static_cast<int64_t>(rank - 1 - i));
  return p;
}

// `t` of rank <= 4 broadcast against a rank-4 tensor, as the NHWC tensor of the same broadcast:
// leading 1s added, then the dims and data permuted NCHW -> NHWC.
ir::Tensor to_nhwc(const ir::Tensor& t) {
  std::vector<int64_t> d(4 - t.rank(), 1);
  d.insert(d.end(), t.dims().begin(), t.dims().end());
  std::vector<int64_t> out_dims = {d[0], d[2], d[3], d[1]};
  ir::Tensor out = ir::Tensor::uninitialized(t.dtype(), out_dims);
  size_t width = static_cast<size_t>(ir::data_type_bits(t.dtype()) / 8);
  const std::byte* src = t.bytes().data();
  std::byte* dst = out.mutable_bytes();
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t h = 0; h < d[2]; ++h)
        for (int64_t w = 0; w < d[3]; ++w) {
          size_t from = static_cast<size_t>(((n * d[1] + c) * d[2] + h) * d[3] + w);
          size_t to = static_cast<size_t>(((n * d[2] + h) * d[3] + w) * d[1] + c);
          std::memcpy(dst + to * width, src + from * width, width);
        }
  return out;
}

bool is_unary_elementwise(const ir::Node& n) {
  static const std::set<std::string> ops = {
      "Relu", "LeakyRelu",  "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Abs",   "Neg",  "Exp",  "Log",
      "Sqrt", "Reciprocal", "Elu",     "Selu",        "Softplus",  "Erf",  "Floor", "Ceil", "Round"};
  return n.domain.empty() && n.inputs().size() == 1 && ops.count(n.op_type);
}

bool is_binary_elementwise(const ir::Node& n) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Pow", "PRelu"};
  return n.domain.empty() && n.inputs().size() == 2 && ops.count(n.op_type);
}

// Clip with scalar (or absent) bounds works on any layout.
bool is_clip(const ir::Node& n) {
  if (!is_op(&n, "Clip")) return false;
  for (size_t i = 1; i < n.inputs().size(); ++i)
    if (const ir::Value* b = n.input(i); b && !(constant_of(b) && constant_of(b)->size() == 1)) return false;
  return true;
}

// The NCHW Transpose `node` (input x NHWC, output t NCHW) moved below its only user when that
// user is elementwise with constant other operands (the constants turned NHWC). Returns the
// Transpose now below, or nullptr when it cannot move.
ir::Node* push_down(ir::Model& model, ir::Graph& graph, ir::Node* node) {
  ir::Value* t = node->output(0);
  if (t->uses().size() != 1 || graph.is_output(t)) return nullptr;
  ir::Node* user = t->uses()[0].node;
  size_t slot = t->uses()[0].input;
  if (user->graph() != &graph || user->outputs().size() != 1 || graph.is_output(user->output(0))) return nullptr;
  int constant_slot = -1;
  if (is_binary_elementwise(*user)) {
    constant_slot = slot == 0 ? 1 : 0;
    const ir::Tensor* c = constant_of(user->input(constant_slot));
    if (!c || c->rank() > 4 || c->dtype() == ir::DataType::String || ir::data_type_bits(c->dtype()) % 8) return nullptr;
    if (user->op_type == "PRelu" && slot != 0) return nullptr;
  } else if (!(is_unary_elementwise(*user) || (is_clip(*user) && slot == 0))) {
    return nullptr;
  }
  if (constant_slot >= 0) {
    const ir::Tensor& c = *constant_of(user->input(constant_slot));
    if (c.size() > 1) set_constant_input(model, user, static_cast<size_t>(constant_slot), to_nhwc(c));
  }
  ir::Value* x = node->input(0);
  ir::Value* u = user->output(0);
  graph.set_node_input(user, slot, x);
  graph.remove_node(node);
  graph.remove_value(t);
  // The user now writes NHWC; a new Transpose after it gives its former readers NCHW.
  ir::Value* back = graph.add_unique_value(u->name() + "_nchw");
  back->type = u->type;
  graph.replace_uses(u, back);
  if (u->type.is_tensor() && u->type.has_shape && u->type.shape.size() == 4)
    u->type.shape = permuted(u->type.shape, kToNhwc);
  else
    u->type.has_shape = false, u->type.shape.clear();
  ir::Node* moved = graph.add_node("Transpose", {u}, {back}, graph.fresh_name(u->name() + "_to_nchw"));
  moved->set_attribute(ir::Attribute::of_ints("perm", kToNchw));
  return moved;
}

// The NCHW Transpose `node` composed into Transposes that read its output; removed when nothing
// reads it any more. Counts the Transposes that disappeared.
size_t absorb(ir::Graph& graph, ir::Node* node) {
  ir::Value* x = node->input(0);
  ir::Value* t = node->output(0);
  size_t removed = 0;
  for (const ir::Use& use : std::vector<ir::Use>(t->uses())) {
    ir::Node* user = use.node;
    if (!is_op(user, "Transpose") || user->graph() != &graph) continue;
    Perm q = compose(kToNchw, perm_of(*user, 4));
    if (is_identity(q)) {
      if (!bypass_node(graph, user, x)) continue;
      ++removed;
    } else {
      graph.set_node_input(user, 0, x);
      user->set_attribute(ir::Attribute::of_ints("perm", q));
    }
  }
  if (t->uses().empty() && !graph.is_output(t)) {
    graph.remove_node(node);
    graph.remove_value(t);
    ++removed;
  }
  return removed;
}

bool convert_output(ir::Graph& graph, size_t index) {
  ir::Value* out = graph.outputs()[index];
  if (!unconvertible(out).empty()) return false;
  ir::Value* nhwc = graph.add_unique_value(out->name() + "_transpose");
  nhwc->type = out->type;
  nhwc->type.shape = permuted(out->type.shape, kToNhwc);
  ir::Node* t = graph.add_node("Transpose", {out}, {nhwc}, graph.fresh_name(out->name() + "_transpose"));
  t->set_attribute(ir::Attribute::of_ints("perm", kToNhwc));
  graph.set_output(index, nhwc);
  // A model ending in NHWC -> NCHW: the two Transposes compose (and cancel).
  ir::Node* producer = producer_of(out, "Transpose");
  if (producer && out->uses().size() == 1 && !graph.is_output(out)) {
    Perm q = compose(perm_of(*producer, 4), kToNhwc);
    graph.set_node_input(t, 0, producer->input(0));
    t->set_attribute(ir::Attribute::of_ints("perm", q));
    graph.remove_node(producer);
    graph.remove_value(out);
    if (is_identity(q)) bypass_node(graph, t, t->input(0));
  }
  return true;
}

}  // namespace

bool convert_nchw_to_nhwc(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  auto say = [&](const std::string& line) { context.log.push_back("convert_nchw_to_nhwc: " + line); };
  bool changed = false;
  for (ir::Value* v : std::vector<ir::Value*>(graph.inputs()))
    if (v->has_initializer()) {
      graph.remove_input(v);
      changed = true;
    }
  if (changed && model.ir_version < 4) model.ir_version = 4;
  size_t converted = 0, removed = 0, moved = 0, left = 0;
  std::string names;
  for (ir::Value* v : std::vector<ir::Value*>(graph.inputs())) {
    std::string why = graph.is_output(v) ? "it is also a graph output" : unconvertible(v);
    if (!why.empty()) {
      say("input '" + v->name() + "' left as it is: " + why);
      ++left;
      continue;
    }
    ir::Value* t = graph.add_unique_value(v->name() + "_transpose");
    t->type = v->type;
    v->type.shape = permuted(v->type.shape, kToNhwc);
    graph.replace_uses(v, t);
    const ir::Node* first = graph.nodes().empty() ? nullptr : graph.nodes().front().get();
    ir::Node* node = first ? graph.insert_node_before(first, "Transpose", {v}, {t}, graph.fresh_name(t->name()))
                           : graph.add_node("Transpose", {v}, {t}, graph.fresh_name(t->name()));
    node->set_attribute(ir::Attribute::of_ints("perm", kToNchw));
    for (ir::Node* next = node; (next = push_down(model, graph, node));) {
      node = next;
      ++moved;
    }
    removed += absorb(graph, node);
    names += (converted++ ? ", '" : "'") + v->name() + "'";
    changed = true;
  }
  std::string outputs;
  if (converted > 0 && left == 0)
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      std::string name = graph.outputs()[i]->name();
      if (convert_output(graph, i))
        outputs += (outputs.empty() ? "'" : ", '") + name + "' (now '" + graph.outputs()[i]->name() + "')";
    }
  if (converted > 0) {
    graph.sort_nodes();
    say("NHWC inputs " + names +
        (moved ? "; their transposes moved below " + std::to_string(moved) + " elementwise nodes" : "") +
        (removed ? "; " + std::to_string(removed) + " transposes cancelled" : "") +
        (outputs.empty() ? "" : "; NHWC outputs " + outputs));
  }
  return changed;
}

const std::vector<PassInfo>& model_format_passes() {
  static const std::vector<PassInfo> passes = {
      {"convert_fp16_to_fp32", "float16 tensors, values and casts made float32", convert_fp16_to_fp32},
      {"convert_nchw_to_nhwc", "4-D NCHW image inputs declared NHWC, one transpose moved into the graph",
       convert_nchw_to_nhwc},
  };
  return passes;
}

}  // namespace onnxptq::passes
