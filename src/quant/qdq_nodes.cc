#include "quant/qdq_nodes.h"

#include <vector>

#include "qmath/quantize.h"

namespace onnxptq::quant {

namespace {

bool standard_domain(const ir::Node& n) {
  return n.domain.empty() || n.domain == "ai.onnx" || n.domain == "com.microsoft";
}

bool is_integer(ir::DataType t) {
  switch (t) {
    case ir::DataType::Int4:
    case ir::DataType::UInt4:
    case ir::DataType::Int8:
    case ir::DataType::UInt8:
    case ir::DataType::Int16:
    case ir::DataType::UInt16:
    case ir::DataType::Int32:
    case ir::DataType::UInt32:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_quantize_node(const ir::Node& n) {
  return (n.op_type == "QuantizeLinear" && standard_domain(n)) || n.op_type == "ExtendedQuantizeLinear" ||
         n.op_type == "VitisQuantizeLinear";
}

bool is_dequantize_node(const ir::Node& n) {
  return (n.op_type == "DequantizeLinear" && standard_domain(n)) || n.op_type == "ExtendedDequantizeLinear" ||
         n.op_type == "VitisDequantizeLinear";
}

const ir::Tensor* constant_tensor(const ir::Value* v) {
  if (!v || v->name().empty()) return nullptr;
  if (v->has_initializer()) return &v->initializer();
  if (const ir::Node* p = v->producer(); p && p->op_type == "Constant")
    if (const ir::Attribute* a = p->find_attribute("value")) return &a->t;
  return nullptr;
}

std::optional<QdqParams> qdq_params(const ir::Node& n) {
  const ir::Tensor* scale = constant_tensor(n.input(1));
  if (!scale || scale->dtype() != ir::DataType::Float || scale->size() < 1 || scale->rank() > 1) return std::nullopt;
  const ir::Value* zv = n.input(2);
  const ir::Tensor* zp = constant_tensor(zv);
  if (zv && !zv->name().empty() && !zp) return std::nullopt;
  QdqParams out;
  if (zp) {
    out.type = zp->dtype();
  } else if (is_dequantize_node(n)) {  // no zero point: the type of the integers it reads
    const ir::Value* x = n.input(0);
    if (const ir::Tensor* data = constant_tensor(x))
      out.type = data->dtype();
    else if (x && x->type.is_tensor() && x->type.elem_type != ir::DataType::Undefined)
      out.type = x->type.elem_type;
  }
  if (!is_integer(out.type)) return std::nullopt;
  if (zp && zp->size() != scale->size()) return std::nullopt;
  std::span<const float> s = scale->values<float>();
  std::vector<int64_t> z(s.size(), 0);
  if (zp && qmath::is_4bit_type(zp->dtype())) {  // packed two a byte
    std::vector<int8_t> held(s.size());
    qmath::unpack_4bit(zp->bytes().data(), zp->size(), zp->dtype() == ir::DataType::Int4, held.data());
    for (size_t i = 0; i < s.size(); ++i) z[i] = held[i];
  } else if (zp) {
    for (size_t i = 0; i < s.size(); ++i) {
      switch (zp->dtype()) {
        case ir::DataType::Int8:
          z[i] = zp->values<int8_t>()[i];
          break;
        case ir::DataType::UInt8:
          z[i] = zp->values<uint8_t>()[i];
          break;
        case ir::DataType::Int16:
          z[i] = zp->values<int16_t>()[i];
          break;
        case ir::DataType::UInt16:
          z[i] = zp->values<uint16_t>()[i];
          break;
        case ir::DataType::Int32:
          z[i] = zp->values<int32_t>()[i];
          break;
        default:
          z[i] = zp->values<uint32_t>()[i];
          break;
      }
    }
  }
  for (size_t i = 0; i < s.size(); ++i) out.params.push_back({s[i], z[i], 0});
  if (scale->rank() == 1 && (s.size() > 1 || n.find_attribute("axis"))) {
    if (s.size() > 1) out.axis = n.attr_int("axis", 1);
  }
  return out;
}

ir::Node* single_dequantize_reader(const ir::Value* q) {
  if (!q || q->uses().size() != 1 || q->graph()->is_output(q)) return nullptr;
  const ir::Use& use = q->uses()[0];
  if (use.input != 0 || !is_dequantize_node(*use.node)) return nullptr;
  return use.node;
}

ir::Node* dequantize_producer(const ir::Value* v) {
  ir::Node* p = v ? v->producer() : nullptr;
  return p && is_dequantize_node(*p) ? p : nullptr;
}

std::string describe_node(const ir::Node& n) { return n.op_type + " '" + n.name + "'"; }

void remove_unused_initializers(ir::Graph& graph) {
  std::vector<ir::Value*> inits = graph.initializers();
  for (ir::Value* v : inits)
    if (v->uses().empty() && !graph.is_output(v) && !graph.is_input(v)) graph.remove_value(v);
  std::vector<ir::Value*> info = graph.value_info();
  for (ir::Value* v : info)
    if (!v->producer() && v->uses().empty() && !graph.is_input(v) && !graph.is_output(v) && !v->has_initializer())
      graph.remove_value(v);
}

}  // namespace onnxptq::quant
