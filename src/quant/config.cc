#include "quant/config.h"

#include <array>
#include <utility>

#include "onnxptq/error.h"

namespace onnxptq::quant {

namespace {

std::string without_prefix(const std::string& name, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes) {
    std::string prefix(p);
    if (name.rfind(prefix, 0) == 0) return name.substr(prefix.size());
  }
  return name;
}

constexpr std::array<std::pair<ir::DataType, const char*>, 8> kTypes = {{
    {ir::DataType::Int8, "QInt8"},
    {ir::DataType::UInt8, "QUInt8"},
    {ir::DataType::Int16, "QInt16"},
    {ir::DataType::UInt16, "QUInt16"},
    {ir::DataType::Int32, "QInt32"},
    {ir::DataType::UInt32, "QUInt32"},
    {ir::DataType::Float16, "QFloat16"},
    {ir::DataType::BFloat16, "QBFloat16"},
}};

}  // namespace

QuantFormat parse_quant_format(const std::string& name) {
  if (name == "QDQ" || name == "QuantFormat.QDQ") return QuantFormat::QDQ;
  if (name == "QOperator" || name == "QuantFormat.QOperator") return QuantFormat::QOperator;
  if (name == "VitisQuantFormat.QDQ" || name == "VitisQDQ") return QuantFormat::VitisQDQ;
  if (name == "FixNeuron" || name == "VitisQuantFormat.FixNeuron") return QuantFormat::FixNeuron;
  throw Error("unknown quant format '" + name +
              "' (known: QDQ, QOperator, VitisQuantFormat.QDQ, VitisQuantFormat.FixNeuron)");
}

const char* quant_format_name(QuantFormat format) {
  switch (format) {
    case QuantFormat::QOperator:
      return "QOperator";
    case QuantFormat::QDQ:
      return "QDQ";
    case QuantFormat::VitisQDQ:
      return "VitisQuantFormat.QDQ";
    case QuantFormat::FixNeuron:
      return "VitisQuantFormat.FixNeuron";
  }
  return "?";
}

ir::DataType parse_quant_type(const std::string& name) {
  std::string bare = without_prefix(name, {"QuantType.", "VitisQuantType.", "ExtendedQuantType."});
  for (const auto& [type, text] : kTypes)
    if (bare == text) return type;
  std::string known;
  for (const auto& [type, text] : kTypes) known += (known.empty() ? "" : ", ") + std::string(text);
  throw Error("unknown quant type '" + name + "' (known: " + known + ")");
}

const char* quant_type_name(ir::DataType type) {
  for (const auto& [t, text] : kTypes)
    if (t == type) return text;
  return type == ir::DataType::Float ? "float" : "?";
}

bool QuantConfig::weights_symmetric() const {
  if (weight_symmetric) return *weight_symmetric;
  return weight_type == ir::DataType::Int8 || weight_type == ir::DataType::Int16 ||
         weight_type == ir::DataType::Int32 || weight_type == ir::DataType::Float16 ||
         weight_type == ir::DataType::BFloat16;
}

void check_config(const QuantConfig& c) {
  auto is_8_or_16 = [](ir::DataType t) {
    return t == ir::DataType::Int8 || t == ir::DataType::UInt8 || t == ir::DataType::Int16 || t == ir::DataType::UInt16;
  };
  std::string types = std::string("activation_type ") + quant_type_name(c.activation_type) + " and weight_type " +
                      quant_type_name(c.weight_type);
  if (c.format == QuantFormat::QDQ || c.format == QuantFormat::QOperator) {
    if (!is_8_or_16(c.activation_type) || !is_8_or_16(c.weight_type))
      throw Error(types + ": QuantFormat." + quant_format_name(c.format) +
                  " takes 8- and 16-bit integer types; 32-bit, float16 and bfloat16 need VitisQuantFormat.QDQ");
  }
  if (c.format == QuantFormat::QOperator) {
    bool eight = (c.activation_type == ir::DataType::Int8 || c.activation_type == ir::DataType::UInt8) &&
                 (c.weight_type == ir::DataType::Int8 || c.weight_type == ir::DataType::UInt8);
    if (!eight) throw Error(types + ": QuantFormat.QOperator takes 8-bit types only (QLinear ops are 8-bit)");
  }
  if (c.format == QuantFormat::QOperator && (c.add_qdq_pair_to_weight || c.dedicated_qdq_pair))
    throw Error(std::string(c.add_qdq_pair_to_weight ? "AddQDQPairToWeight" : "DedicatedQDQPair") +
                " shapes Q/DQ pairs; QuantFormat.QOperator has none (QLinear ops take quantized weights)");
  if (c.format == QuantFormat::FixNeuron &&
      (c.activation_type != ir::DataType::Int8 || c.weight_type != ir::DataType::Int8))
    throw Error(types + ": VitisQuantFormat.FixNeuron quantizes to QInt8 only");
  if ((c.format == QuantFormat::VitisQDQ || c.format == QuantFormat::FixNeuron) && c.per_channel)
    throw Error(std::string("per_channel: ") + quant_format_name(c.format) +
                " has one scale per tensor (vai_q_onnx's custom ops read only the first value of a 1-D scale)");
  if (c.activation_type == ir::DataType::Float16 || c.activation_type == ir::DataType::BFloat16 ||
      c.weight_type == ir::DataType::Float16 || c.weight_type == ir::DataType::BFloat16) {
    if (c.power_of_two())
      throw Error(types + ": float16 and bfloat16 have no power-of-two scales; use a float-scale calibrate_method");
  }
  if (c.use_unsigned_relu && !c.power_of_two())
    throw Error("UseUnsignedReLU applies to power-of-two quantization (calibrate_method NonOverflow or MinMSE)");
  for (const auto& [op, axis] : c.per_channel_axis)
    if (axis < -8 || axis > 8)
      throw Error("QDQOpTypePerChannelSupportToAxis: axis " + std::to_string(axis) + " for " + op + " is out of range");
}

}  // namespace onnxptq::quant
