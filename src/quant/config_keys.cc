#include "quant/config_keys.h"

#include <nlohmann/json.hpp>

#include "onnxptq/error.h"
#include "passes/dpu.h"
#include "passes/model_format.h"
#include "quant/block_format.h"
#include "quant/config_keys_detail.h"
#include "quant/overrides.h"
#include "quant/post_process.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

namespace {

using namespace config_keys_detail;

// quantize_static's arguments (vai_q_onnx 1.16's names and defaults) and the switches of Quark for
// ONNX's QuantizationConfig.
void add_config_keys(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  add(works(kConfig, "quant_format", "string", "\"QDQ\"", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              const std::string name = json_string(k.name, v);
              c.format = parse_quant_format(name);
              c.format_block_type = block_fix_neuron_type(name);
              if (c.format_block_type) c.activation_type = c.weight_type = *c.format_block_type;
            }));
  add(works(kConfig, "calibrate_method", "string", "\"MinMSE\"", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              c.calibrate_method = calib::parse_method(json_string(k.name, v));
            }));
  add(works(kConfig, "activation_type", "string", "\"QInt8\"", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              const ir::DataType type = parse_quant_type(json_string(k.name, v));
              c.activation_type = c.format_block_type.value_or(type);
            }));
  add(works(kConfig, "weight_type", "string", "\"QInt8\"", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              const ir::DataType type = parse_quant_type(json_string(k.name, v));
              c.weight_type = c.format_block_type.value_or(type);
            }));
  add(works(kConfig, "per_channel", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.per_channel = json_bool(k.name, v); }));
  add(works(kConfig, "reduce_range", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.reduce_range = json_bool(k.name, v); }));
  add(works(
      kConfig, "op_types_to_quantize", "list of strings", "[]", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.op_types_to_quantize = json_strings(k.name, v); }));
  add(works(kConfig, "nodes_to_quantize", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.nodes_to_quantize = json_strings(k.name, v); }));
  add(works(kConfig, "nodes_to_exclude", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.nodes_to_exclude = json_strings(k.name, v); }));
  add(works(kConfig, "subgraphs_to_exclude", "list of [start nodes, end nodes]", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              const std::string expected =
                  "option " + k.name + ": expected a list of [[start nodes], [end nodes]], got ";
              if (!v.is_array()) throw Error(expected + v.dump());
              c.subgraphs_to_exclude.clear();
              for (const json& pair : v) {
                if (!pair.is_array() || pair.size() != 2 || !pair[0].is_array() || !pair[1].is_array())
                  throw Error(expected + v.dump());
                c.subgraphs_to_exclude.push_back({json_strings(k.name, pair[0]), json_strings(k.name, pair[1])});
              }
            }));
  add(works(kConfig, "extra_op_types_to_quantize", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              c.extra_op_types_to_quantize = json_strings(k.name, v);
            }));
  add(works(kConfig, "input_nodes", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.input_nodes = json_strings(k.name, v); }));
  add(works(kConfig, "output_nodes", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.output_nodes = json_strings(k.name, v); }));
  add(works(kConfig, "optimize_model", "bool", "true", "passes",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.optimize_model = json_bool(k.name, v); }));
  add(works(kConfig, "include_cle", "bool", "false", "passes",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.include_cle = json_bool(k.name, v); }));
  add(works(
      kConfig, "include_auto_mp", "bool", "false", "accuracy",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.include_auto_mp = json_bool(k.name, v); },
      "with AutoMixprecision"));
  add(works(
      kConfig, "include_fast_ft", "bool", "false", "finetune",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.include_fast_ft = json_bool(k.name, v); },
      "with FastFinetune"));
  add(works(
      kConfig, "specific_tensor_precision", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.specific_tensor_precision = json_bool(k.name, v); },
      "with MixedPrecisionTensor"));
  add(works(kConfig, "convert_fp16_to_fp32", "bool", "false", "passes",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.convert_fp16_to_fp32 = json_bool(k.name, v); }));
  add(works(
      kConfig, "fp16_fp32_convert", "bool", "false", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.convert_fp16_to_fp32 = json_bool(k.name, v); },
      "vai_q_onnx's name of convert_fp16_to_fp32"));
  add(works(kConfig, "convert_nchw_to_nhwc", "bool", "false", "passes",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.convert_nchw_to_nhwc = json_bool(k.name, v); }));
  add(works(kConfig, "enable_dpu", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.enable_dpu = json_bool(k.name, v); }));
  add(works(
      kConfig, "enable_npu_transformer", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.enable_npu_transformer = json_bool(k.name, v); }));
  add(limited(kConfig, "execution_providers", "list of strings", "[\"CPUExecutionProvider\"]", "engine",
              "CPUExecutionProvider only: onnxptq runs on its own CPU engine",
              [](QuantConfig&, const ConfigKey& k, const json& v) {
                for (const std::string& p : json_strings(k.name, v))
                  if (p != "CPUExecutionProvider")
                    throw unsupported("execution provider '" + p +
                                      "' is not available: onnxptq runs on its own CPU engine (CPUExecutionProvider)");
              }));
  add(works(kConfig, "use_dynamic_quant", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_dynamic_quant = json_bool(k.name, v); }));
  add(works(kConfig, "extra_options", "object", "{}", "quant", [](QuantConfig& c, const ConfigKey&, const json& v) {
    if (!v.is_object()) throw Error("extra_options must be a JSON object");
    for (const auto& [key, value] : v.items()) apply_extra_option(c, key, value);
  }));
}

// vai_q_onnx's, ONNX Runtime's and Quark's extra_options that onnxptq acts on.
void add_quantizer_options(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  add(works(kExtra, "ActivationSymmetric", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.activation_symmetric = json_bool(k.name, v); }));
  add(works(kExtra, "WeightSymmetric", "bool", "by weight_type", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.weight_symmetric = json_bool(k.name, v); }));
  add(works(
      kExtra, "UseUnsignedReLU", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_unsigned_relu = json_bool(k.name, v); },
      "with a power-of-two method"));
  add(works(kExtra, "QuantizeBias", "bool", "true", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.quantize_bias = json_bool(k.name, v); }));
  add(works(kExtra, "WeightsOnly", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.weights_only = json_bool(k.name, v); }));
  // onnxptq's own key: Quark writes ExtendedLSTM only with its tool convert_lstm_to_customlstm.
  add(works(
      kExtra, "ConvertLSTMToCustomLSTM", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.convert_lstm_to_custom_lstm = json_bool(k.name, v); },
      "onnxptq's own; with QuantFormat.QDQ or ExtendedQuantFormat.QDQ"));
  add(works(
      kExtra, "AddQDQPairToWeight", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.add_qdq_pair_to_weight = json_bool(k.name, v); }));
  add(works(kExtra, "DedicatedQDQPair", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.dedicated_qdq_pair = json_bool(k.name, v); }));
  add(works(kExtra, "OpTypesToExcludeOutputQuantization", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              std::vector<std::string> ops = json_strings(k.name, v);
              c.op_types_to_exclude_output_quantization = std::set<std::string>(ops.begin(), ops.end());
            }));
  add(works(kExtra, "NodesToExcludeOutputQuantization", "list of strings", "[]", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              std::vector<std::string> nodes = json_strings(k.name, v);
              c.nodes_to_exclude_output_quantization = std::set<std::string>(nodes.begin(), nodes.end());
            }));
  add(works(kExtra, "QDQOpTypePerChannelSupportToAxis", "object", "{}", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              if (!v.is_object()) throw Error("extra option " + k.name + ": expected {op type: axis}, got " + v.dump());
              for (const auto& [op, axis] : v.items()) {
                if (!axis.is_number_integer())
                  throw Error("extra option " + k.name + ": axis of " + op + " must be an integer");
                c.per_channel_axis[op] = axis.get<int64_t>();
              }
            }));
  add(works(kExtra, "TensorQuantOverrides", "object", "{}", "quant",
            [](QuantConfig& c, const ConfigKey&, const json& v) { apply_tensor_quant_overrides(c, v); }));
  add(works(
      kExtra, "MixedPrecisionTensor", "object", "{}", "quant",
      [](QuantConfig& c, const ConfigKey&, const json& v) { apply_mixed_precision_tensor(c, v); },
      "with specific_tensor_precision"));
  add(works(
      kExtra, "AutoMixprecision", "object", "unset", "accuracy",
      [](QuantConfig& c, const ConfigKey&, const json& v) { apply_auto_mixprecision(c.auto_mp, v); },
      "with include_auto_mp"));
  add(works(
      kExtra, "FastFinetune", "object", "unset", "finetune",
      [](QuantConfig& c, const ConfigKey&, const json& v) { apply_fast_finetune(c.fast_finetune, v); },
      "with include_fast_ft"));
  add(works(
      kConfig, "include_sq", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.include_sq = json_bool(k.name, v); },
      "SmoothQuant before calibration, with SmoothAlpha"));
  add(works(
      kExtra, "SmoothAlpha", "number", "0.5", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        c.smooth.given = true;
        if (v == "auto") {
          c.smooth.alpha.reset();
          return;
        }
        const double a = v.is_string() ? -1 : json_number(k.name, v);
        if (!(a >= 0 && a <= 1))
          throw Error("extra option SmoothAlpha: expected a number in [0, 1] or \"auto\", got " + v.dump());
        c.smooth.alpha = a;
      },
      "with include_sq; \"auto\": searched per MatMul input over SmoothAlphaRange"));
  add(works(
      kExtra, "SmoothAlphaRange", "list of numbers", "[0.3, 0.7, 0.05]", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        if (!v.is_array() || v.size() != 3)
          throw Error("extra option SmoothAlphaRange: expected [min, max, step], got " + v.dump());
        const double lo = json_number(k.name, v[0]), hi = json_number(k.name, v[1]), step = json_number(k.name, v[2]);
        if (!(lo >= 0 && hi <= 1 && lo <= hi && step > 0))
          throw Error("extra option SmoothAlphaRange: expected 0 <= min <= max <= 1 and step > 0, got " + v.dump());
        c.smooth.alpha_min = lo;
        c.smooth.alpha_max = hi;
        c.smooth.alpha_step = step;
        c.smooth.range_given = c.smooth.given = true;
      },
      "onnxptq; with SmoothAlpha \"auto\""));
  add(works(
      kExtra, "SmoothFolding", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        c.smooth.folding = json_bool(k.name, v);
        c.smooth.given = true;
      },
      "onnxptq; with include_sq: the LayerNormalization, MatMul, Gemm or Mul before the MatMuls takes the scales, no "
      "Mul added"));
  add(works(
      kConfig, "include_rotation", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.include_rotation = json_bool(k.name, v); },
      "QuaRot's R1 rotation (Hadamard) of the nodes RConfigPath names, before calibration"));
  add(works(
      kExtra, "RMatrixDim", "integer", "4096", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        const int64_t n = json_integer(k.name, v);
        if (n < 1 || n > (int64_t{1} << 20) || (n & (n - 1)) != 0)
          throw Error("extra option RMatrixDim: " + v.dump() + " is not a power of two up to 2^20 (onnxptq builds "
                      "the Sylvester Hadamard matrices; Quark also takes 12, 20, 28, ... times a power of two)");
        c.rotation.matrix_dim = n;
        c.rotation.given = true;
      },
      "with include_rotation: the rotation's size, the hidden size; a power of two"));
  add(works(
      kExtra, "UseRandomHad", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        c.rotation.random = json_bool(k.name, v);
        c.rotation.given = true;
      },
      "with include_rotation: a random +-1 diagonal (seeded: the same each run) before the Hadamard matrix"));
  add(works(
      kExtra, "RConfigPath", "string", "unset", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        c.rotation.config_path = json_string(k.name, v);
        c.rotation.given = true;
      },
      "with include_rotation: the JSON file of R1_pairs (prev_nodes, next_nodes, norm_node)"));
  add(works(
      kExtra, "BiasCorrection", "bool", "false", "finetune",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.bias_correction = json_bool(k.name, v); },
      "the biases of quantized Conv, ConvTranspose, Gemm (and a MatMul's Add) moved by the mean output error on the "
      "calibration data"));
  add(works(
      kExtra, "UseGPTQ", "bool", "false", "finetune",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_gptq = json_bool(k.name, v); },
      "GPTQ of the MatMul and Gemm weights the plan quantizes to integers, on the plan's scales"));
  add(limited(kExtra, "GPTQParams", "object",
              "{Bits 8, BlockSize 128, GroupSize -1, PercDamp 0.01, ActOrder false, PerChannel false, "
              "WeightSymmetric true, MSE false}",
              "finetune",
              "with UseGPTQ (or MatMulNBits' GPTQ); Bits, PerChannel, WeightSymmetric must agree with the "
              "plan's weights; GroupSize other than -1 and MSE true refused",
              [](QuantConfig& c, const ConfigKey&, const json& v) { apply_gptq_params(c.gptq, v); }));
  add(works(kExtra, "UseMatMulNBits", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_matmul_nbits = json_bool(k.name, v); }));
  add(limited(kExtra, "MatMulNBitsParams", "object",
              "{Algorithm DEFAULT, GroupSize 128, Symmetric true, Bits 4, AccuracyLevel 0}", "quant",
              "with UseMatMulNBits; Algorithm HQQ with Bits 4 only (its zero points are floats)",
              [](QuantConfig& c, const ConfigKey&, const json& v) { apply_matmul_nbits_params(c.matmul_nbits, v); }));
  add(works(kExtra, "Int32Bias", "bool", "by path", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.int32_bias = json_bool(k.name, v); }));
  add(works(kExtra, "NodePrecision", "object", "{}", "quant",
            [](QuantConfig& c, const ConfigKey&, const json& v) { apply_node_precision(c, v); }));
  add(works(kExtra, "EnableDualQuantNodePairs", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.dual_quant_nodes = json_bool(k.name, v); }));
  add(works(kExtra, "ForceQuantizeNoInputCheck", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              c.force_quantize_no_input_check = json_bool(k.name, v);
            }));
  add(works(kExtra, "EnableSubgraph", "bool", "true", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.enable_subgraph = json_bool(k.name, v); }));
  add(works(kExtra, "MatMulConstBOnly", "bool", "= enable_npu_transformer", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.matmul_const_b_only = json_bool(k.name, v); }));
  add(works(kExtra, "QuantizeAllOpTypes", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.quantize_all_op_types = json_bool(k.name, v); }));
  add(works(
      kExtra, "QDQKeepRemovableActivations", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.keep_removable_activations = json_bool(k.name, v); }));
  add(works(
      kExtra, "UseQDQVitisCustomOps", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_qdq_vitis_custom_ops = json_bool(k.name, v); },
      "false: with VitisQuantFormat.QDQ and QInt8 types"));
}

// The preparation of the float model: CLE (passes/cle.h), RemoveInputInit, the format conversions.
void add_preparation_options(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  add(works(
      kExtra, "ReplaceClip6Relu", "bool", "false", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.cle.replace_clip6_relu = json_bool(k.name, v); }));
  add(works(
      kExtra, "CLESteps", "integer", "1", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.cle.steps = json_integer(k.name, v); },
      "with include_cle"));
  add(works(
      kExtra, "CLETotalLayerDiffThreshold", "number", "2e-7", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        c.cle.total_layer_diff_threshold = json_number(k.name, v);
      },
      "with include_cle"));
  add(works(
      kExtra, "CLEScaleAppendBias", "bool", "true", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.cle.scale_append_bias = json_bool(k.name, v); },
      "with include_cle"));
  add(works(
      kExtra, "CLEScaleUseThreshold", "bool", "true", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.cle.scale_use_threshold = json_bool(k.name, v); },
      "with include_cle"));
  add(works(
      kExtra, "CLEWeightThreshold", "number", "0.5", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.cle.weight_threshold = json_number(k.name, v); },
      "with include_cle"));
  add(works(
      kExtra, "CLEBalanceMethod", "string", "\"max\"", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.cle.balance_method = json_string(k.name, v); },
      "with include_cle"));
  add(works(kExtra, "RemoveInputInit", "bool", "true", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_input_init = json_bool(k.name, v); }));
  add(works(kExtra, "FixShapes", "string", "unset", "passes", [](QuantConfig& c, const ConfigKey& k, const json& v) {
    c.fix_shapes = passes::parse_fix_shapes(json_string(k.name, v), "extra option " + k.name);
  }));
  // Quark's extra_options of the two arguments.
  add(works(
      kExtra, "ConvertFP16ToFP32", "bool", "false", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.convert_fp16_to_fp32 = json_bool(k.name, v); },
      "Quark's name of convert_fp16_to_fp32"));
  add(works(kExtra, "QuantizeFP16", "bool", "= the model is float16", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.quantize_fp16 = json_bool(k.name, v); }));
  add(works(kExtra, "UseFP32Scale", "bool", "= QuantizeFP16", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_fp32_scale = json_bool(k.name, v); }));
  add(works(
      kExtra, "ConvertNCHWToNHWC", "bool", "false", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.convert_nchw_to_nhwc = json_bool(k.name, v); },
      "Quark's name of convert_nchw_to_nhwc"));
  add(works(kExtra, "ConvertOpsetVersion", "integer", "unset", "passes",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              const int64_t opset = json_integer(k.name, v);
              if (opset < 1)
                throw Error("extra option " + k.name + ": expected an opset of 1 or more, got " + v.dump());
              c.convert_opset_version = opset;
            }));
}

// Quark's ExtendedQuantFormat.QDQ options and the keys of its alignment loop (align_quantize_info),
// whose Align* keys are also the IPU limitation check's position rules.
void add_alignment_options(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  add(works(kExtra, "FoldRelu", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.fold_relu = json_bool(k.name, v); }));
  add(works(
      kExtra, "AlignEltwiseQuantType", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_eltwise_quant_type = json_bool(k.name, v); }));
  add(works(kExtra, "AlignConcat", "bool", "by path", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_concat = json_bool(k.name, v); }));
  add(works(kExtra, "AlignPool", "bool", "by path", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_pool = json_bool(k.name, v); }));
  add(works(kExtra, "AlignPad", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_pad = json_bool(k.name, v); }));
  add(works(kExtra, "AlignSlice", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_slice = json_bool(k.name, v); }));
  add(works(kExtra, "AlignTranspose", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_transpose = json_bool(k.name, v); }));
  add(works(kExtra, "AlignReshape", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.align_reshape = json_bool(k.name, v); }));
  add(works(kExtra, "AdjustBiasScale", "bool", "true", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.adjust_bias_scale = json_bool(k.name, v); }));
}

// float16 and bfloat16 in ExtendedQuantFormat.QDQ: Quark's range scaling and its bfloat16
// deployment post-processes (quantize.py's apply_post_process), and how their Q/DQ are written.
void add_float_type_options(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  add(works(
      kExtra, "ActivationScaled", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.activation_scaled = json_bool(k.name, v); },
      "with ExtendedQuantFormat.QDQ and float16 or bfloat16 activations"));
  add(works(
      kExtra, "WeightScaled", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.weight_scaled = json_bool(k.name, v); },
      "with ExtendedQuantFormat.QDQ and float16 or bfloat16 weights"));
  add(works(
      kExtra, "FloatQDQAsCustomOps", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.float_qdq_as_custom_ops = json_bool(k.name, v); },
      "with ExtendedQuantFormat.QDQ and a float16 or bfloat16 type"));
  add(works(
      kExtra, "BF16QDQToCast", "bool", "true unless FloatQDQAsCustomOps", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.bf16_qdq_to_cast = json_bool(k.name, v); },
      "with ExtendedQuantFormat.QDQ and a bfloat16 type"));
  add(works(
      kExtra, "EnableVaimlBF16", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.enable_vaiml_bf16 = json_bool(k.name, v); },
      "with ExtendedQuantFormat.QDQ and a bfloat16 type"));
  add(works(
      kExtra, "BF16WithClip", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.bf16_with_clip = json_bool(k.name, v); },
      "with ExtendedQuantFormat.QDQ and bfloat16 activations"));
  add(works(
      kExtra, "BFPAttributes", "object", "Quark's op defaults", "quant",
      [](QuantConfig& c, const ConfigKey&, const json& v) {
        apply_bfp_attributes(c.bfp, v);
        c.bfp_given = true;
      },
      "with a QBFP type: bfp_method, axis, bit_width, block_size, rounding_mode, sub_block_size, "
      "sub_block_shift_bits, convert_to_bfloat_before_bfp"));
  add(works(
      kExtra, "MXAttributes", "object", "Quark's op defaults", "quant",
      [](QuantConfig& c, const ConfigKey&, const json& v) {
        apply_mx_attributes(c.mx, v);
        c.mx_given = true;
      },
      "with a QMX type: element_dtype, axis, block_size, rounding_mode; onnxptq's min_error_scale, symmetric_int8"));
  add(works(
      kExtra, "BlockQDQAsStandardOps", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.block_qdq_as_standard_ops = json_bool(k.name, v); },
      "with a QBFP or QMX type: its nodes written in standard ONNX ops"));
  add(works(
      kExtra, "RefineBlockAxis", "bool", "true with QBFP/QMX", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.refine_block_axis = json_bool(k.name, v); },
      "with a QBFP or QMX type"));
}

// vai_q_onnx 1.16's IPU limitation check (its refine.py; Quark's NPULimitationCheck and MaxLoopNum).
void add_ipu_check_options(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  const char* with_check = "with enable_dpu and a power-of-two method";
  add(works(
      kExtra, "IPULimitationCheck", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.enabled = json_bool(k.name, v); }, with_check));
  add(works(
      kExtra, "NPULimitationCheck", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.enabled = json_bool(k.name, v); },
      "Quark's name of IPULimitationCheck"));
  add(works(
      kExtra, "AdjustShiftCut", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.adjust_shift_cut = json_bool(k.name, v); },
      with_check));
  add(works(
      kExtra, "AdjustShiftBias", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.adjust_shift_bias = json_bool(k.name, v); },
      with_check));
  add(works(
      kExtra, "AdjustShiftRead", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.adjust_shift_read = json_bool(k.name, v); },
      with_check));
  add(works(
      kExtra, "AdjustShiftWrite", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.adjust_shift_write = json_bool(k.name, v); },
      with_check));
  add(works(
      kExtra, "AdjustHardSigmoid", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.adjust_hard_sigmoid = json_bool(k.name, v); },
      with_check));
  add(works(
      kExtra, "AdjustShiftSwish", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.ipu.adjust_shift_swish = json_bool(k.name, v); },
      with_check));
  add(works(
      kExtra, "MaxLoopNum", "integer", "2", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        c.ipu.max_loops = static_cast<int>(json_integer(k.name, v));
      },
      with_check));
}

// The DPU simulation's rewrites take effect with enable_dpu only; the graph rewrites run by their
// keys alone, on by default with enable_dpu (and four of them with enable_npu_transformer).
bool is_simulation(const passes::DpuPassOption& o) {
  for (const passes::PassInfo& pass : passes::dpu_simulation_passes())
    if (pass.name == std::string(o.pass)) return true;
  return false;
}

std::string rewrite_default(const passes::DpuPassOption& o) {
  if (!o.default_value) return "false";
  if (is_simulation(o)) return "true";
  return is_npu_transformer_pass_option(o.option) ? "= enable_dpu or enable_npu_transformer" : "= enable_dpu";
}

// enable_dpu's rewrites (passes/dpu.h), each behind its key, and its QDQ removal switches.
void add_dpu_options(std::vector<ConfigKey>& keys) {
  for (const passes::DpuPassOption& o : passes::dpu_pass_options())
    keys.push_back(works(
        kExtra, o.option, "bool", rewrite_default(o), "passes",
        [](QuantConfig& c, const ConfigKey& k, const json& v) { c.dpu_pass_switches[k.name] = json_bool(k.name, v); },
        is_simulation(o) ? "with enable_dpu" : ""));
  keys.push_back(works(
      kExtra, "SimulateDPU", "bool", "true", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.simulate_dpu = json_bool(k.name, v); },
      "with enable_dpu"));
  keys.push_back(works(
      kExtra, "RemoveQDQConvRelu", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_conv_relu = json_bool(k.name, v); },
      "with enable_dpu"));
  keys.push_back(works(
      kExtra, "RemoveQDQConvClip", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_conv_clip = json_bool(k.name, v); },
      "with enable_dpu"));
  keys.push_back(works(
      kExtra, "RemoveQDQConvLeakyRelu", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_conv_leaky_relu = json_bool(k.name, v); },
      "with enable_dpu"));
  keys.push_back(works(
      kExtra, "RemoveQDQConvPRelu", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_conv_prelu = json_bool(k.name, v); },
      "with enable_dpu"));
  keys.push_back(works(
      kExtra, "RemoveQDQConvGelu", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_conv_gelu = json_bool(k.name, v); },
      "with enable_dpu"));
  keys.push_back(works(
      kExtra, "RemoveQDQInstanceNorm", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_instance_norm = json_bool(k.name, v); },
      "with enable_dpu"));
}

// Keys onnxptq refuses: those given on its command line, and those of features not built.
void add_refused_options(std::vector<ConfigKey>& keys) {
  // The other keys of these families, which vai_q_onnx and Quark keep adding.
  keys.push_back(refused("Convert*", "-", kOtherKey));
  keys.push_back(refused("Adjust*", "-", kOtherKey));
  keys.push_back(refused("Align*", "-", kOtherKey));
}

bool is_family(const ConfigKey& key) { return !key.name.empty() && key.name.back() == '*'; }

void apply_key(QuantConfig& config, const ConfigKey& entry, const std::string& key, const json& value) {
  const std::string prefix = entry.scope == KeyScope::ExtraOption ? "extra option " : "";
  switch (entry.status) {
    case KeyStatus::Works:
    case KeyStatus::Limited:
      entry.apply(config, entry, value);
      return;
    case KeyStatus::Refused:
      if (is_family(entry))
        throw unsupported(prefix + key + ": onnxptq has no such key of the " + entry.name + " family (" + entry.note +
                          ")");
      throw unsupported(prefix + key + " belongs to " + entry.note + ", not built yet");
  }
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> out;
    add_config_keys(out);
    add_quantizer_options(out);
    add_calibration_options(out);
    add_preparation_options(out);
    add_alignment_options(out);
    add_float_type_options(out);
    add_post_process_keys(out);
    add_ipu_check_options(out);
    add_dpu_options(out);
    add_refused_options(out);
    return out;
  }();
  return keys;
}

const ConfigKey* find_config_key(KeyScope scope, const std::string& name) {
  for (const ConfigKey& k : config_keys())
    if (k.scope == scope && k.name == name && !is_family(k)) return &k;
  for (const ConfigKey& k : config_keys())
    if (k.scope == scope && is_family(k) && name.rfind(k.name.substr(0, k.name.size() - 1), 0) == 0) return &k;
  return nullptr;
}

const char* key_scope_name(KeyScope scope) { return scope == KeyScope::Config ? "config" : "extra_options"; }

const char* key_status_name(KeyStatus status) {
  switch (status) {
    case KeyStatus::Works:
      return "works";
    case KeyStatus::Limited:
      return "limited";
    case KeyStatus::Refused:
      return "refused";
  }
  return "?";
}

std::string key_status_text(const ConfigKey& key) {
  std::string text = key_status_name(key.status);
  if (key.status == KeyStatus::Refused && is_family(key)) return text + ": the family's other keys, not built yet";
  if (key.status == KeyStatus::Refused) return text + ": " + key.note + ", not built yet";
  return key.note.empty() ? text : text + ": " + key.note;
}

void apply_extra_option(QuantConfig& c, const std::string& key, const json& v) {
  const ConfigKey* entry = find_config_key(KeyScope::ExtraOption, key);
  if (!entry) throw Error("unknown extra option '" + key + "'");
  apply_key(c, *entry, key, v);
}

void apply_config_json(QuantConfig& c, const json& j) {
  if (!j.is_object()) throw Error("the config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    const ConfigKey* entry = find_config_key(KeyScope::Config, key);
    if (!entry) throw Error("unknown config key '" + key + "'");
    apply_key(c, *entry, key, v);
  }
}

}  // namespace onnxptq::quant
