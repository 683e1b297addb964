// vai_q_onnx's IPULimitationCheck constraints and corrections on one node (refine.py), with its position lookups.
#include "quant/ipu_rules.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace onnxptq::quant {

const char* ipu_rule_name(IpuRule rule) {
  switch (rule) {
    case IpuRule::AdjustShiftRead:
      return "AdjustShiftRead";
    case IpuRule::AdjustShiftWrite:
      return "AdjustShiftWrite";
    case IpuRule::AdjustShiftCut:
      return "AdjustShiftCut";
    case IpuRule::AdjustShiftBias:
      return "AdjustShiftBias";
    case IpuRule::AdjustHardSigmoid:
      return "AdjustHardSigmoid";
    case IpuRule::AdjustShiftSwish:
      return "AdjustShiftSwish";
    case IpuRule::AlignConcat:
      return "AlignConcat";
    case IpuRule::AlignPool:
      return "AlignPool";
    case IpuRule::AlignPad:
      return "AlignPad";
    case IpuRule::AlignSlice:
      return "AlignSlice";
  }
  return "?";
}

bool is_dpu_hard_sigmoid(const ir::Node& node) {
  if (!node.find_attribute("alpha") || std::fabs(node.attr_float("alpha", 0) - 1.0 / 6.0) >= 1e-6) return false;
  return !node.find_attribute("beta") || std::fabs(node.attr_float("beta", 0) - 0.5) < 1e-6;
}

namespace {

bool is_avg_pool(const ir::Node& n) { return n.op_type == "AveragePool" || n.op_type == "GlobalAveragePool"; }

// The producers whose output Q/DQ vai_q_onnx removes before an annotated activation (VitisQDQDPUQuantizer).
bool is_annotate_op(const ir::Node& n, const IpuAnnotation& a) {
  static const char* const ops[] = {"Conv", "Add", "MaxPool", "AveragePool", "GlobalAveragePool", "MatMul", "Gemm"};
  if (n.op_type == "InstanceNormalization") return a.instance_norm;
  return std::any_of(std::begin(ops), std::end(ops), [&](const char* op) { return n.op_type == op; });
}

// A scalar float constant: an initializer or a Constant node's value.
std::optional<double> scalar_constant(const ir::Value* v) {
  if (!v) return std::nullopt;
  const ir::Tensor* t = nullptr;
  if (v->has_initializer()) {
    t = &v->initializer();
  } else if (const ir::Node* p = v->producer(); p && p->op_type == "Constant") {
    const ir::Attribute* a = p->find_attribute("value");
    if (a) t = &a->t;
  }
  if (!t || t->size() != 1 || t->dtype() != ir::DataType::Float) return std::nullopt;
  return t->values<float>()[0];
}

// vai_q_onnx's "needs annotation": Relu, Clip(0, 6) (constants within 1e-5), LeakyRelu and PRelu, as
// Quark's RemoveQDQConv* switches ask.
bool needs_annotation(const ir::Node& n, const IpuAnnotation& a) {
  if (n.op_type == "Relu") return a.relu;
  if (n.op_type == "LeakyRelu") return a.leaky_relu;
  if (n.op_type == "PRelu") return a.prelu;
  if (n.op_type == "Gelu") return a.gelu;
  if (n.op_type != "Clip" || n.inputs().size() != 3 || !a.clip) return false;
  std::optional<double> lo = scalar_constant(n.input(1)), hi = scalar_constant(n.input(2));
  return lo && hi && std::fabs(*lo) < 1e-5 && std::fabs(*hi - 6) < 1e-5;
}

// ipos_k: the slot `node` reads input k with; ipos (look_through) lets an AveragePool or
// GlobalAveragePool with none look one producer further back (through an unquantized Pad, as vai_q_onnx does).
std::string input_slot(const ir::Node& node, size_t k, const PositionView& view, bool look_through = false) {
  const ir::Value* v = node.input(k);
  if (!v || v->name().empty()) return "";
  std::string slot = view.read_slot(v);
  if (!slot.empty() || !look_through || !is_avg_pool(node)) return slot;
  const ir::Node* p = v->producer();
  if (!p || v->producer_output() != 0 || !p->input(0)) return "";
  return view.read_slot(p->input(0));
}

// opos: the slot `node` writes output 0 with; with none, that of a consumer's output when the
// consumer is the DPU scaling Mul of a pool or HardSigmoid, or an activation fused into `node`.
std::string output_slot(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  const ir::Value* out = node.output(0);
  if (!out) return "";
  std::string slot = view.write_slot(out);
  if (!slot.empty()) return slot;
  for (const ir::Use& u : out->uses()) {
    const ir::Node& c = *u.node;
    if (u.input != 0 || !c.output(0)) continue;
    bool scaling_mul = (is_avg_pool(node) || node.op_type == "HardSigmoid") && c.op_type == "Mul";
    bool fused = is_annotate_op(node, a) && (needs_annotation(c, a) || view.fused_activation(c));
    if (!scaling_mul && !fused) continue;
    slot = view.write_slot(c.output(0));
    if (!slot.empty()) return slot;
  }
  return "";
}

struct Slot {
  std::string name;
  int pos = 0;
};

std::optional<Slot> slot_pos(const std::string& name, const PositionView& view) {
  if (name.empty()) return std::nullopt;
  std::optional<int> p = view.pos(name);
  if (!p) return std::nullopt;
  return Slot{name, *p};
}

// Every input's slot, or nothing when one has no position (vai skips the Add/Mul then).
std::optional<std::vector<Slot>> all_inputs(const ir::Node& node, const PositionView& view) {
  std::vector<Slot> slots;
  for (size_t k = 0; k < node.inputs().size(); ++k) {
    std::optional<Slot> s = slot_pos(input_slot(node, k, view), view);
    if (!s) return std::nullopt;
    slots.push_back(*s);
  }
  if (slots.empty()) return std::nullopt;
  return slots;
}

int clamp_to(int v, int lo, int hi) { return std::clamp(v, lo, hi); }

std::string term(const char* name, int pos) { return std::string(name) + " " + std::to_string(pos); }

std::string terms_of(const char* name, const std::vector<Slot>& slots) {
  std::string out;
  for (size_t k = 0; k < slots.size(); ++k)
    out += (k ? ", " : "") + std::string(name) + std::to_string(k) + " " + std::to_string(slots[k].pos);
  return out;
}

IpuRuleCheck single(IpuConstraint c) {
  IpuRuleCheck r;
  r.constraints.push_back(std::move(c));
  return r;
}

std::optional<IpuRuleCheck> shift_read(const ir::Node& node, const PositionView& view) {
  if (node.op_type != "Add") return std::nullopt;
  auto in = all_inputs(node, view);
  if (!in) return std::nullopt;
  // The first input with the smallest and the first with the largest position (numpy's argmin, argmax).
  auto less = [](const Slot& x, const Slot& y) { return x.pos < y.pos; };
  auto lo = std::min_element(in->begin(), in->end(), less);
  auto hi = std::max_element(in->begin(), in->end(), less);
  IpuRuleCheck r = single({"shift_read = max(ipos) - min(ipos)", terms_of("ipos", *in), hi->pos - lo->pos, 0, 7});
  if (!r.constraints[0].holds()) r.changes.push_back({hi->name, hi->pos, lo->pos + 7});
  return r;
}

std::optional<IpuRuleCheck> shift_write(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  bool add = node.op_type == "Add";
  if (!add && node.op_type != "Mul") return std::nullopt;
  auto in = all_inputs(node, view);
  if (!in) return std::nullopt;
  std::optional<Slot> out = slot_pos(output_slot(node, view, a), view);
  if (!out) return std::nullopt;
  int base = 0;
  if (add)
    base = std::min_element(in->begin(), in->end(), [](const Slot& x, const Slot& y) { return x.pos < y.pos; })->pos;
  else
    base = std::accumulate(in->begin(), in->end(), 0, [](int s, const Slot& x) { return s + x.pos; });
  int lo = add ? -7 : 0, hi = add ? 25 : 32;
  IpuRuleCheck r = single({add ? "shift_write = min(ipos) - opos" : "shift_write = sum(ipos) - opos",
                           terms_of("ipos", *in) + ", " + term("opos", out->pos), base - out->pos, lo, hi});
  if (!r.constraints[0].holds()) r.changes.push_back({out->name, out->pos, base - clamp_to(base - out->pos, lo, hi)});
  return r;
}

struct ConvSlots {
  Slot in, w, out;
};

std::optional<ConvSlots> conv_slots(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  if (node.op_type != "Conv" && node.op_type != "Gemm") return std::nullopt;
  std::optional<Slot> in = slot_pos(input_slot(node, 0, view, true), view);
  std::optional<Slot> w = slot_pos(input_slot(node, 1, view), view);
  std::optional<Slot> out = slot_pos(output_slot(node, view, a), view);
  if (!in || !w || !out) return std::nullopt;
  return ConvSlots{*in, *w, *out};
}

std::optional<IpuRuleCheck> shift_cut(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  auto s = conv_slots(node, view, a);
  if (!s) return std::nullopt;
  int sc = s->w.pos + s->in.pos - s->out.pos;
  IpuRuleCheck r =
      single({"shift_cut = wpos + ipos - opos",
              term("wpos", s->w.pos) + ", " + term("ipos", s->in.pos) + ", " + term("opos", s->out.pos), sc, 0, 16});
  if (!r.constraints[0].holds())
    r.changes.push_back({s->w.name, s->w.pos, clamp_to(sc, 0, 16) + s->out.pos - s->in.pos});
  return r;
}

std::optional<IpuRuleCheck> shift_bias(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  if (node.inputs().size() < 3) return std::nullopt;
  auto s = conv_slots(node, view, a);
  std::optional<Slot> b = slot_pos(input_slot(node, 2, view), view);
  if (!s || !b) return std::nullopt;
  int sc = s->w.pos + s->in.pos - s->out.pos;
  int lo = std::min(0, -(24 - (8 + sc)));
  // A LeakyRelu reading the output itself (no Q/DQ between: fused into the node) raises it to 0.
  const ir::Value* y = node.output(0);
  if (view.write_slot(y).empty())
    for (const ir::Use& u : y->uses())
      if (u.node->op_type == "LeakyRelu" && u.input == 0) lo = 0;
  int sb = s->w.pos + s->in.pos - b->pos;
  IpuRuleCheck r = single({"shift_bias = wpos + ipos - bpos",
                           term("wpos", s->w.pos) + ", " + term("ipos", s->in.pos) + ", " + term("bpos", b->pos) +
                               ", shift_cut " + std::to_string(sc),
                           sb, lo, 15});
  if (!r.constraints[0].holds()) r.changes.push_back({b->name, b->pos, s->w.pos + s->in.pos - clamp_to(sb, lo, 15)});
  return r;
}

// vai_q_onnx checks shift_sigmoid >= 0 (adjust_hard_sigmoid's docstring; its code tests > 0): its correction sets
// opos := 14 + ipos when shift_sigmoid <= 0, which gives 0. The upper bound cannot be passed once
// ipos <= 15 and opos >= 7.
std::optional<IpuRuleCheck> hard_sigmoid(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  if (node.op_type != "HardSigmoid" || !is_dpu_hard_sigmoid(node)) return std::nullopt;
  std::optional<Slot> in = slot_pos(input_slot(node, 0, view, true), view);
  std::optional<Slot> out = slot_pos(output_slot(node, view, a), view);
  if (!in || !out) return std::nullopt;
  std::string terms = term("ipos", in->pos) + ", " + term("opos", out->pos);
  IpuRuleCheck r;
  r.constraints.push_back({"ipos", terms, in->pos, 0, 15});
  r.constraints.push_back({"opos", terms, out->pos, 7, kNoBound});
  r.constraints.push_back({"shift_sigmoid = 14 + ipos - opos", terms, 14 + in->pos - out->pos, 0, 31});
  int new_in = std::clamp(in->pos, 0, 15);
  int new_out = std::max(out->pos, 7);
  if (14 + new_in - new_out <= 0) new_out = 14 + new_in;
  if (new_in != in->pos) r.changes.push_back({in->name, in->pos, new_in});
  if (new_out != out->pos) r.changes.push_back({out->name, out->pos, new_out});
  return r;
}

std::optional<IpuRuleCheck> shift_swish(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  if (node.op_type != "Mul" || node.inputs().size() != 2) return std::nullopt;
  // x * hsigmoid(x): an input is also input 0 of a DPU hard sigmoid (any op type with those attributes).
  bool swish = false;
  for (const ir::Value* v : node.inputs())
    if (v)
      for (const ir::Use& u : v->uses()) swish = swish || (u.input == 0 && is_dpu_hard_sigmoid(*u.node));
  if (!swish) return std::nullopt;
  std::optional<Slot> out = slot_pos(output_slot(node, view, a), view);
  std::optional<Slot> i0 = slot_pos(input_slot(node, 0, view), view);
  std::optional<Slot> i1 = slot_pos(input_slot(node, 1, view), view);
  if (!out || !i0 || !i1) return std::nullopt;
  int ss = i0->pos + i1->pos - out->pos;
  IpuRuleCheck r =
      single({"shift_swish = ipos0 + ipos1 - opos",
              term("ipos0", i0->pos) + ", " + term("ipos1", i1->pos) + ", " + term("opos", out->pos), ss, 0, 15});
  if (!r.constraints[0].holds()) r.changes.push_back({out->name, out->pos, i0->pos + i1->pos - clamp_to(ss, 0, 15)});
  return r;
}

// Every position equal: the output's and the inputs' that have one become their minimum.
IpuRuleCheck align(const Slot& out, const std::vector<Slot>& inputs) {
  int lo = out.pos, hi = out.pos;
  for (const Slot& s : inputs) {
    lo = std::min(lo, s.pos);
    hi = std::max(hi, s.pos);
  }
  IpuRuleCheck r =
      single({"max(pos) - min(pos)", terms_of("ipos", inputs) + ", " + term("opos", out.pos), hi - lo, 0, 0});
  if (out.pos != lo) r.changes.push_back({out.name, out.pos, lo});
  for (const Slot& s : inputs) {
    bool done =
        std::any_of(r.changes.begin(), r.changes.end(), [&](const IpuPositionChange& c) { return c.slot == s.name; });
    if (s.pos != lo && !done) r.changes.push_back({s.name, s.pos, lo});
  }
  return r;
}

std::optional<IpuRuleCheck> align_concat(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  if (node.op_type != "Concat") return std::nullopt;
  std::optional<Slot> out = slot_pos(output_slot(node, view, a), view);
  if (!out) return std::nullopt;
  std::vector<Slot> inputs;
  for (size_t k = 0; k < node.inputs().size(); ++k)
    if (std::optional<Slot> s = slot_pos(input_slot(node, k, view), view)) inputs.push_back(*s);
  return align(*out, inputs);
}

// Input 0 and the output of a pool (or, for Quark, of a Pad or Slice) take the smaller position.
std::optional<IpuRuleCheck> align_in_out(const ir::Node& node, const PositionView& view, const IpuAnnotation& a) {
  std::optional<Slot> in = slot_pos(input_slot(node, 0, view, true), view);
  std::optional<Slot> out = slot_pos(output_slot(node, view, a), view);
  if (!in || !out) return std::nullopt;
  return align(*out, {*in});
}

}  // namespace

std::optional<IpuRuleCheck> ipu_check_node(IpuRule rule, const ir::Node& node, const PositionView& view,
                                           const IpuAnnotation& annotation) {
  switch (rule) {
    case IpuRule::AdjustShiftRead:
      return shift_read(node, view);
    case IpuRule::AdjustShiftWrite:
      return shift_write(node, view, annotation);
    case IpuRule::AdjustShiftCut:
      return shift_cut(node, view, annotation);
    case IpuRule::AdjustShiftBias:
      return shift_bias(node, view, annotation);
    case IpuRule::AdjustHardSigmoid:
      return hard_sigmoid(node, view, annotation);
    case IpuRule::AdjustShiftSwish:
      return shift_swish(node, view, annotation);
    case IpuRule::AlignConcat:
      return align_concat(node, view, annotation);
    case IpuRule::AlignPool:
      if (node.op_type != "MaxPool" && !is_avg_pool(node)) return std::nullopt;
      return align_in_out(node, view, annotation);
    case IpuRule::AlignPad:
      if (node.op_type != "Pad") return std::nullopt;
      return align_in_out(node, view, annotation);
    case IpuRule::AlignSlice:
      if (node.op_type != "Slice") return std::nullopt;
      return align_in_out(node, view, annotation);
  }
  return std::nullopt;
}

}  // namespace onnxptq::quant
