// The preset table: the vai_q_onnx user guide's "Recommended Configurations" and Quark's custom_config.py.
#include "quant/presets.h"

#include <algorithm>

#include "onnxptq/error.h"
#include "quant/config_keys.h"

namespace onnxptq::quant {

namespace {

using json = nlohmann::json;

// A vai_q_onnx quantize_static call: the guide's defaults for what it does not set.
json vai(const char* method, const char* act, const char* wgt, json extra = json::object(), json fields = {}) {
  json c = {{"quant_format", "QuantFormat.QDQ"},
            {"calibrate_method", method},
            {"activation_type", act},
            {"weight_type", wgt},
            {"per_channel", false},
            {"reduce_range", false},
            {"optimize_model", true},
            {"include_cle", false},
            {"extra_options", std::move(extra)}};
  if (fields.is_object()) c.update(fields);
  return c;
}

// A Quark QuantizationConfig: its class defaults (include_cle True) for what it does not set.
json quark(const char* format, const char* method, const char* act, const char* wgt, json extra, json fields = {}) {
  json quark_fields = {{"include_cle", true}};
  if (fields.is_object()) quark_fields.update(fields);
  json c = vai(method, act, wgt, std::move(extra), std::move(quark_fields));
  c["quant_format"] = format;
  return c;
}

constexpr const char* kQDQ = "QuantFormat.QDQ";
constexpr const char* kEQDQ = "ExtendedQuantFormat.QDQ";
constexpr const char* kU8 = "QuantType.QUInt8";
constexpr const char* kS8 = "QuantType.QInt8";
constexpr const char* kU16 = "ExtendedQuantType.QUInt16";
constexpr const char* kS16 = "ExtendedQuantType.QInt16";
constexpr const char* kFP16 = "ExtendedQuantType.QFloat16";
constexpr const char* kBF16 = "ExtendedQuantType.QBFloat16";
constexpr const char* kBFP = "ExtendedQuantType.QBFP";
constexpr const char* kMX = "ExtendedQuantType.QMX";

// custom_config.py's shared parameter blocks (DEFAULT_ADAROUND_PARAMS, ...).
json adaround_params() {
  return {{"DataSize", 1000},      {"FixedSeed", 1705472343}, {"BatchSize", 2},
          {"NumIterations", 1000}, {"LearningRate", 0.1},     {"OptimAlgorithm", "adaround"},
          {"OptimDevice", "cpu"},  {"InferDevice", "cpu"},    {"EarlyStop", true}};
}
json adaquant_params() {
  json p = adaround_params();
  p["LearningRate"] = 0.00001;
  p["OptimAlgorithm"] = "adaquant";
  return p;
}
json bfp_params() {
  return {{"bfp_method", "to_bfp"}, {"axis", 1}, {"bit_width", 16}, {"block_size", 8}, {"rounding_mode", 2}};
}
json microexponents_params(int bit_width) {
  return {{"bfp_method", "to_bfp_prime"},
          {"axis", 1},
          {"bit_width", bit_width},
          {"block_size", 16},
          {"sub_block_size", 2},
          {"sub_block_shift_bits", 1},
          {"rounding_mode", 2}};
}
json microscaling_params(const char* element_dtype) {
  return {{"element_dtype", element_dtype}, {"axis", 1}, {"block_size", 32}, {"rounding_mode", 2}};
}

const json kFQNIC = {{"ForceQuantizeNoInputCheck", true}};

json with(json a, const json& b) {
  a.update(b);
  return a;
}

// The _ADAROUND / _ADAQUANT variant of a preset: include_fast_ft and the FastFinetune block.
Preset finetuned(const Preset& base, bool adaquant) {
  Preset p = base;
  p.name += adaquant ? "_ADAQUANT" : "_ADAROUND";
  p.description += adaquant ? ", then AdaQuant fast finetune" : ", then AdaRound fast finetune";
  p.config["include_fast_ft"] = true;
  p.config["extra_options"]["FastFinetune"] = default_finetune_params(adaquant);
  return p;
}

std::vector<Preset> make_presets() {
  std::vector<Preset> t;
  auto add = [&t](std::string name, std::string description, json config) {
    t.push_back({std::move(name), std::move(description), std::move(config)});
  };
  auto add_finetuned = [&t](bool adaround, bool adaquant) {
    Preset base = t.back();
    if (adaround) t.push_back(finetuned(base, false));
    if (adaquant) t.push_back(finetuned(base, true));
  };

  // The vai_q_onnx user guide, "Recommended Configurations" and "Quantizing Using Cross Layer Equalization".
  add("VAI_CNN_NPU",
      "vai_q_onnx's CNNs on NPU: power-of-two MinMSE, uint8 symmetric activations, int8 weights, enable_dpu",
      vai("MinMSE", "QUInt8", "QInt8", {{"ActivationSymmetric", true}}, {{"enable_dpu", true}}));
  add("VAI_CNN_NPU_CLE", "VAI_CNN_NPU with cross-layer equalization (include_cle, ReplaceClip6Relu, CLESteps 1)",
      vai("MinMSE", "QUInt8", "QInt8",
          {{"ActivationSymmetric", true}, {"ReplaceClip6Relu", true}, {"CLESteps", 1}, {"CLEScaleAppendBias", true}},
          {{"enable_dpu", true}, {"include_cle", true}}));
  add("VAI_TRANSFORMER_NPU", "vai_q_onnx's Transformers on NPU: MinMax, int8 activations and weights",
      vai("MinMax", "QInt8", "QInt8"));
  add("VAI_CNN_CPU", "vai_q_onnx's CNNs on CPU: MinMax, uint8 activations, int8 weights",
      vai("MinMax", "QUInt8", "QInt8"));

  // Quark's DefaultConfigMapping, in its order.
  add("UINT8_DYNAMIC_QUANT", "Quark: dynamic quantization, uint8 weights (quantize_dynamic)",
      quark(kQDQ, "MinMax", kS8, kU8, json::object(), {{"use_dynamic_quant", true}}));
  add("XINT8", "Quark: the NPU CNN path, power-of-two MinMSE, uint8 symmetric activations, int8 weights",
      quark(kQDQ, "MinMSE", kU8, kS8, with({{"ActivationSymmetric", true}}, kFQNIC), {{"enable_dpu", true}}));
  add_finetuned(true, true);
  add("VINT8", "Quark: power-of-two int8 for the VAIML compiler, random data, no graph optimisation",
      quark(kQDQ, "MinMSE", kS8, kS8,
            {{"ActivationSymmetric", true},
             {"UseRandomData", true},
             {"ConvertBNToConv", true},
             {"ConvertSigmoidToHardSigmoid", false},
             {"ConvertClipToRelu", true},
             {"ConvertSplitToSlice", true},
             {"SplitLargeKernelPool", false},
             {"ReplaceClip6Relu", true},
             {"ConvertReduceMeanToGlobalAvgPool", false},
             {"RemoveQDQConvClip", false},
             {"RemoveQDQConvPRelu", false},
             {"RemoveQDQConvRelu", false},
             {"RemoveQDQConvLeakyRelu", false},
             {"Int32Bias", false},
             {"DedicatedQDQPair", true},
             {"QuantizeAllOpTypes", true}},
            {{"optimize_model", false}}));
  add("S8S8_AAWS", "Quark: int8 asymmetric activations (Percentile 99.9999), int8 symmetric weights",
      quark(kQDQ, "Percentile", kS8, kS8, with({{"CalibPercentile", 99.9999}}, kFQNIC)));
  add_finetuned(true, true);
  add("U8S8_AAWS", "Quark: uint8 asymmetric activations (Percentile), int8 symmetric weights",
      quark(kQDQ, "Percentile", kU8, kS8, kFQNIC));
  add_finetuned(true, true);
  add("U8U8_AAWA", "Quark: uint8 asymmetric activations (Percentile) and weights",
      quark(kQDQ, "Percentile", kU8, kU8, with({{"ActivationSymmetric", false}, {"WeightSymmetric", false}}, kFQNIC)));
  add("S16S8_ASWS", "Quark: int16 symmetric activations (Percentile), int8 symmetric weights, ExtendedQuantFormat",
      quark(kEQDQ, "Percentile", kS16, kS8, with({{"ActivationSymmetric", true}}, kFQNIC)));
  add_finetuned(true, true);
  const json a8w8_extra =
      with({{"ActivationSymmetric", true}, {"AlignSlice", false}, {"FoldRelu", true}, {"AlignConcat", true}}, kFQNIC);
  add("A8W8", "Quark for Ryzen AI: int8 symmetric activations and weights, float scales (MinMax), FoldRelu",
      quark(kEQDQ, "MinMax", kS8, kS8, a8w8_extra));
  add_finetuned(true, true);
  add("A16W8", "Quark for Ryzen AI: int16 symmetric activations, int8 weights, float scales (MinMax), FoldRelu",
      quark(kEQDQ, "MinMax", kS16, kS8, with(a8w8_extra, {{"AlignEltwiseQuantType", true}})));
  add_finetuned(true, true);
  add("U16S8_AAWS", "Quark: uint16 asymmetric activations (Percentile), int8 symmetric weights",
      quark(kEQDQ, "Percentile", kU16, kS8, kFQNIC));
  add_finetuned(true, true);
  add("FP16", "Quark: float16 activations and weights", quark(kEQDQ, "MinMax", kFP16, kFP16, kFQNIC));
  add_finetuned(false, true);
  add("BF16", "Quark: bfloat16 activations and weights, every op type",
      quark(kEQDQ, "MinMax", kBF16, kBF16, with({{"QuantizeAllOpTypes", true}}, kFQNIC)));
  add_finetuned(false, true);
  add("BFP16", "Quark: block floating point 16 (block 8) activations and weights",
      quark(kEQDQ, "MinMax", kBFP, kBFP, {{"BFPAttributes", bfp_params()}}));
  add_finetuned(false, true);
  for (auto [name, bits] : {std::pair{"MX4", 11}, std::pair{"MX6", 13}, std::pair{"MX9", 16}}) {
    add(name,
        std::string("Quark: microexponents ") + name + " (bit width " + std::to_string(bits) +
            ") activations and weights",
        quark(kEQDQ, "MinMax", kBFP, kBFP, {{"BFPAttributes", microexponents_params(bits)}}));
    add_finetuned(false, true);
  }
  for (auto [name, dtype] :
       {std::pair{"MXFP8E5M2", "fp8_e5m2"}, std::pair{"MXFP8E4M3", "fp8_e4m3"}, std::pair{"MXFP6E3M2", "fp6_e3m2"},
        std::pair{"MXFP6E2M3", "fp6_e2m3"}, std::pair{"MXFP4E2M1", "fp4_e2m1"}, std::pair{"MXINT8", "int8"}}) {
    add(name, std::string("Quark: OCP microscaling ") + dtype + " (block 32) activations and weights",
        quark(kEQDQ, "MinMax", kMX, kMX, {{"MXAttributes", microscaling_params(dtype)}}));
    add_finetuned(false, true);
  }
  add("S16S16_MIXED_S8S8", "Quark: int16 activations and weights, automatic mixed precision down to int8",
      quark(kEQDQ, "Percentile", kS16, kS16,
            with({{"CalibPercentile", 99.9999},
                  {"Int32Bias", false},
                  {"Int16Bias", false},
                  {"AutoMixprecision",
                   {{"ActTargetQuantType", "QInt8"}, {"WeightTargetQuantType", "QInt8"}, {"OutputIndex", 0}}}},
                 kFQNIC),
            {{"include_auto_mp", true}}));
  auto bf16_mixed = [](const char* target, bool dual, const json& attributes) {
    json amp = {{"ActTargetQuantType", target}, {"WeightTargetQuantType", target}, {"OutputIndex", 0}};
    if (dual) amp["DualQuantNodes"] = true;
    json extra = {{"ActivationSymmetric", true},
                  {"QuantizeBias", false},
                  {"DedicateDQNode", true},
                  {"CalibDataSize", 1},
                  {"AutoMixprecision", amp}};
    extra.update(attributes);
    return quark(kEQDQ, "MinMax", kBF16, kBF16, extra, {{"include_auto_mp", true}});
  };
  add("BF16_MIXED_BFP16", "Quark: bfloat16 with automatic mixed precision down to BFP16",
      bf16_mixed("QBFP", true, {{"BFPAttributes", bfp_params()}}));
  // Quark's _ADAQUANT variant drops DualQuantNodes.
  add("BF16_MIXED_BFP16_ADAQUANT", "Quark: BF16_MIXED_BFP16 without dual quant nodes, then AdaQuant fast finetune",
      with(bf16_mixed("QBFP", false, {{"BFPAttributes", bfp_params()}}), {{"include_fast_ft", true}}));
  t.back().config["extra_options"]["FastFinetune"] = adaquant_params();
  add("BF16_MIXED_MXINT8", "Quark: bfloat16 with automatic mixed precision down to MXINT8",
      bf16_mixed("QMX", true, {{"MXAttributes", microscaling_params("int8")}}));
  add_finetuned(false, true);
  add("BF16_BFP16", "Quark: bfloat16 activations, BFP16 weights",
      quark(kEQDQ, "MinMax", kBF16, kBFP, {{"BFPAttributes", bfp_params()}}));
  add("BF16_MXINT8", "Quark: bfloat16 activations, MXINT8 weights",
      quark(kEQDQ, "MinMax", kBF16, kMX, {{"MXAttributes", microscaling_params("int8")}}));
  add("MX9_INT8", "Quark: MX9 activations, int8 weights",
      quark(kEQDQ, "MinMax", kBFP, kS8, {{"BFPAttributes", microexponents_params(16)}}));
  add("INT8_CNN_DEFAULT", "Quark: CNNs, uint8 asymmetric activations (MinMax), int8 weights",
      quark(kQDQ, "MinMax", kU8, kS8, kFQNIC));
  add("INT16_CNN_DEFAULT", "Quark: CNNs, uint16 asymmetric activations (MinMax), int16 weights",
      quark(kEQDQ, "MinMax", kU16, kS16, kFQNIC));
  add("INT8_TRANSFORMER_DEFAULT",
      "Quark: transformers on the NPU, uint8 activations (moving-average MinMax), int8 weights",
      quark(kQDQ, "MinMax", kU8, kS8, {{"CalibMovingAverage", true}}, {{"enable_npu_transformer", true}}));
  add("INT16_TRANSFORMER_DEFAULT",
      "Quark: transformers on the NPU, uint16 activations (moving-average MinMax), int16 weights",
      quark(kEQDQ, "MinMax", kU16, kS16, {{"CalibMovingAverage", true}}, {{"enable_npu_transformer", true}}));
  const json accurate = {{"CalibPercentile", 99.9999}, {"FastFinetune", adaround_params()}};
  add("INT8_CNN_ACCURATE", "Quark: CNNs, uint8 activations (Percentile 99.9999), int8 weights, AdaRound",
      quark(kQDQ, "Percentile", kU8, kS8, with(accurate, kFQNIC), {{"include_fast_ft", true}}));
  add("INT16_CNN_ACCURATE", "Quark: CNNs, uint16 activations (Percentile 99.9999), int16 weights, AdaRound",
      quark(kEQDQ, "Percentile", kU16, kS16, with(accurate, kFQNIC), {{"include_fast_ft", true}}));
  add("INT8_TRANSFORMER_ACCURATE",
      "Quark: transformers on the NPU, uint8 activations (Percentile 99.9999), int8 weights, AdaRound",
      quark(kQDQ, "Percentile", kU8, kS8, accurate, {{"include_fast_ft", true}, {"enable_npu_transformer", true}}));
  add("INT16_TRANSFORMER_ACCURATE",
      "Quark: transformers on the NPU, uint16 activations (Percentile 99.9999), int16 weights, AdaRound",
      quark(kEQDQ, "Percentile", kU16, kS16, accurate, {{"include_fast_ft", true}, {"enable_npu_transformer", true}}));
  add("MATMUL_NBITS", "Quark: 4-bit weight-only MatMul (ONNX Runtime's MatMulNBits, group 128)",
      quark(kQDQ, "MinMax", kS8, kS8,
            {{"UseMatMulNBits", true},
             {"MatMulNBitsParams", {{"GroupSize", 128}, {"Symmetric", true}, {"Bits", 4}, {"AccuracyLevel", 1}}}}));
  return t;
}

// The order settings are applied in: switches of whole features first, so that the first refusal
// is the missing feature and not one of its details; extra options last.
constexpr const char* kKeyOrder[] = {
    "use_dynamic_quant", "include_fast_ft", "include_auto_mp", "enable_npu_transformer", "enable_dpu",
    "activation_type",   "weight_type",     "quant_format",    "calibrate_method",       "per_channel",
    "reduce_range",      "optimize_model",  "include_cle",
};

}  // namespace

nlohmann::json default_finetune_params(bool adaquant) { return adaquant ? adaquant_params() : adaround_params(); }

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = make_presets();
  return table;
}

const Preset* find_preset(const std::string& name) {
  for (const Preset& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string preset_names() {
  std::string names;
  for (const Preset& p : presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

std::vector<PresetRefusal> apply_preset_settings(QuantConfig& config, const Preset& preset) {
  std::vector<PresetRefusal> refused;
  auto apply = [&](const std::string& key, auto&& set) {
    try {
      set();
    } catch (const Error& e) {
      refused.push_back({key, e.what(), e.kind()});
    }
  };
  std::vector<std::string> keys(std::begin(kKeyOrder), std::end(kKeyOrder));
  for (const auto& [key, value] : preset.config.items())
    if (key != "extra_options" && std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  for (const std::string& key : keys)
    if (preset.config.contains(key)) apply(key, [&] { apply_config_json(config, {{key, preset.config.at(key)}}); });
  if (preset.config.contains("extra_options"))
    for (const auto& [key, value] : preset.config.at("extra_options").items())
      apply(key, [&] { apply_extra_option(config, key, value); });
  return refused;
}

std::vector<PresetRefusal> check_preset(const Preset& preset) {
  QuantConfig config;
  std::vector<PresetRefusal> refused = apply_preset_settings(config, preset);
  if (refused.empty()) {
    try {
      check_config(config);
    } catch (const Error& e) {
      refused.push_back({"check_config", e.what(), e.kind()});
    }
  }
  return refused;
}

void apply_preset(QuantConfig& config, const std::string& name) {
  const Preset* preset = find_preset(name);
  if (!preset) throw Error("unknown preset '" + name + "' (presets: " + preset_names() + ")");
  std::vector<PresetRefusal> refused = apply_preset_settings(config, *preset);
  if (refused.empty()) return;
  std::string message = "preset " + name + ": ";
  // Unsupported when every refusal is (a feature not built), else bad input.
  ErrorKind kind = ErrorKind::unsupported;
  for (size_t i = 0; i < refused.size(); ++i) {
    message += (i ? "; " : "") + refused[i].error;
    if (refused[i].kind != ErrorKind::unsupported) kind = ErrorKind::bad_input;
  }
  throw Error(message, kind);
}

}  // namespace onnxptq::quant
