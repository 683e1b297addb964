// convert_qdq_to_qop (vai_q_onnx's tool): a QDQ model in QOperator form. The QDQ model is read
// back into what the quantizer exports from, a float model and its plan: each 8-bit
// QuantizeLinear -> DequantizeLinear pair becomes a planned tensor with its parameters, each
// dequantized integer weight a planned weight holding those integers, each int32 bias of a Conv in
// units of s_x * s_w a planned bias. The QOperator writer (quant/export.h) then writes QLinearConv,
// QLinearMatMul and ONNX Runtime's com.microsoft QLinear ops where every tensor of a node is
// planned, and keeps every other node float between DequantizeLinear and QuantizeLinear, so the
// result computes what the QDQ model does. Q/DQ nodes the plan cannot hold (16-bit, per-channel
// activations, a quantized value read by more than one node) stay as they are.
#include <cmath>
#include <set>

#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "quant/export.h"
#include "quant/qdq_nodes.h"
#include "quant/tensor_quant.h"
#include "tools/convert.h"

namespace onnxptq::tools {

namespace {

using quant::Role;
using quant::TensorPlan;

bool is_8bit(ir::DataType t) { return t == ir::DataType::Int8 || t == ir::DataType::UInt8; }

bool same_params(const QdqParams& a, const QdqParams& b) {
  if (a.type != b.type || a.axis != b.axis || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].scale != b.params[i].scale || a.params[i].zero_point != b.params[i].zero_point) return false;
  return true;
}

class QdqReader {
 public:
  explicit QdqReader(const ir::Model& model) : m_(ir::clone_model(model)), g_(*m_.graph) {}

  ir::Model run(ConvertResult& result) {
    if (m_.opset("") < 10)
      throw Error("qdq_to_qop: the model has opset " + std::to_string(m_.opset("")) +
                  "; QLinearConv and QuantizeLinear need opset 10 or later");
    // Each step removes nodes later in the graph's order: the nodes it reads are listed first.
    std::vector<ir::Node*> quantizers, dequantizers, convs;
    for (ir::Node* n : passes::nodes_in_order(g_))
      if (is_quantize_node(*n)) quantizers.push_back(n);
    for (ir::Node* q : quantizers) read_pair(q);
    for (ir::Node* n : passes::nodes_in_order(g_))
      if (is_dequantize_node(*n)) dequantizers.push_back(n);
    for (ir::Node* dq : dequantizers) read_weight(dq);
    for (ir::Node* n : passes::nodes_in_order(g_))
      if (n->op_type == "Conv" && (n->domain.empty() || n->domain == "ai.onnx")) convs.push_back(n);
    for (ir::Node* conv : convs) read_bias(conv);
    const size_t quantize_nodes = quantizers.size();
    if (quantize_nodes == 0 && plan_.tensors.empty())
      throw Error("the model has no QuantizeLinear or DequantizeLinear node: it is not a QDQ model");
    remove_unused_initializers(g_);
    for (const auto& node : g_.nodes()) plan_.quantized_nodes.push_back(node->name);
    quant::QuantConfig config;
    config.format = quant::QuantFormat::QOperator;
    config.calibrate_method = calib::Method::MinMax;  // float scales: ORT's bias arithmetic
    ir::Model out = quant::export_qoperator(m_, plan_, config);
    std::map<std::string, size_t> counts;
    for (const auto& node : out.graph->nodes())
      if (node->op_type.rfind("QLinear", 0) == 0) ++counts[node->op_type];
    size_t qlinear = 0;
    std::string line;
    for (const auto& [op, count] : counts) {
      qlinear += count;
      line += (line.empty() ? "" : ", ") + op + " " + std::to_string(count);
    }
    result.changed = qlinear;
    result.log.push_back(std::to_string(plan_.tensors.size()) + " quantized tensors read; " + std::to_string(qlinear) +
                         " QLinear nodes" + (line.empty() ? "" : " (" + line + ")") + "; " +
                         std::to_string(requantized_) + " biases quantized again in units of s_x * s_w; " +
                         std::to_string(left_) + " quantize/dequantize nodes kept as they are");
    if (qlinear == 0) result.log.push_back("warning: no node could take a QLinear form");
    return out;
  }

 private:
  static TensorPlan entry(const std::string& name, Role role, ir::DataType type) {
    TensorPlan t;
    t.name = name;
    t.role = role;
    t.type = type;
    return t;
  }

  void plan(TensorPlan t) {
    plan_.index[t.name] = plan_.tensors.size();
    plan_.tensors.push_back(std::move(t));
  }

  // Every reader of the quantize node's value is a dequantize node of the same parameters.
  bool only_pairs_read(const ir::Value* x, const QdqParams& p) const {
    if (g_.is_output(x)) return false;
    for (const ir::Use& u : x->uses()) {
      if (!is_quantize_node(*u.node) || u.input != 0) return false;
      std::optional<QdqParams> q = qdq_params(*u.node);
      if (!q || !same_params(*q, p) || !single_dequantize_reader(u.node->output(0))) return false;
    }
    return true;
  }

  // The float model's name for a tensor that `dq` dequantizes: the readers of its output read
  // `target`; a graph output keeps its name through an Identity.
  void redirect(ir::Node* dq, ir::Value* target) {
    ir::Value* y = dq->output(0);
    std::string name = dq->name;
    if (g_.is_output(y)) {
      g_.remove_node(dq);
      g_.add_node("Identity", {target}, {y}, name.empty() ? "" : g_.fresh_name(name + "_Identity"));
      return;
    }
    g_.replace_uses(y, target);
    g_.remove_node(dq);
    g_.remove_value(y);
  }

  void read_pair(ir::Node* q) {
    ir::Node* dq = single_dequantize_reader(q->output(0));
    std::optional<QdqParams> p = qdq_params(*q);
    std::optional<QdqParams> pd = dq ? qdq_params(*dq) : std::nullopt;
    if (!dq || !p || !pd || !same_params(*p, *pd) || !is_8bit(p->type)) {
      ++left_;
      return;
    }
    ir::Value* x = q->input(0);
    ir::Value* target = nullptr;
    if (x->has_initializer()) {  // a float weight with a pair: its integers as the pair computes them
      if (x->initializer().dtype() != ir::DataType::Float) {
        ++left_;
        return;
      }
      target = x;
      if (x->uses().size() != 1 || g_.is_input(x) || g_.is_output(x) || plan_.find(x->name())) {
        target = g_.add_unique_value(x->name() + "_weight");
        g_.set_initializer(target, x->initializer());
      }
      TensorPlan t = entry(target->name(), Role::Weight, p->type);
      std::optional<int64_t> axis = p->axis;
      if (axis && *axis < 0) *axis += static_cast<int64_t>(x->initializer().rank());
      t.axis = axis;
      t.params = p->params;
      t.data = quant::quantize_tensor(x->initializer(), p->type, p->params, axis);
      plan(std::move(t));
    } else {
      if (p->params.size() != 1) {  // per-channel activations: QOperator has no such tensor
        ++left_;
        return;
      }
      const TensorPlan* known = plan_.find(x->name());
      bool direct = only_pairs_read(x, *p) &&
                    (!known || (known->params[0].scale == p->params[0].scale &&
                                known->params[0].zero_point == p->params[0].zero_point && known->type == p->type));
      target = x;
      if (!direct) {  // x is also read as it is, or quantized otherwise: the pair reads a copy
        target = g_.add_unique_value(x->name() + "_to_quantize");
        g_.add_node("Identity", {x}, {target}, q->name.empty() ? "" : g_.fresh_name(q->name + "_Identity"));
      }
      if (!plan_.find(target->name())) {
        TensorPlan t = entry(target->name(), Role::Activation, p->type);
        t.params = p->params;
        plan(std::move(t));
      }
    }
    ir::Value* qv = q->output(0);
    redirect(dq, target);
    g_.remove_node(q);
    g_.remove_value(qv);
  }

  // A stored 8-bit weight and its DequantizeLinear: a float initializer of the dequantized values,
  // planned with the stored integers.
  void read_weight(ir::Node* dq) {
    ir::Value* w = dq->input(0);
    ir::Value* y = dq->output(0);
    std::optional<QdqParams> p = qdq_params(*dq);
    if (!w->has_initializer() || g_.is_input(w) || !p || g_.is_output(y)) {
      ++left_;
      return;
    }
    const ir::Tensor& data = w->initializer();
    if (data.dtype() != p->type) {
      ++left_;
      return;
    }
    std::optional<int64_t> axis = p->axis;
    if (axis && *axis < 0) *axis += static_cast<int64_t>(data.rank());
    if (axis && (*axis < 0 || *axis >= static_cast<int64_t>(data.rank()) ||
                 data.dims()[*axis] != static_cast<int64_t>(p->params.size()))) {
      ++left_;
      return;
    }
    if (p->type == ir::DataType::Int32) {  // a bias, if a Conv takes it (read_bias)
      int32_biases_[y->name()] = {*p, axis};
      return;
    }
    if (!is_8bit(p->type)) {
      ++left_;
      return;
    }
    TensorPlan t = entry(y->name(), Role::Weight, p->type);
    t.axis = axis;
    t.params = p->params;
    t.data = data;
    ir::Tensor values = quant::dequantize_tensor(data, p->params, axis);
    g_.remove_node(dq);
    g_.set_initializer(y, std::move(values));
    plan(std::move(t));
  }

  // An int32 bias of a Conv whose input and weight are planned: QLinearConv reads it in units of
  // s_x * s_w. A bias in other units (one bias several Convs share is quantized for the first) is
  // quantized again from its dequantized values for this Conv, as ORT's quantize_bias_static does.
  void read_bias(ir::Node* conv) {
    ir::Value* b = conv->input(2);
    if (!b || b->name().empty() || !int32_biases_.count(b->name())) return;
    const TensorPlan* x = plan_.find(conv->input(0)->name());
    const TensorPlan* w = conv->input(1) ? plan_.find(conv->input(1)->name()) : nullptr;
    if (!x || !w || x->role != Role::Activation || w->role != Role::Weight || x->params.size() != 1) return;
    const auto& [p, axis] = int32_biases_.at(b->name());
    ir::Node* dq = b->producer();
    const ir::Tensor& stored = dq->input(0)->initializer();
    if (stored.rank() != 1 || (w->params.size() != 1 && static_cast<int64_t>(w->params.size()) != stored.size()))
      return;
    bool in_units = p.params.size() == w->params.size();
    for (size_t i = 0; in_units && i < p.params.size(); ++i) {
      float expected = static_cast<float>(x->params[0].scale) * static_cast<float>(w->params[i].scale);
      in_units = p.params[i].zero_point == 0 && std::abs(p.params[i].scale - expected) <= 1e-6 * expected;
    }
    ir::Tensor values = quant::dequantize_tensor(stored, p.params, axis);
    TensorPlan t = entry(b->name(), Role::Bias, ir::DataType::Int32);
    t.symmetric = true;
    t.bias_input = conv->input(0)->name();
    t.bias_weight = conv->input(1)->name();
    if (in_units) {
      t.params = p.params;
      t.data = stored;
    } else {
      quant::QuantizedBias q =
          quant::quantize_bias(values, x->params[0].scale, w->params, quant::bias_options_of(quant::Tool::ort));
      for (double sc : q.scales) t.params.push_back({sc, 0});
      t.data = std::move(q.data);
      ++requantized_;
    }
    if (in_units && b->uses().size() == 1) {
      g_.remove_node(dq);
      g_.set_initializer(b, std::move(values));
    } else {  // this Conv's own copy; the DequantizeLinear stays for the other readers
      ir::Value* own = g_.add_unique_value(b->name() + "_" + (conv->name.empty() ? "conv" : conv->name));
      g_.set_initializer(own, std::move(values));
      g_.set_node_input(conv, 2, own);
      t.name = own->name();
      if (b->uses().empty()) {
        g_.remove_node(dq);
        g_.remove_value(b);
      }
    }
    plan(std::move(t));
  }

  ir::Model m_;
  ir::Graph& g_;
  quant::Plan plan_;
  size_t left_ = 0;
  size_t requantized_ = 0;  // biases not in units of s_x * s_w
  std::map<std::string, std::pair<QdqParams, std::optional<int64_t>>> int32_biases_;
};

}  // namespace

ir::Model qdq_to_qop(const ir::Model& model, ConvertResult& result) { return QdqReader(model).run(result); }

}  // namespace onnxptq::tools
