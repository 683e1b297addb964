// ONNX LSTM nodes written as Quark's com.amd.quark ExtendedLSTM (quant/extended_lstm.h), as
// quark/onnx/tools/convert_lstm_to_customlstm.py writes them.
#include "quant/extended_lstm.h"

#include <cmath>
#include <optional>

#include "onnxptq/error.h"
#include "quant/qdq_nodes.h"

namespace onnxptq::quant {
namespace {

std::string lstm_name(const ir::Node& n) { return "LSTM '" + n.name + "'"; }

bool output_read(const ir::Node& n, size_t i) {
  const ir::Value* v = n.output(i);
  return v && (!v->uses().empty() || n.graph()->is_output(v));
}

// The one per-tensor uint16 scale and zero point of a quantize or dequantize node.
qmath::ScaleZeroPoint uint16_params(const ir::Node& lstm, const ir::Node& qdq, const char* tensor) {
  std::optional<QdqParams> p = qdq_params(qdq);
  const std::string where = lstm_name(lstm) + " " + tensor + " (" + describe_node(qdq) + ")";
  if (!p) throw Error(where + " has no constant integer scale and zero point");
  if (p->params.size() != 1) throw Error(where + " is quantized per channel: Quark's ExtendedLSTM takes one scale");
  if (p->type != ir::DataType::UInt16)
    throw Error(where + " is " + std::string(ir::data_type_name(p->type)) +
                ": Quark's ExtendedLSTM quantizes to uint16 (quantize X, W, R, B and Y as uint16)");
  return p->params[0];
}

}  // namespace

void check_extended_lstm_convertible(const ir::Node& lstm) {
  const std::string where = lstm_name(lstm);
  // Quark's kernel always computes two directions, whatever the attribute says; its tool writes
  // "bidirectional" when the attribute is absent (ONNX's default is forward).
  const std::string direction = lstm.attr_string("direction", "forward");
  if (direction != "bidirectional")
    throw Error(where + " has direction " + direction + ": Quark's ExtendedLSTM computes bidirectional only");
  if (int64_t layout = lstm.attr_int("layout", 0); layout != 0)
    throw Error(where + " has layout " + std::to_string(layout) + ": Quark's ExtendedLSTM computes layout 0 only");
  if (lstm.attr_int("input_forget", 0) != 0)
    throw Error(where + " has input_forget 1: Quark's ExtendedLSTM computes input_forget 0 only");
  if (lstm.find_attribute("clip")) throw Error(where + " has clip: Quark's ExtendedLSTM does not clip");
  if (lstm.find_attribute("activations")) {
    const std::vector<std::string>& names = lstm.find_attribute("activations")->strings;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] != (i % 3 == 0 ? "Sigmoid" : "Tanh"))
        throw Error(where + " has activation " + names[i] + " (#" + std::to_string(i) +
                    "): Quark's ExtendedLSTM computes Sigmoid, Tanh, Tanh only");
  }
  if (lstm.find_attribute("activation_alpha") || lstm.find_attribute("activation_beta"))
    throw Error(where +
                " has activation_alpha or activation_beta: Quark's ExtendedLSTM computes Sigmoid, Tanh, Tanh only");
  if (lstm.find_attribute("hidden_size") == nullptr)
    throw Error(where + " has no hidden_size (Quark's tool would write its default 128)");
  if (!lstm.input(3)) throw Error(where + " has no B: Quark's ExtendedLSTM reads one");
  if (lstm.input(7)) throw Error(where + " has peepholes P: Quark's ExtendedLSTM has none");
  if (!lstm.output(0)) throw Error(where + " has no output Y");
  for (size_t i : {1, 2})
    if (output_read(lstm, i))
      throw Error(where + " output " + lstm.output(i)->name() + " (" + (i == 1 ? "Y_h" : "Y_c") +
                  ") is read: Quark's ExtendedLSTM has output Y only");
}

ir::Node* write_extended_lstm(ir::Graph& graph, ir::Node* lstm, const ExtendedLstmParams& p) {
  check_extended_lstm_convertible(*lstm);
  const std::string where = lstm_name(*lstm);
  auto check = [&](const qmath::ScaleZeroPoint& q, const char* tensor) {
    const float s = static_cast<float>(q.scale);
    if (!(s > 0) || !std::isfinite(s))
      throw Error(where + " " + tensor + " has scale " + std::to_string(q.scale) + ", expected positive and finite");
    if (q.zero_point < 0 || q.zero_point > 65535)
      throw Error(where + " " + tensor + " has zero point " + std::to_string(q.zero_point) +
                  ", expected a uint16 one (Quark's ExtendedLSTM quantizes to uint16)");
  };
  check(p.x, "X"), check(p.w, "W"), check(p.r, "R"), check(p.b, "B"), check(p.y, "Y");

  std::vector<ir::Value*> inputs(lstm->inputs().begin(), lstm->inputs().end());
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  ir::Value* y = lstm->output(0);
  const std::string name = lstm->name;
  const std::string direction = lstm->attr_string("direction", "forward");
  const int64_t hidden = lstm->attr_int("hidden_size", 0), layout = lstm->attr_int("layout", 0);
  // Y_h and Y_c are not read (checked): their values go with the node.
  std::vector<ir::Value*> dropped;
  for (size_t i : {1, 2})
    if (ir::Value* v = lstm->output(i)) dropped.push_back(v);
  ir::Node* out = graph.insert_node_before(lstm, "ExtendedLSTM", inputs, {}, name, "com.amd.quark");
  graph.remove_node(lstm);
  graph.set_node_output(out, 0, y);
  for (ir::Value* v : dropped) graph.remove_value(v);
  // The attributes in the order Quark's tool gives them.
  const std::pair<const char*, const qmath::ScaleZeroPoint*> params[] = {
      {"x", &p.x}, {"w", &p.w}, {"r", &p.r}, {"b", &p.b}, {"y", &p.y}};
  for (const auto& [prefix, q] : params) {
    out->set_attribute(ir::Attribute::of_float(std::string(prefix) + "_scale", static_cast<float>(q->scale)));
    out->set_attribute(ir::Attribute::of_int(std::string(prefix) + "_zero_point", q->zero_point));
  }
  out->set_attribute(ir::Attribute::of_string("direction", direction));
  out->set_attribute(ir::Attribute::of_int("hidden_size", hidden));
  out->set_attribute(ir::Attribute::of_int("layout", layout));
  return out;
}

size_t convert_lstms_to_extended(ir::Model& model, std::vector<std::string>& log, const std::set<std::string>* only) {
  ir::Graph& g = *model.graph;
  std::vector<ir::Node*> lstms;
  for (const auto& n : g.nodes())
    if (n->op_type == "LSTM" && (n->domain.empty() || n->domain == "ai.onnx") && (!only || only->count(n->name)))
      lstms.push_back(n.get());
  if (lstms.empty()) throw Error("the model has no LSTM node (in its main graph): nothing to convert");
  for (ir::Node* lstm : lstms) {
    check_extended_lstm_convertible(*lstm);
    ExtendedLstmParams p;
    const char* names[] = {"X", "W", "R", "B"};
    qmath::ScaleZeroPoint* targets[] = {&p.x, &p.w, &p.r, &p.b};
    for (size_t i = 0; i < 4; ++i) {
      const ir::Node* dq = dequantize_producer(lstm->input(i));
      if (!dq)
        throw Error(lstm_name(*lstm) + " input " + names[i] +
                    " is not dequantized: convert a model quantized with uint16 X, W, R, B and Y");
      *targets[i] = uint16_params(*lstm, *dq, names[i]);
    }
    // Y's QuantizeLinear: its uint16 one where there are several (conversions to other precisions).
    const ir::Node* q = nullptr;
    for (const ir::Use& u : lstm->output(0)->uses())
      if (u.input == 0 && is_quantize_node(*u.node)) {
        std::optional<QdqParams> up = qdq_params(*u.node);
        if (!q || (up && up->type == ir::DataType::UInt16)) q = u.node;
      }
    if (!q)
      throw Error(lstm_name(*lstm) +
                  " output Y is not quantized: convert a model quantized with uint16 X, W, R, B and Y");
    p.y = uint16_params(*lstm, *q, "Y");
    const std::string name = lstm_name(*lstm);
    write_extended_lstm(g, lstm, p);
    log.push_back(name + " converted to com.amd.quark ExtendedLSTM");
  }
  model.set_opset("com.amd.quark", 1);
  return lstms.size();
}

}  // namespace onnxptq::quant
