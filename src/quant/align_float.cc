// Quark's float-scale alignment loop (postprocess/refinement/refine.py align_quantize_info).
#include "quant/align_float.h"

#include <set>

#include "onnxptq/error.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

constexpr int kMaxSweeps = 5;  // Quark's MaxLoopNum default for align_quantize_info

bool same_params(const TensorPlan& a, const TensorPlan& b) {
  if (a.type != b.type || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].scale != b.params[i].scale || a.params[i].zero_point != b.params[i].zero_point ||
        a.params[i].float_zero_point != b.params[i].float_zero_point)
      return false;
  return true;
}

class Aligner {
 public:
  Aligner(Plan& plan, const ir::Model& model, const QuantConfig& config)
      : plan_(plan), graph_(*model.graph), config_(config), order_(model.graph->topological_order_with_bodies()) {}

  std::vector<AlignChange> run() {
    for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
      size_t before = changes_.size();
      // Each rule over every node before the next rule, in Quark's order.
      rule("AlignConcat", config_.align_concat, {"Concat"}, true);
      rule("AlignPool", config_.align_pool, {"MaxPool", "AveragePool", "GlobalAveragePool"}, false);
      rule("AlignPad", config_.align_pad, {"Pad"}, true);
      rule("AlignSlice", config_.align_slice, {"Slice"}, false);
      rule("AlignTranspose", config_.align_transpose, {"Transpose"}, true);
      rule("AlignReshape", config_.align_reshape, {"Reshape"}, true);
      share_parameters();
      // Quark's adjust_bias_scale does not count as a change that asks for another sweep.
      bool aligned = changes_.size() > before;
      if (config_.adjust_bias_scale) adjust_bias_scales();
      if (!aligned) break;
    }
    return std::move(changes_);
  }

 private:
  // The parameter provider of a value that has a Q/DQ pair in the exported model: a planned
  // activation (weights and biases have a DequantizeLinear only) that something reads.
  TensorPlan* pair_provider(const ir::Value* v) {
    if (!v || v->name().empty()) return nullptr;
    const TensorPlan* t = plan_.find(v->name());
    if (!t || t->role != Role::Activation) return nullptr;
    if (v->uses().empty() && !v->graph()->is_output(v)) return nullptr;
    TensorPlan* p = plan_.find(plan_.provider(v->name()).name);
    return p && !p->params.empty() ? p : nullptr;
  }

  void copy(const ir::Node& n, const std::string& rule, const TensorPlan& from, TensorPlan& to) {
    if (&from == &to || same_params(from, to)) return;
    AlignChange c{rule, n.name, to.name, to.params[0].scale, from.params[0].scale};
    to.type = from.type;
    to.params = from.params;
    to.pos = from.pos;
    changes_.push_back(c);
  }

  void rule(const std::string& name, std::optional<bool> on, const std::set<std::string>& ops, bool output_to_input) {
    if (!on.value_or(false)) return;
    for (const ir::Node* n : order_)
      if (ops.count(n->op_type)) output_to_input ? output_to_inputs(*n, name) : input_to_outputs(*n, name);
  }

  // Quark's copy_output_qinfo_to_inputs: the first output's parameters to every input with a pair.
  void output_to_inputs(const ir::Node& n, const std::string& rule) {
    TensorPlan* out = pair_provider(n.output(0));
    if (!out) return;
    for (const ir::Value* v : n.inputs())
      if (TensorPlan* in = pair_provider(v)) copy(n, rule, *out, *in);
  }

  // Quark's copy_input_qinfo_to_outputs: the first input's parameters to every output with a pair.
  void input_to_outputs(const ir::Node& n, const std::string& rule) {
    TensorPlan* in = pair_provider(n.input(0));
    if (!in) return;
    for (const ir::Value* v : n.outputs())
      if (TensorPlan* out = pair_provider(v)) copy(n, rule, *in, *out);
  }

  // Tensors sharing a provider's parameters follow it (as they share its initializers when exported).
  void share_parameters() {
    for (TensorPlan& t : plan_.tensors) {
      if (t.shared_from.empty()) continue;
      const TensorPlan& p = plan_.provider(t.name);
      t.type = p.type;
      t.params = p.params;
      t.pos = p.pos;
    }
  }

  void adjust_bias_scales() {
    const BiasOptions base = bias_options_of(scale_tool(config_));
    for (const ir::Node* n : order_) {
      if (n->op_type != "Conv" && n->op_type != "ConvTranspose" && n->op_type != "Gemm") continue;
      TensorPlan* b = n->input(2) ? plan_.find(n->input(2)->name()) : nullptr;
      if (!b || b->role != Role::Bias || b->params.empty()) continue;
      const TensorPlan& in = plan_.provider(b->bias_input);
      const TensorPlan& w = plan_.provider(b->bias_weight);
      if (in.params.empty() || w.params.empty()) continue;
      const ir::Value* bv = graph_.find_value_nested(b->name);
      if (!bv || !bv->has_initializer()) throw Error("AdjustBiasScale: bias '" + b->name + "' is not an initializer");
      BiasOptions o = base;
      o.beta = b->bias_beta;
      QuantizedBias q = quantize_bias(bv->initializer(), in.params[0].scale, w.params, o);
      bool differs = q.scales.size() != b->params.size();
      for (size_t i = 0; !differs && i < q.scales.size(); ++i) differs = q.scales[i] != b->params[i].scale;
      if (!differs) continue;
      AlignChange c{"AdjustBiasScale", n->name, b->name, b->params[0].scale, q.scales[0]};
      b->params.clear();
      for (double s : q.scales) b->params.push_back({s, 0});
      b->data = std::move(q.data);
      b->bias_clipped = q.clipped;
      if (q.clipped)
        plan_.warnings.push_back("bias '" + b->name + "' has values beyond int32 after AdjustBiasScale: clipped");
      changes_.push_back(c);
    }
  }

  Plan& plan_;
  const ir::Graph& graph_;
  const QuantConfig& config_;
  std::vector<ir::Node*> order_;
  std::vector<AlignChange> changes_;
};

}  // namespace

std::vector<AlignChange> align_float_scales(Plan& plan, const ir::Model& model, const QuantConfig& config) {
  return Aligner(plan, model, config).run();
}

}  // namespace onnxptq::quant
