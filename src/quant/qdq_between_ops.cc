// Quark's RemoveQDQMulAdd and RemoveQDQBetweenOps (its remove_qdq_mul_add and remove_qdq_between_ops
// tools, run by apply_post_process) on the plan.
#include <algorithm>

#include "ir/data_type.h"
#include "quant/post_process.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

// The node whose output 0 is `v` in the written model: its producer, or for the output of a
// Relu/Clip the plan removed, the node that Relu was fused into.
const ir::Node* written_by(const ir::Value* v, const Plan& plan) {
  const ir::Node* p = v->producer();
  if (p && plan.removed_activations.count(v->name()) && p->input(0)) return p->input(0)->producer();
  return p;
}

// Takes `name` (parameters assigned) out of the plan; the tensors sharing its parameters keep
// them, the first one as their new provider.
void drop_from_plan(Plan& plan, const std::string& name) {
  const TensorPlan removed = *plan.find(name);
  std::string heir;
  for (TensorPlan& t : plan.tensors) {
    if (t.shared_from != name) continue;
    if (!removed.shared_from.empty()) {
      t.shared_from = removed.shared_from;
    } else if (heir.empty()) {
      heir = t.name;  // params and pos are the removed tensor's already (assign_parameters copied them)
      t.shared_from.clear();
    } else {
      t.shared_from = heir;
    }
  }
  std::erase_if(plan.tensors, [&](const TensorPlan& t) { return t.name == name; });
  plan.index.clear();
  for (size_t i = 0; i < plan.tensors.size(); ++i) plan.index[plan.tensors[i].name] = i;
}

// Written as QuantizeLinear / DequantizeLinear (standard or com.microsoft): 8- and 16-bit integers.
bool written_as_qdq(const Plan& plan, const TensorPlan& t) {
  ir::DataType type = plan.provider(t.name).type;
  return !quant_type_is_float(type) && (ir::data_type_bits(type) == 8 || ir::data_type_bits(type) == 16);
}

}  // namespace

size_t remove_qdq_between_ops(Plan& plan, const ir::Model& model, const QuantConfig& config) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (config.remove_qdq_mul_add) pairs.emplace_back("Mul", "Add");
  pairs.insert(pairs.end(), config.remove_qdq_between_ops.begin(), config.remove_qdq_between_ops.end());
  const ir::Graph& graph = *model.graph;
  size_t removed = 0;
  for (const auto& [upper, lower] : pairs)
    for (const auto& node : graph.nodes()) {
      if (node->op_type != lower) continue;
      for (const ir::Value* v : node->inputs()) {
        const TensorPlan* t = v ? plan.find(v->name()) : nullptr;
        if (!t || t->role != Role::Activation || t->convert || !written_as_qdq(plan, *t)) continue;
        const ir::Node* writer = written_by(v, plan);
        if (!writer || writer->op_type != upper || graph.is_output(v)) continue;
        if (v->uses().size() != 1) {
          if (config.dedicated_qdq_pair && v->uses().size() > 1)
            plan.warnings.push_back("RemoveQDQBetweenOps: '" + v->name() +
                                    "' has a Q/DQ pair for each reader (DedicatedQDQPair): they all stay");
          continue;
        }
        drop_from_plan(plan, v->name());
        ++removed;
      }
    }
  return removed;
}

}  // namespace onnxptq::quant
