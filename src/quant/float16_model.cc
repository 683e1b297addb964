// QuantizeFP16 and UseFP32Scale (Quark's quantize.py and convert_fp16_scale_to_fp32).
#include "quant/float16_model.h"

#include <set>

#include "ir/float16.h"
#include "onnxptq/error.h"

namespace onnxptq::quant {
namespace {

constexpr int64_t kFloat16Opset = 19;  // QuantizeLinear-19 / DequantizeLinear-19 take float16

bool is_type(const ir::Value* v, ir::DataType type) { return v && v->type.is_tensor() && v->type.elem_type == type; }

ir::Tensor to_float16(const ir::Tensor& t) {
  std::vector<uint16_t> half(static_cast<size_t>(t.size()));
  ir::float_to_half(t.values<float>().data(), half.data(), half.size());
  return ir::Tensor(ir::DataType::Float16, t.dims(), Bytes::copy_of(half.data(), half.size() * sizeof(uint16_t)));
}

// UseFP32Scale: a Cast to float32 after each float16 input, a Cast to float16 before each float16
// output; the values between keep their float32 type. (The caller sorts the nodes.)
void cast_interface(ir::Model& quantized, const ir::Model& original) {
  ir::Graph& g = *quantized.graph;
  const ir::Graph& o = *original.graph;
  for (ir::Value* in : std::vector<ir::Value*>(g.inputs())) {
    if (in->has_initializer() || !is_type(o.find_value(in->name()), ir::DataType::Float16)) continue;
    ir::Value* wide = g.add_unique_value(in->name() + "_Cast_output");
    wide->type = in->type;
    g.replace_uses(in, wide);
    in->type.elem_type = ir::DataType::Float16;
    g.add_node("Cast", {in}, {wide}, g.fresh_name(in->name() + "_Cast"))
        ->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(ir::DataType::Float)));
  }
  for (ir::Value* out : std::vector<ir::Value*>(g.outputs())) {
    if (!is_type(o.find_value(out->name()), ir::DataType::Float16) || !out->producer() || g.is_input(out)) continue;
    ir::Value* wide = g.add_unique_value(out->name() + "_Cast_input");
    wide->type = out->type;
    g.set_node_output(out->producer(), out->producer_output(), wide);
    g.replace_uses(out, wide);
    out->type.elem_type = ir::DataType::Float16;
    g.add_node("Cast", {wide}, {out}, g.fresh_name(out->name() + "_Cast"))
        ->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(ir::DataType::Float16)));
  }
}

// UseFP32Scale false: every float32 value becomes float16 but those the float16 model itself
// has as float32 (a Resize's scales, say): initializers rounded to nearest, Constant and
// ConstantOfShape values likewise, Casts to float32 made Casts to float16.
void narrow_to_float16(ir::Model& quantized, const ir::Model& original) {
  ir::Graph& g = *quantized.graph;
  const ir::Graph& o = *original.graph;
  auto narrowed = [&](const ir::Value* v) {
    const bool single =
        v->has_initializer() ? v->initializer().dtype() == ir::DataType::Float : is_type(v, ir::DataType::Float);
    const ir::Value* before = o.find_value(v->name());
    const bool was_single = before && (before->has_initializer() ? before->initializer().dtype() == ir::DataType::Float
                                                                 : is_type(before, ir::DataType::Float));
    return single && !was_single;
  };
  std::set<ir::Value*> values(g.inputs().begin(), g.inputs().end());
  values.insert(g.initializers().begin(), g.initializers().end());
  for (const auto& node : g.nodes()) {
    for (ir::Value* v : node->outputs())
      if (v) values.insert(v);
    if (node->outputs().empty() || !narrowed(node->output(0))) continue;
    if (node->op_type == "Cast") {
      if (ir::Attribute* to = node->find_attribute("to"); to && to->i == static_cast<int64_t>(ir::DataType::Float))
        to->i = static_cast<int64_t>(ir::DataType::Float16);
    } else if (node->op_type == "Constant" || node->op_type == "ConstantOfShape") {
      if (ir::Attribute* a = node->find_attribute("value"); a && a->t.dtype() == ir::DataType::Float)
        a->t = to_float16(a->t);
    }
  }
  for (ir::Value* v : values) {
    if (!narrowed(v)) continue;
    if (v->has_initializer()) {
      g.set_initializer(v, to_float16(v->initializer()));
      if (!v->type.is_tensor()) continue;  // an initializer's type is its tensor's
    }
    v->type.elem_type = ir::DataType::Float16;
  }
  // QuantizeLinear / DequantizeLinear take float16 from opset 19; below it, ONNX Runtime's
  // com.microsoft ones do.
  if (quantized.opset("") >= kFloat16Opset) return;
  bool microsoft = false;
  for (const auto& node : g.nodes())
    if (node->domain.empty() && (node->op_type == "QuantizeLinear" || node->op_type == "DequantizeLinear")) {
      node->domain = "com.microsoft";
      microsoft = true;
    }
  if (microsoft && quantized.opset("com.microsoft") < 1) quantized.set_opset("com.microsoft", 1);
}

}  // namespace

bool has_float16(const ir::Model& model) {
  const ir::Graph& g = *model.graph;
  auto half = [](const ir::Value* v) { return v && is_type(v, ir::DataType::Float16); };
  for (const ir::Value* v : g.inputs())
    if (half(v)) return true;
  for (const ir::Value* v : g.outputs())
    if (half(v)) return true;
  for (const ir::Value* v : g.initializers())
    if (v->initializer().dtype() == ir::DataType::Float16) return true;
  for (const auto& n : g.nodes()) {
    for (const ir::Value* v : n->outputs())
      if (half(v)) return true;
    const ir::Attribute* to = n->op_type == "Cast" ? n->find_attribute("to") : nullptr;
    if (to && to->i == static_cast<int64_t>(ir::DataType::Float16)) return true;
    const ir::Attribute* value = n->op_type == "Constant" ? n->find_attribute("value") : nullptr;
    if (value && value->t.dtype() == ir::DataType::Float16) return true;
  }
  return false;
}

void check_float16_model_keys(const QuantConfig& c) {
  if (c.quantize_fp16.value_or(false) && c.convert_fp16_to_fp32)
    throw Error(
        "QuantizeFP16 and convert_fp16_to_fp32 (ConvertFP16ToFP32): the first keeps the float16 model's "
        "interface, the second makes it a float32 model; choose one");
  if (c.use_fp32_scale.value_or(false) && !c.quantize_fp16.value_or(true))
    throw Error("UseFP32Scale true takes effect only with QuantizeFP16 (a float16 model), which is false");
  if (c.use_fp32_scale.value_or(true)) return;
  if (c.format != QuantFormat::QDQ && c.format != QuantFormat::ExtendedQDQ)
    throw Error(std::string("UseFP32Scale false: float16 scales are written by QuantizeLinear / DequantizeLinear "
                            "(QuantFormat.QDQ, ExtendedQuantFormat.QDQ), not by ") +
                quant_format_name(c.format));
  for (ir::DataType t : {c.activation_type, c.weight_type})
    if (!(t == ir::DataType::Int8 || t == ir::DataType::UInt8 || t == ir::DataType::Int16 || t == ir::DataType::UInt16))
      throw Error(std::string("UseFP32Scale false: float16 scales go with the 8- and 16-bit integer types, not ") +
                  quant_type_name(t));
}

void resolve_float16_model(QuantConfig& c, const ir::Model& model, const std::function<void(const std::string&)>& log) {
  const bool float16 = has_float16(model);
  const char* const not_float16 = ": the model has no float16 tensor, value or Cast";
  if (c.quantize_fp16.value_or(false) && !float16) throw Error(std::string("QuantizeFP16") + not_float16);
  if (c.use_fp32_scale && !float16) throw Error(std::string("UseFP32Scale") + not_float16);
  if (!c.quantize_fp16.value_or(true) && float16 && !c.convert_fp16_to_fp32)
    throw Error(
        "QuantizeFP16 false: the model has float16 tensors, and a QuantizeLinear takes them with float16 scales "
        "only; leave QuantizeFP16 on (the default) or set convert_fp16_to_fp32");
  c.quantize_fp16 = c.quantize_fp16.value_or(float16 && !c.convert_fp16_to_fp32);
  if (!*c.quantize_fp16) return;
  c.use_fp32_scale = c.use_fp32_scale.value_or(true);
  if (log)
    log(std::string("QuantizeFP16: the float16 model is quantized in float32 and written ") +
        (*c.use_fp32_scale ? "in float32 between Casts at its float16 inputs and outputs (UseFP32Scale)"
                           : "in float16, its Q/DQ scales too (UseFP32Scale false)"));
}

void restore_float16_model(ir::Model& quantized, const ir::Model& original, const QuantConfig& c,
                           const std::function<void(const std::string&)>& log) {
  if (!c.quantize_fp16.value_or(false)) return;
  if (c.use_fp32_scale.value_or(true)) {
    cast_interface(quantized, original);
  } else {
    narrow_to_float16(quantized, original);
    size_t concats = 0;
    for (const auto& n : quantized.graph->nodes()) concats += n->op_type == "Concat";
    if (concats && log)
      log("warning: UseFP32Scale false: ONNX Runtime's CPU graph optimizer (1.30) fuses a Concat between "
          "float16 Q/DQ into QLinearConcat, which takes float32 scales only, and then refuses the model (" +
          std::to_string(concats) + " Concat nodes here): run it with graph optimizations at the basic level");
  }
  quantized.graph->sort_nodes();
}

}  // namespace onnxptq::quant
