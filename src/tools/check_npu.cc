// check-npu: the IPU limitation constraints (vai_q_onnx refine.py) on an exported power-of-two model,
// positions read from its quantize nodes.
#include "tools/check_npu.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "onnxptq/error.h"
#include "qmath/params.h"
#include "quant/ipu_rules.h"

namespace onnxptq::tools {

namespace {

bool is_quantize_op(const ir::Node& n) {
  const std::string& op = n.op_type;
  return op == "QuantizeLinear" || op == "DequantizeLinear" || op == "VitisQuantizeLinear" ||
         op == "VitisDequantizeLinear" || op == "ExtendedQuantizeLinear" || op == "ExtendedDequantizeLinear" ||
         op == "FixNeuron";
}

const ir::Tensor* constant_tensor(const ir::Value* v) {
  if (!v) return nullptr;
  if (v->has_initializer()) return &v->initializer();
  if (const ir::Node* p = v->producer(); p && p->op_type == "Constant")
    if (const ir::Attribute* a = p->find_attribute("value")) return &a->t;
  return nullptr;
}

std::string describe(const ir::Node& n) { return n.op_type + " '" + n.name + "'"; }

// The position a scale stands for: every value the same power of two, stored exactly in float32.
int scale_position(const ir::Node& n) {
  const ir::Value* sv = n.input(1);
  const ir::Tensor* t = constant_tensor(sv);
  if (!t || t->dtype() != ir::DataType::Float || t->size() < 1)
    throw Error("check-npu: " + describe(n) + " has no constant float scale");
  std::span<const float> s = t->values<float>();
  for (float x : s)
    if (x != s[0])
      throw Error("check-npu: " + describe(n) + " has per-channel scales ('" + sv->name() +
                  "'): the NPU takes one position per tensor");
  int pos = qmath::scale_to_pos(s[0]);
  if (!(s[0] > 0) || static_cast<float>(qmath::pos_to_scale(pos)) != s[0]) {
    std::ostringstream msg;
    msg << "check-npu: " << describe(n) << " has scale " << s[0] << " ('" << sv->name()
        << "'), not a power of two: check-npu reads power-of-two models";
    throw Error(msg.str());
  }
  return pos;
}

int fix_neuron_position(const ir::Node& n) {
  const ir::Attribute* a = n.find_attribute("pos");
  if (!a) throw Error("check-npu: " + describe(n) + " has no pos attribute");
  std::string text = a->type == ir::AttrType::Int ? std::to_string(a->i) : a->s;
  size_t used = 0;
  int pos = 0;
  try {
    pos = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    throw Error("check-npu: " + describe(n) + " has pos '" + text + "', not an integer");
  // Our FixNeuron also carries the scale it computes with: the two must agree (vai_q_onnx 1.16's
  // refinement rewrites only the pos attribute of a FixNeuron).
  if (constant_tensor(n.input(1)) && scale_position(n) != pos)
    throw Error("check-npu: " + describe(n) + " has pos " + text + " but computes with scale 2^-" +
                std::to_string(scale_position(n)));
  return pos;
}

// Positions around the exported model's nodes: a tensor read by a node has the position of the
// quantize node writing it; one written by a node, that of the quantize node reading it. A slot is
// a Q/DQ's scale initializer (shared scales move together) or a FixNeuron.
class ModelPositions : public quant::PositionView {
 public:
  explicit ModelPositions(const ir::Graph& g) {
    for (const auto& node : g.nodes()) {
      if (!is_quantize_op(*node) || !node->input(0) || !node->output(0)) continue;
      std::string slot;
      int pos = 0;
      if (node->op_type == "FixNeuron") {
        slot = "FixNeuron " + node->name;
        pos = fix_neuron_position(*node);
      } else {
        slot = node->input(1) ? node->input(1)->name() : "";
        pos = scale_position(*node);
      }
      pos_[slot] = pos;
      ++count_;
      read_[node->output(0)] = slot;
      write_.emplace(node->input(0), slot);  // the first reader in node order
    }
  }
  size_t count() const { return count_; }
  std::string read_slot(const ir::Value* v) const override { return find(read_, v); }
  std::string write_slot(const ir::Value* v) const override { return find(write_, v); }
  std::optional<int> pos(const std::string& slot) const override {
    auto it = pos_.find(slot);
    if (it == pos_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static std::string find(const std::map<const ir::Value*, std::string>& m, const ir::Value* v) {
    auto it = m.find(v);
    return it == m.end() ? "" : it->second;
  }
  std::map<std::string, int> pos_;
  std::map<const ir::Value*, std::string> read_, write_;
  size_t count_ = 0;
};

std::optional<int> bound(int v) {
  if (std::abs(v) == quant::kNoBound) return std::nullopt;
  return v;
}

}  // namespace

NpuCheck check_npu(const ir::Model& model) {
  const ir::Graph& g = *model.graph;
  ModelPositions view(g);
  NpuCheck result;
  result.positions = view.count();
  if (result.positions == 0)
    throw Error(
        "check-npu: the model has no QuantizeLinear, DequantizeLinear or FixNeuron nodes: not a quantized model");
  const quant::IpuAnnotation annotation{true, true, true, true};
  for (quant::IpuRule rule : quant::kIpuRules)
    for (const auto& node : g.nodes()) {
      if (!node->domain.empty() && node->domain != "ai.onnx") continue;
      std::optional<quant::IpuRuleCheck> check = quant::ipu_check_node(rule, *node, view, annotation);
      if (!check) continue;
      ++result.checks;
      for (const quant::IpuConstraint& c : check->constraints)
        if (!c.holds())
          result.violations.push_back({node->name, node->op_type, quant::ipu_rule_name(rule), c.quantity, c.value,
                                       bound(c.lo), bound(c.hi), c.terms});
    }
  return result;
}

std::string format_npu_check(const NpuCheck& check) {
  std::ostringstream out;
  out << check.violations.size() << (check.violations.size() == 1 ? " violation" : " violations") << " ("
      << check.positions << " positions, " << check.checks << " rule checks)\n";
  for (const NpuViolation& v : check.violations)
    out << v.rule << "  " << v.op_type << " '" << v.node << "': " << v.quantity << " = " << v.value << ", allowed ["
        << (v.lo ? std::to_string(*v.lo) : "-inf") << ", " << (v.hi ? std::to_string(*v.hi) : "inf") << "] (" << v.terms
        << ")\n";
  return out.str();
}

nlohmann::json npu_check_json(const NpuCheck& check) {
  nlohmann::json list = nlohmann::json::array();
  for (const NpuViolation& v : check.violations) {
    auto b = [](std::optional<int> x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); };
    list.push_back({{"rule", v.rule},
                    {"node", v.node},
                    {"op_type", v.op_type},
                    {"quantity", v.quantity},
                    {"value", v.value},
                    {"allowed", {b(v.lo), b(v.hi)}},
                    {"terms", v.terms}});
  }
  return {{"positions", check.positions}, {"checks", check.checks}, {"violations", list}};
}

}  // namespace onnxptq::tools
