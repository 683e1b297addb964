#include "quant/config.h"

#include <array>
#include <filesystem>
#include <tuple>
#include <utility>

#include "ir/file_io.h"
#include "onnxptq/error.h"
#include "passes/dpu.h"
#include "qmath/quantize.h"
#include "quant/block_format.h"
#include "quant/dynamic_quant.h"
#include "quant/float16_model.h"
#include "quant/ipu_limitation.h"
#include "quant/overrides.h"
#include "quant/post_process.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

std::string without_prefix(const std::string& name, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes) {
    std::string prefix(p);
    if (name.rfind(prefix, 0) == 0) return name.substr(prefix.size());
  }
  return name;
}

constexpr std::array<std::pair<ir::DataType, const char*>, 12> kTypes = {{
    {ir::DataType::Int4, "QInt4"},
    {ir::DataType::UInt4, "QUInt4"},
    {ir::DataType::Int8, "QInt8"},
    {ir::DataType::UInt8, "QUInt8"},
    {ir::DataType::Int16, "QInt16"},
    {ir::DataType::UInt16, "QUInt16"},
    {ir::DataType::Int32, "QInt32"},
    {ir::DataType::UInt32, "QUInt32"},
    {ir::DataType::Float16, "QFloat16"},
    {ir::DataType::BFloat16, "QBFloat16"},
    {kQBfp, "QBFP"},
    {kQMx, "QMX"},
}};

// Whether any precision the config asks for, for activations or for weights, passes `is`:
// the global types, NodePrecision, TensorQuantOverrides (with their conversions), MixedPrecisionTensor
// and AutoMixprecision's targets.
template <class Pred>
bool asks_for(const QuantConfig& c, bool activations, bool weights, Pred is) {
  bool any = (activations && is(c.activation_type)) || (weights && is(c.weight_type));
  for (const auto& [node, p] : c.node_precision)
    any = any || (activations && p.activation && is(*p.activation)) || (weights && p.weight && is(*p.weight));
  for (const auto& [tensor, o] : c.tensor_overrides)
    any = any || (o.quant_type && is(*o.quant_type)) || (o.convert && is(o.convert->quant_type));
  if (c.specific_tensor_precision)
    for (const auto& [tensor, t] : c.mixed_precision_tensor) any = any || is(t);
  if (c.include_auto_mp)
    any = any || (activations && c.auto_mp.activation_target && is(*c.auto_mp.activation_target)) ||
          (weights && c.auto_mp.weight_target && is(*c.auto_mp.weight_target));
  return any;
}

// Quark's float16/bfloat16 keys: only ExtendedQuantFormat.QDQ has them, and only with a type they act on.
void check_float_type_options(const QuantConfig& c) {
  auto is_float = [](ir::DataType t) { return quant_type_is_float(t); };
  auto is_bf16 = [](ir::DataType t) { return t == ir::DataType::BFloat16; };
  struct Key {
    const char* name;
    bool set;
    bool activations, weights;
    bool bf16_only;
  };
  const Key keys[] = {
      {"ActivationScaled", c.activation_scaled, true, false, false},
      {"WeightScaled", c.weight_scaled, false, true, false},
      {"FloatQDQAsCustomOps", c.float_qdq_as_custom_ops, true, true, false},
      {"BF16QDQToCast", c.bf16_qdq_to_cast.value_or(false), true, true, true},
      {"EnableVaimlBF16", c.enable_vaiml_bf16, true, true, true},
      {"BF16WithClip", c.bf16_with_clip, true, false, true},
  };
  for (const Key& k : keys) {
    if (!k.set) continue;
    if (c.format != QuantFormat::ExtendedQDQ)
      throw Error(std::string("extra option ") + k.name + " takes effect only with ExtendedQuantFormat.QDQ (" +
                  quant_format_name(c.format) + " writes no Quark float16/bfloat16 Q/DQ)");
    bool acts =
        k.bf16_only ? asks_for(c, k.activations, k.weights, is_bf16) : asks_for(c, k.activations, k.weights, is_float);
    if (!acts)
      throw Error(std::string("extra option ") + k.name + " takes effect only with " +
                  (k.bf16_only ? "bfloat16" : "float16 or bfloat16") +
                  (k.activations && !k.weights   ? " activations"
                   : k.weights && !k.activations ? " weights"
                                                 : "") +
                  ", and the config asks for none (activation_type, weight_type, NodePrecision, "
                  "TensorQuantOverrides, MixedPrecisionTensor, AutoMixprecision)");
  }
  if (c.enable_vaiml_bf16 && c.bf16_qdq_to_cast == false)
    throw Error(
        "extra options EnableVaimlBF16 true and BF16QDQToCast false: EnableVaimlBF16 removes the Casts of "
        "the bfloat16 Cast form, which BF16QDQToCast false does not write");
  // Quark's float16 op ignores the zero point (its ExtendedQuantizeLinear), so a scaled asymmetric
  // float16 range would overflow (the Cast form computes the same).
  auto is_fp16 = [](ir::DataType t) { return t == ir::DataType::Float16; };
  if (c.activation_scaled && !c.activation_symmetric && asks_for(c, true, false, is_fp16))
    throw Error(
        "extra option ActivationScaled with float16 activations needs ActivationSymmetric true: Quark's float16 "
        "quantize op ignores the zero point, so an asymmetric scaled range overflows float16");
  if (c.weight_scaled && !c.weights_symmetric() && asks_for(c, false, true, is_fp16))
    throw Error(
        "extra option WeightScaled with float16 weights needs WeightSymmetric true: Quark's float16 quantize op "
        "ignores the zero point, so an asymmetric scaled range overflows float16");
}

// Quark's float-scale weight MinMSE (WeightCalibrateMethod): float scales and integer weights only.
// Quark drops the key for power-of-two and Int16 weight scales; with a power-of-two method vai's
// MinMSE weight search applies instead, so asking for both is refused by name.
void check_weight_min_mse(const QuantConfig& c) {
  if (c.weight_min_mse_mode && !c.weight_min_mse)
    throw Error("extra option MinMSEModeFloatScale takes effect only with WeightCalibrateMethod MinMSE");
  if (!c.weight_min_mse) return;
  if (c.int16_scale)
    throw Error("WeightCalibrateMethod MinMSE and Int16Scale: M / 2^N weight scales are not float scales");
  if (calib::is_power_of_two(c.calibration_method()))
    throw Error(std::string("WeightCalibrateMethod MinMSE with calibrate_method ") +
                calib::method_name(c.calibrate_method) +
                ": power-of-two methods calibrate weights by their own MinMSE search (PowerOfTwoMethod.MinMSE); "
                "the float-scale weight MinMSE takes a float-scale calibrate_method");
  if (!quant_type_is_integer(c.weight_type))
    throw Error(std::string("WeightCalibrateMethod MinMSE with weight_type ") + quant_type_name(c.weight_type) +
                ": the MinMSE search needs an integer weight type");
}

// Quark's block formats: written by ExtendedQuantFormat.QDQ only, a shared exponent per block (no
// per_channel), globally or per node and tensor, finetuned by AdaQuant only; their attribute keys
// only with their type.
void check_block_types(const QuantConfig& c) {
  auto is_block = [](ir::DataType t) { return quant_type_is_block(t); };
  for (auto [type, option, given] : {std::tuple{kQBfp, "BFPAttributes", c.bfp_given},
                                      std::tuple{kQMx, "MXAttributes", c.mx_given}}) {
    const bool asked = asks_for(c, true, true, [type](ir::DataType t) { return t == type; });
    if (given && !asked)
      throw Error(std::string("extra option ") + option + " takes effect only with a " + quant_type_name(type) +
                  " type, and the config asks for none (activation_type, weight_type, AutoMixprecision)");
    if (asked) check_block_attributes(c, type);
  }
  if (!asks_for(c, true, true, is_block)) {
    if (c.refine_block_axis)
      throw Error("extra option RefineBlockAxis takes effect only with a QBFP or QMX type, and the config asks for none");
    if (c.block_qdq_as_standard_ops)
      throw Error("extra option BlockQDQAsStandardOps (--standard-ops) takes effect only with a QBFP or QMX type, and "
                  "the config asks for none");
    return;
  }
  const std::string types =
      is_block(c.activation_type) || is_block(c.weight_type)
          ? std::string("activation_type ") + quant_type_name(c.activation_type) + " and weight_type " +
                quant_type_name(c.weight_type)
          : "a QBFP or QMX type (NodePrecision, TensorQuantOverrides, MixedPrecisionTensor or AutoMixprecision)";
  if (c.format != QuantFormat::ExtendedQDQ)
    throw Error(types + ": Quark's block formats QBFP and QMX are written by ExtendedQuantFormat.QDQ (its "
                        "BFPQuantizeDequantize and MXQuantizeDequantize nodes), not by " +
                quant_format_name(c.format));
  if (c.per_channel && is_block(c.weight_type))
    throw Error(std::string("per_channel with weight_type ") + quant_type_name(c.weight_type) +
                ": a block format shares an exponent per block, not a scale per channel");
  // AdaRound skips a block-format weight (the layer is reported skipped); with every weight one, it would do
  // nothing.
  const bool adaround_on_blocks =
      !c.fast_finetune.adaquant &&
      ((c.include_fast_ft && is_block(c.weight_type)) ||
       (c.include_auto_mp && c.auto_mp.use_fast_ft && c.auto_mp.weight_target && is_block(*c.auto_mp.weight_target)));
  if (adaround_on_blocks)
    throw Error(types + (c.include_fast_ft ? ": include_fast_ft" : ": AutoMixUseFastFT") +
                " with AdaRound, which chooses between integers; block-format weights train with FastFinetune "
                "OptimAlgorithm adaquant");
}

}  // namespace

QuantFormat parse_quant_format(const std::string& name) {
  if (name == "QDQ" || name == "QuantFormat.QDQ") return QuantFormat::QDQ;
  if (name == "QOperator" || name == "QuantFormat.QOperator") return QuantFormat::QOperator;
  if (name == "VitisQuantFormat.QDQ" || name == "VitisQDQ") return QuantFormat::VitisQDQ;
  if (name == "FixNeuron" || name == "VitisQuantFormat.FixNeuron") return QuantFormat::FixNeuron;
  if (name == "ExtendedQuantFormat.QDQ" || name == "ExtendedQDQ") return QuantFormat::ExtendedQDQ;
  if (name == "ExtendedQuantFormat.QOperator") return QuantFormat::QOperator;  // Quark's enum: QOperator = 0
  if (block_fix_neuron_type(name)) return QuantFormat::ExtendedQDQ;
  throw Error("unknown quant format '" + name +
              "' (known: QDQ, QOperator, VitisQuantFormat.QDQ, VitisQuantFormat.FixNeuron, ExtendedQuantFormat.QDQ, "
              "VitisQuantFormat.BFPFixNeuron, VitisQuantFormat.MXFixNeuron)");
}

std::optional<ir::DataType> block_fix_neuron_type(const std::string& name) {
  if (name == "VitisQuantFormat.BFPFixNeuron" || name == "BFPFixNeuron") return kQBfp;
  if (name == "VitisQuantFormat.MXFixNeuron" || name == "MXFixNeuron") return kQMx;
  return std::nullopt;
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
    case QuantFormat::ExtendedQDQ:
      return "ExtendedQuantFormat.QDQ";
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
  return weight_type == ir::DataType::Int4 || weight_type == ir::DataType::Int8 ||
         weight_type == ir::DataType::Int16 || weight_type == ir::DataType::Int32 ||
         weight_type == ir::DataType::Float16 || weight_type == ir::DataType::BFloat16;
}

calib::CalibOptions QuantConfig::calibration_options() const {
  calib::CalibOptions o = calib;
  o.method = calibration_method();
  if (!o.symmetric && o.method != calibrate_method && calibrate_method == calib::Method::NonOverflow)
    o.symmetric = true;
  return o;
}

void check_config(const QuantConfig& c) {
  if (c.fast_finetune.given && !c.include_fast_ft && !(c.include_auto_mp && c.auto_mp.use_fast_ft))
    throw Error("extra option FastFinetune takes effect only with include_fast_ft true (or AutoMixUseFastFT)");
  if (c.include_fast_ft && !c.fast_finetune.adaquant && quant_type_is_float(c.weight_type))
    throw Error(std::string("include_fast_ft with weight_type ") + quant_type_name(c.weight_type) +
                ": AdaRound chooses between integers; float16/bfloat16 weights train with FastFinetune "
                "OptimAlgorithm adaquant");
  if (c.include_fast_ft && c.fast_finetune.mem_opt_level == 2 && !c.fast_finetune.cache_dir.empty() &&
      !std::filesystem::is_directory(c.fast_finetune.cache_dir))
    throw Error("FastFinetune CacheDir " + c.fast_finetune.cache_dir + ": not a directory");
  if (c.include_fast_ft && !c.fast_finetune.ref_model_path.empty())
    ir::require_file(c.fast_finetune.ref_model_path, "FastFinetune RefModelPath " + c.fast_finetune.ref_model_path);
  check_block_types(c);
  check_dynamic_quant_config(c);
  if (c.convert_lstm_to_custom_lstm) {
    // The ExtendedLSTM writer reads the Q/DQ nodes of a QDQ model around each LSTM.
    if (c.format != QuantFormat::QDQ && c.format != QuantFormat::ExtendedQDQ)
      throw Error(
          "ConvertLSTMToCustomLSTM with another format than QuantFormat.QDQ or ExtendedQuantFormat.QDQ: the "
          "LSTMs are written as ExtendedLSTM from the Q/DQ nodes around them");
    // Power-of-two scales make every multiplier of the op a power of two, which Quark's kernel
    // stores as -2^15 (recurrent_extended.cc): its gates would be negated.
    if (c.power_of_two())
      throw Error(
          "ConvertLSTMToCustomLSTM with power-of-two scales: Quark's ExtendedLSTM turns a multiplier that is a "
          "power of two into -2^15, and products of such scales all are; use a float-scale calibrate_method");
    if (c.enable_dpu || c.weights_only || c.use_dynamic_quant || c.use_matmul_nbits)
      throw Error(std::string("ConvertLSTMToCustomLSTM with ") +
                  (c.enable_dpu          ? "enable_dpu (the NPU's weights are int8)"
                   : c.weights_only      ? "WeightsOnly (ExtendedLSTM quantizes X and Y too)"
                   : c.use_dynamic_quant ? "use_dynamic_quant (no Q/DQ written)"
                                         : "UseMatMulNBits (no Q/DQ written)") +
                  ": choose one");
  }
  check_gptq_config(c);
  if (c.smooth.given && !c.include_sq)
    throw Error("extra options SmoothAlpha, SmoothAlphaRange and SmoothFolding take effect only with include_sq");
  if (c.smooth.range_given && c.smooth.alpha)
    throw Error("extra option SmoothAlphaRange takes effect only with SmoothAlpha \"auto\"");
  if (c.include_sq && (c.use_matmul_nbits || c.use_dynamic_quant))
    throw Error(std::string("include_sq (SmoothQuant, scales chosen from calibration data) with ") +
                (c.use_matmul_nbits ? "UseMatMulNBits" : "use_dynamic_quant") +
                ": those calibrate nothing; choose one");
  if (c.rotation.given && !c.include_rotation)
    throw Error("extra options RMatrixDim, UseRandomHad and RConfigPath take effect only with include_rotation");
  if (c.include_rotation && c.rotation.config_path.empty())
    throw Error("include_rotation: QuaRot rotates the nodes that extra option RConfigPath names (a JSON file of "
                "R1_pairs); it is not set");
  if (c.include_rotation && c.use_dynamic_quant)
    throw Error("include_rotation with use_dynamic_quant: Quark's dynamic quantization runs no pre-quantization "
                "algorithm; choose one");
  if (c.matmul_nbits.given && !c.use_matmul_nbits)
    throw Error("extra option MatMulNBitsParams takes effect only with UseMatMulNBits true");
  // The MatMulNBits path writes no Q/DQ and calibrates nothing (Quark): what works on those is refused.
  if (c.use_matmul_nbits && (c.include_fast_ft || c.include_auto_mp || c.bias_correction))
    throw Error(std::string("UseMatMulNBits (weight-only MatMulNBits, no Q/DQ) with ") +
                (c.include_fast_ft ? "include_fast_ft" : c.include_auto_mp ? "include_auto_mp" : "BiasCorrection") +
                ": those refine a Q/DQ model; choose one");
  auto is_8_or_16 = [](ir::DataType t) {
    return t == ir::DataType::Int8 || t == ir::DataType::UInt8 || t == ir::DataType::Int16 || t == ir::DataType::UInt16;
  };
  std::string types = std::string("activation_type ") + quant_type_name(c.activation_type) + " and weight_type " +
                      quant_type_name(c.weight_type);
  // 4-bit types: QuantFormat.QDQ only (Quark's check_static_quant_arguments; ONNX Runtime 1.19 or later).
  const bool four = asks_for(c, true, true, [](ir::DataType t) { return qmath::is_4bit_type(t); });
  if (four && c.format != QuantFormat::QDQ)
    throw Error(types + " (or an override): the 4-bit types QInt4 and QUInt4 are written by QuantFormat.QDQ only, "
                "not " + quant_format_name(c.format));
  auto is_4_8_or_16 = [&](ir::DataType t) {
    return is_8_or_16(t) || (c.format == QuantFormat::QDQ && qmath::is_4bit_type(t));
  };
  if (c.format == QuantFormat::QDQ || c.format == QuantFormat::QOperator) {
    if (!is_4_8_or_16(c.activation_type) || !is_4_8_or_16(c.weight_type))
      throw Error(types + ": QuantFormat." + quant_format_name(c.format) +
                  (c.format == QuantFormat::QDQ ? " takes 4-, 8- and 16-bit" : " takes 8- and 16-bit") +
                  " integer types; 32-bit, float16 and bfloat16 need VitisQuantFormat.QDQ or "
                  "ExtendedQuantFormat.QDQ");
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
  if (!c.use_power_of_two_scale && !calib::is_power_of_two(c.calibrate_method))
    throw Error(std::string("UsePowerOf2Scale false: calibrate_method ") + calib::method_name(c.calibrate_method) +
                " gives float scales already (the key applies to PowerOfTwoMethod NonOverflow and MinMSE)");
  if (!c.use_power_of_two_scale && c.enable_dpu)
    throw Error("UsePowerOf2Scale false and enable_dpu: the NPU takes power-of-two scales");
  check_float16_model_keys(c);
  if (c.convert_opset_version && *c.convert_opset_version < 13 && c.optimize_model)
    throw Error("ConvertOpsetVersion " + std::to_string(*c.convert_opset_version) +
                " and optimize_model: the model preparation converts to opset 13 (set optimize_model false)");
  if (!c.use_qdq_vitis_custom_ops && c.format != QuantFormat::VitisQDQ)
    throw Error(std::string("UseQDQVitisCustomOps false chooses the ops of VitisQuantFormat.QDQ, not of ") +
                quant_format_name(c.format));
  if (!c.use_qdq_vitis_custom_ops && (c.activation_type != ir::DataType::Int8 || c.weight_type != ir::DataType::Int8))
    throw Error(std::string("UseQDQVitisCustomOps false: vai_q_onnx's ai.onnx.contrib QuantizeLinear / "
                            "DequantizeLinear take int8 only, not ") +
                quant_type_name(c.activation_type == ir::DataType::Int8 ? c.weight_type : c.activation_type));
  if (!c.use_qdq_vitis_custom_ops && c.int32_bias.value_or(false))
    throw Error("UseQDQVitisCustomOps false and Int32Bias: the int8 ai.onnx.contrib DequantizeLinear cannot hold an "
                "int32 bias (vai_q_onnx quantizes biases like weights here)");
  if (c.weights_only && c.enable_dpu)
    throw Error("WeightsOnly and enable_dpu: the NPU computes on quantized activations");
  if (c.weights_only && c.format == QuantFormat::QOperator)
    throw Error("WeightsOnly with QuantFormat.QOperator: its QLinear ops take quantized activations");
  // vai_q_onnx's Int16Method (quantize_static refuses it with enable_dpu and VitisQuantFormat).
  if (c.int16_scale && c.enable_dpu)
    throw Error("Int16Scale and enable_dpu: the NPU takes power-of-two scales, not M / 2^N");
  if (c.int16_scale && (c.format == QuantFormat::VitisQDQ || c.format == QuantFormat::FixNeuron))
    throw Error(std::string("Int16Scale with ") + quant_format_name(c.format) +
                ": vai_q_onnx takes M / 2^N scales in QuantFormat.QDQ and QOperator only");
  if (c.use_unsigned_relu && !c.power_of_two())
    throw Error("UseUnsignedReLU applies to power-of-two quantization (calibrate_method NonOverflow or MinMSE)");
  // Quark applies AlignEltwiseQuantType only without the NPU flags (its extra_options documentation).
  if (c.align_eltwise_quant_type.value_or(false) && c.enable_dpu)
    throw Error("AlignEltwiseQuantType does not apply with enable_dpu (Quark uses it without the NPU flags only)");
  if (c.enable_dpu) {  // vai_q_onnx's dpu quantizer (Quark's XINT8 quantizer rejects the same)
    if (c.format != QuantFormat::QDQ)
      throw Error(std::string("enable_dpu: the dpu quantizer writes QuantFormat.QDQ, not ") +
                  quant_format_name(c.format));
    if (!c.power_of_two())
      throw Error(
          "enable_dpu: the NPU takes power-of-two scales: calibrate_method must be PowerOfTwoMethod "
          "NonOverflow or MinMSE (vai_q_onnx hands other methods to ONNX Runtime and ignores enable_dpu)");
    if (c.per_channel)
      throw unsupported("enable_dpu: per_channel is not supported by the dpu quantizer (one position per tensor)");
    if (c.reduce_range) throw unsupported("enable_dpu: reduce_range is not supported by the dpu quantizer");
    if (c.weight_type != ir::DataType::Int8)
      throw Error(std::string("enable_dpu: weight_type must be QInt8, got ") + quant_type_name(c.weight_type));
    if (c.activation_type != ir::DataType::Int8 && c.activation_type != ir::DataType::UInt8)
      throw Error(std::string("enable_dpu: activation_type must be QInt8 or QUInt8, got ") +
                  quant_type_name(c.activation_type));
    if (!c.weights_symmetric())
      throw Error("enable_dpu: WeightSymmetric must be True (the NPU's weights are symmetric)");
    if (!c.activation_symmetric)
      throw Error(
          "enable_dpu: ActivationSymmetric must be True (vai_q_onnx forces it, Quark's XINT8 quantizer "
          "rejects False): set extra option ActivationSymmetric");
  } else {
    // Quark runs the graph rewrites by their keys alone (VINT8 sets them without an NPU flag), but
    // simulating the DPU and removing Q/DQ around fused activations are its NPU CNN quantizer's.
    std::string key;
    for (const passes::PassInfo& pass : passes::dpu_simulation_passes())
      for (const passes::DpuPassOption& o : passes::dpu_pass_options())
        if (key.empty() && std::string(o.pass) == pass.name) {
          auto it = c.dpu_pass_switches.find(o.option);
          if (it != c.dpu_pass_switches.end() && it->second) key = o.option;
        }
    if (key.empty() && c.remove_qdq_conv_leaky_relu) key = "RemoveQDQConvLeakyRelu";
    if (key.empty() && c.remove_qdq_conv_prelu) key = "RemoveQDQConvPRelu";
    if (key.empty() && c.remove_qdq_conv_gelu) key = "RemoveQDQConvGelu";
    if (key.empty() && c.remove_qdq_instance_norm) key = "RemoveQDQInstanceNorm";
    if (!key.empty())
      throw Error("extra option " + key + " takes effect only with enable_dpu (the NPU CNN quantizer's)");
  }
  if (c.enable_dpu && c.enable_npu_transformer)  // Quark: one NPU quantizer or the other
    throw Error("enable_dpu (enable_npu_cnn) and enable_npu_transformer: choose one NPU path");
  check_ipu_config(c);  // IPULimitationCheck's options need enable_dpu
  check_post_process(c);
  check_float_type_options(c);
  check_weight_min_mse(c);
  for (const auto& [op, axis] : c.per_channel_axis)
    if (axis < -8 || axis > 8)
      throw Error("QDQOpTypePerChannelSupportToAxis: axis " + std::to_string(axis) + " for " + op + " is out of range");
  check_mixed_precision(c);
}

bool is_npu_transformer_pass_option(const std::string& key) {
  return key == "ConvertBNToConv" || key == "ConvertReduceMeanToGlobalAvgPool" || key == "SplitLargeKernelPool" ||
         key == "ConvertSplitToSlice";
}

bool rewrite_on(const QuantConfig& c, const std::string& key) {
  auto it = c.dpu_pass_switches.find(key);
  if (it != c.dpu_pass_switches.end()) return it->second;
  if (!c.enable_dpu) return c.enable_npu_transformer && is_npu_transformer_pass_option(key);
  for (const passes::DpuPassOption& o : passes::dpu_pass_options())
    if (o.option == key) return o.default_value;
  return false;
}

}  // namespace onnxptq::quant
