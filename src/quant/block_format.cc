#include "quant/block_format.h"

#include <nlohmann/json.hpp>

#include "engine/block_quantizer.h"
#include "onnxptq/error.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

using json = nlohmann::json;

int64_t integer_of(const char* option, const std::string& key, const json& v) {
  // Quark's attribute values are Python ints; a bool is one too (convert_to_bfloat_before_bfp: True).
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (!v.is_number_integer())
    throw Error(std::string("extra option ") + option + ": " + key + " must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

std::string string_of(const char* option, const std::string& key, const json& v) {
  if (!v.is_string())
    throw Error(std::string("extra option ") + option + ": " + key + " must be a string, got " + v.dump());
  return v.get<std::string>();
}

template <class Attributes>
void apply_attributes(const char* option, Attributes& a, const json& value,
                      const std::vector<std::pair<const char*, int64_t Attributes::*>>& integers,
                      const std::pair<const char*, std::string Attributes::*>& text) {
  if (!value.is_object())
    throw Error(std::string("extra option ") + option + ": expected an object, got " + value.dump());
  for (const auto& [key, v] : value.items()) {
    if (key == text.first) {
      a.*text.second = string_of(option, key, v);
      continue;
    }
    bool known = false;
    for (const auto& [name, field] : integers)
      if (key == name) {
        a.*field = integer_of(option, key, v);
        known = true;
      }
    if (known) continue;
    std::string names = text.first;
    for (const auto& [name, field] : integers) names += std::string(", ") + name;
    throw Error(std::string("extra option ") + option + ": unknown key '" + key + "' (known: " + names + ")");
  }
}

}  // namespace

void apply_bfp_attributes(BfpAttributes& a, const json& value) {
  apply_attributes<BfpAttributes>("BFPAttributes", a, value,
                                  {{"axis", &BfpAttributes::axis},
                                   {"bit_width", &BfpAttributes::bit_width},
                                   {"block_size", &BfpAttributes::block_size},
                                   {"rounding_mode", &BfpAttributes::rounding_mode},
                                   {"sub_block_size", &BfpAttributes::sub_block_size},
                                   {"sub_block_shift_bits", &BfpAttributes::sub_block_shift_bits},
                                   {"convert_to_bfloat_before_bfp", &BfpAttributes::convert_to_bfloat_before_bfp}},
                                  {"bfp_method", &BfpAttributes::bfp_method});
}

void apply_mx_attributes(MxAttributes& a, const json& value) {
  apply_attributes<MxAttributes>("MXAttributes", a, value,
                                 {{"axis", &MxAttributes::axis},
                                  {"block_size", &MxAttributes::block_size},
                                  {"rounding_mode", &MxAttributes::rounding_mode},
                                  {"min_error_scale", &MxAttributes::min_error_scale},
                                  {"symmetric_int8", &MxAttributes::symmetric_int8}},
                                 {"element_dtype", &MxAttributes::element_dtype});
}

ir::Node block_node(ir::DataType type, const QuantConfig& config, int64_t axis, bool constant) {
  if (!quant_type_is_block(type))
    throw Error(std::string("block_node: ") + quant_type_name(type) + " is not a block type (QBFP, QMX)");
  ir::Node n;
  n.domain = "com.amd.quark";
  // In the order of Quark's BFP_OP_DEFAULT_ATTRS / MX_OP_DEFAULT_ATTRS, which it writes.
  if (type == kQBfp) {
    const BfpAttributes& a = config.bfp;
    n.op_type = "BFPQuantizeDequantize";
    n.set_attribute(ir::Attribute::of_string("bfp_method", a.bfp_method));
    n.set_attribute(ir::Attribute::of_int("axis", axis));
    n.set_attribute(ir::Attribute::of_int("bit_width", a.bit_width));
    n.set_attribute(ir::Attribute::of_int("block_size", a.block_size));
    n.set_attribute(ir::Attribute::of_int("rounding_mode", a.rounding_mode));
    n.set_attribute(ir::Attribute::of_int("sub_block_size", a.sub_block_size));
    n.set_attribute(ir::Attribute::of_int("sub_block_shift_bits", a.sub_block_shift_bits));
    // A constant is never rounded to bfloat16 first (Quark: convert_to=0 for initializers).
    n.set_attribute(
        ir::Attribute::of_int("convert_to_bfloat_before_bfp", constant ? 0 : a.convert_to_bfloat_before_bfp));
  } else {
    const MxAttributes& a = config.mx;
    n.op_type = "MXQuantizeDequantize";
    n.set_attribute(ir::Attribute::of_string("element_dtype", a.element_dtype));
    n.set_attribute(ir::Attribute::of_int("axis", axis));
    n.set_attribute(ir::Attribute::of_int("block_size", a.block_size));
    n.set_attribute(ir::Attribute::of_int("rounding_mode", a.rounding_mode));
    // onnxptq's choices, absent when off: the node is then exactly Quark's.
    if (a.min_error_scale != 0) n.set_attribute(ir::Attribute::of_int("min_error_scale", a.min_error_scale));
    if (a.symmetric_int8 != 0) n.set_attribute(ir::Attribute::of_int("symmetric_int8", a.symmetric_int8));
  }
  return n;
}

void check_block_attributes(const QuantConfig& config, ir::DataType type) {
  try {
    engine::BlockQuantizer check(block_node(type, config, 1, false));
  } catch (const Error& e) {
    throw Error(std::string("extra option ") + (type == kQBfp ? "BFPAttributes: " : "MXAttributes: ") + e.what());
  }
}

void assign_block_axes(Plan& plan, const ir::Graph& graph, const QuantConfig& config) {
  auto attributes_axis = [&](const ir::Value* v, ir::DataType type) -> int64_t {
    if (v && v->has_initializer() && v->initializer().rank() <= 1) return 0;
    return type == kQBfp ? config.bfp.axis : config.mx.axis;
  };
  bool any = false;
  for (TensorPlan& t : plan.tensors) {
    const ir::Value* v = graph.find_value_nested(t.name);
    if (quant_type_is_block(t.type)) {
      any = true;
      t.block_axis = attributes_axis(v, t.type);
    }
    if (t.convert && quant_type_is_block(t.convert->type)) {
      any = true;
      t.convert->block_axis = attributes_axis(v, t.convert->type);
    }
  }
  if (!any || !config.refine_block_axis.value_or(true)) return;

  // The block axis of what `reader` reads as `v` (the tensor's, or its conversion's when the
  // reader reads the converted copy), or null when that is not of a block type.
  auto block = [&](const ir::Value* v, const ir::Node* reader) -> std::optional<int64_t>* {
    TensorPlan* t = v ? plan.find(v->name()) : nullptr;
    if (!t) return nullptr;
    if (reader && t->convert && quant_type_is_block(t->convert->type) &&
        (t->convert->recv_nodes.empty() || t->convert->recv_nodes.count(reader->name)))
      return &t->convert->block_axis;
    return quant_type_is_block(t->type) ? &t->block_axis : nullptr;
  };
  // Counted from the end: an initializer's axis as Quark writes it (rank - k), else -k.
  auto from_end = [](const ir::Value* v, int64_t k) {
    const size_t rank = v->has_initializer() ? v->initializer().rank() : 0;
    return rank > 0 ? static_cast<int64_t>(rank) - k : -k;
  };
  for (const ir::Node* n : graph.topological_order_with_bodies()) {  // bodies too (EnableSubgraph)
    if (n->op_type == "MatMul") {
      if (std::optional<int64_t>* a = block(n->input(0), n)) {
        *a = from_end(n->input(0), 1);
        if (std::optional<int64_t>* out = block(n->output(0), nullptr)) *out = *a;
      }
      if (std::optional<int64_t>* b = block(n->input(1), n)) *b = from_end(n->input(1), 2);
    } else if (n->op_type == "Gemm") {
      if (std::optional<int64_t>* a = block(n->input(0), n)) *a = n->attr_int("transA", 0) ? 0 : 1;
      if (std::optional<int64_t>* b = block(n->input(1), n)) *b = n->attr_int("transB", 0) ? 1 : 0;
    } else if (n->op_type == "Softmax") {
      if (std::optional<int64_t>* x = block(n->input(0), n)) *x = n->attr_int("axis", -1);
    }
  }
}

}  // namespace onnxptq::quant
