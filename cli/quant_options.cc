#include "cli/quant_options.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"

namespace onnxptq::cli {

namespace {

// KEY=VALUE: the value as JSON when it parses (true, 0.5, ["Conv"], {"MatMul": 1}), else a string.
std::pair<std::string, nlohmann::json> parse_extra_option(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw Error("--extra-option wants KEY=VALUE, got '" + text + "'");
  std::string value = text.substr(eq + 1);
  nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded()) j = value;
  return {text.substr(0, eq), j};
}

// "a,b" -> {"a", "b"}; empty names dropped.
std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  for (size_t start = 0; start <= text.size();) {
    size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) names.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

}  // namespace

void add_quant_options(CLI::App* cmd, QuantOptions& o) {
  cmd->footer(
      "Config keys (--config FILE) and extra options (--extra-option), with their types, defaults and status: "
      "onnxptq options [KEY]");
  add_calib_data_options(cmd, o.data);
  cmd->add_option("--config", o.config,
                  "A preset (`onnxptq presets`) or a JSON file with quantize_static's arguments and extra_options; "
                  "the other options override it (docs/cli.md)");
  cmd->add_option(
      "--quant-format", o.quant_format,
      "QDQ (default), QOperator, VitisQuantFormat.QDQ, VitisQuantFormat.FixNeuron, ExtendedQuantFormat.QDQ");
  cmd->add_option("--calibrate-method", o.calibrate_method,
                  "MinMSE (default), NonOverflow, MinMax, Entropy, Percentile, Distribution, LayerWisePercentile");
  cmd->add_option("--activation-type", o.activation_type, "QInt8 (default), QUInt8, QInt16, QUInt16, ...");
  cmd->add_option("--weight-type", o.weight_type, "QInt8 (default), QUInt8, QInt16, QUInt16, ...");
  cmd->add_flag("--per-channel", o.per_channel, "Weights quantized per output channel");
  cmd->add_flag("--reduce-range", o.reduce_range, "7-bit weights (ORT's reduce_range)");
  cmd->add_option("--op-types-to-quantize", o.op_types, "Only these op types (comma-separated)")->delimiter(',');
  cmd->add_option("--nodes-to-quantize", o.nodes_to_quantize, "Only these nodes (comma-separated)")->delimiter(',');
  cmd->add_option("--nodes-to-exclude", o.nodes_to_exclude,
                  "Leave these nodes in float (comma-separated names, or Quark's patterns: ^ ... .*)")
      ->delimiter(',');
  cmd->add_option("--subgraphs-to-exclude", o.subgraphs_to_exclude,
                  "START,...:END,... leaves in float every node from the start nodes to the end nodes (Quark's "
                  "subgraphs_to_exclude; repeatable)");
  cmd->add_option("--extra-op-types-to-quantize", o.extra_op_types,
                  "Quantize these op types too (comma-separated; Quark's extra_op_types_to_quantize)")
      ->delimiter(',');
  cmd->add_option("--input-nodes", o.input_nodes, "Quantize from these nodes on (comma-separated)")->delimiter(',');
  cmd->add_option("--output-nodes", o.output_nodes, "Quantize up to these nodes (comma-separated)")->delimiter(',');
  cmd->add_option("--extra-option", o.extra_options, "KEY=VALUE of extra_options (repeatable; VALUE as JSON)");
  cmd->add_option("--node-precision", o.node_precision,
                  "NODE=TYPE or NODE=ACTIVATION,WEIGHT: that node's precision (int8, uint8, int16, uint16, "
                  "bfloat16, float16, bfp, mx, float; repeatable; extra option NodePrecision)");
  cmd->add_option("--threads", o.threads, "Threads in all (default: every hardware thread)")->check(non_negative());
  cmd->add_option("--workers", o.workers,
                  "Calibration samples run at once (CalibWorkerNum; default 0: one a thread, up to 4)")
      ->check(non_negative());
  cmd->add_flag("--strict", o.strict, "Fail on a calibration sample with NaN or Inf instead of skipping it");
  CLI::Option* include_cle = cmd->add_flag(
      "--include-cle", o.include_cle,
      "include_cle=True: cross-layer equalization of the float weights before calibration (CLE* extra options)");
  cmd->add_flag("--no-include-cle", o.no_include_cle,
                "include_cle=False, over a --config that turns it on (Quark's presets do)")
      ->excludes(include_cle);
  cmd->add_flag("--include-rotation", o.include_rotation,
                "include_rotation=True: QuaRot's R1 rotation of the nodes the extra option RConfigPath names "
                "(RMatrixDim, UseRandomHad)");
  cmd->add_flag("--include-sq", o.include_sq,
                "include_sq=True: SmoothQuant of the MatMuls with constant weights before calibration (SmoothAlpha, "
                "SmoothAlphaRange, SmoothFolding extra options)");
  CLI::Option* include_fast_ft = cmd->add_flag(
      "--include-fast-ft", o.include_fast_ft,
      "include_fast_ft=True: fast finetune (AdaRound or AdaQuant) of the quantized weights, with the FastFinetune "
      "extra option's settings");
  cmd->add_flag("--no-include-fast-ft", o.no_include_fast_ft,
                "include_fast_ft=False, over a --config that turns it on (the _ADAROUND, _ADAQUANT, *_ACCURATE "
                "presets), its FastFinetune settings dropped")
      ->excludes(include_fast_ft);
  cmd->add_flag("--dynamic", o.dynamic,
                "use_dynamic_quant=True: ONNX Runtime's quantize_dynamic (MatMul, Gemm, Conv to MatMulInteger / "
                "ConvInteger, activations by DynamicQuantizeLinear at run time; no calibration data read)");
  cmd->add_flag("--enable-dpu", o.enable_dpu,
                "enable_dpu=True: the NPU path (power-of-two QDQ; graph rewrites, QDQ removal before fused "
                "activations, SimulateDPU; their extra options)");
  cmd->add_flag("--enable-npu-transformer", o.enable_npu_transformer,
                "enable_npu_transformer=True (Quark): Gemm and MatMul by default, MatMulConstBOnly, and the "
                "ConvertBNToConv/ConvertReduceMeanToGlobalAvgPool/SplitLargeKernelPool/ConvertSplitToSlice rewrites");
  cmd->add_flag("--convert-fp16-to-fp32", o.convert_fp16_to_fp32,
                "convert_fp16_to_fp32=True: a float16 model made float32 first (float16 samples are widened)");
  cmd->add_flag("--convert-nchw-to-nhwc", o.convert_nchw_to_nhwc,
                "convert_nchw_to_nhwc=True: 4-D NCHW image inputs declared NHWC first (NCHW samples are transposed)");
  cmd->add_flag("--no-optimize-model", o.no_optimize_model,
                "optimize_model=False: quantize the model as given, without `onnxptq preprocess`'s passes");
  cmd->add_flag("--standard-ops", o.standard_ops,
                "BlockQDQAsStandardOps=True: QBFP/QMX fake quantization written in standard ONNX ops (no custom-op "
                "library needed)");
}

Config config_of(const std::string& preset_or_file) {
  Config c;
  c.calib_workers(0);  // the command's default: as many as the threads allow (CalibWorkerNum can set it)
  if (Config::has_preset(preset_or_file)) {
    c.apply_preset(preset_or_file);  // a preset's name before a file of that name
  } else if (!preset_or_file.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(preset_or_file, ec)) {
      std::string names;
      for (const PresetInfo& p : Config::presets()) names += (names.empty() ? "" : ", ") + p.name;
      throw Error("--config '" + preset_or_file + "' is neither a preset nor a readable file (presets: " + names + ")");
    }
    const std::string text = read_text_file(preset_or_file, "--config '" + preset_or_file + "'");
    if (nlohmann::json::parse(text, nullptr, false).is_discarded())
      throw Error("config file '" + preset_or_file + "' is not valid JSON");
    try {
      c.apply_json(text);
    } catch (const Error& e) {
      throw Error("config file '" + preset_or_file + "': " + e.what(), e.kind());
    }
  }
  return c;
}

Config config_from(const QuantOptions& a) {
  Config c = config_of(a.config);
  auto text = [](const std::string& s) { return nlohmann::json(s).dump(); };
  if (a.quant_format) c.set("quant_format", text(*a.quant_format));
  if (a.calibrate_method) c.set("calibrate_method", text(*a.calibrate_method));
  if (a.activation_type) c.set("activation_type", text(*a.activation_type));
  if (a.weight_type) c.set("weight_type", text(*a.weight_type));
  if (a.per_channel) c.set("per_channel", "true");
  if (a.reduce_range) c.set("reduce_range", "true");
  c.append("op_types_to_quantize", a.op_types);
  c.append("nodes_to_quantize", a.nodes_to_quantize);
  c.append("nodes_to_exclude", a.nodes_to_exclude);
  c.append("input_nodes", a.input_nodes);
  c.append("output_nodes", a.output_nodes);
  c.append("extra_op_types_to_quantize", a.extra_op_types);
  for (const std::string& pair : a.subgraphs_to_exclude) {
    size_t colon = pair.find(':');
    if (colon == std::string::npos || pair.find(':', colon + 1) != std::string::npos)
      throw Error("--subgraphs-to-exclude '" + pair +
                  "': expected START,...:END,... (names with ':' go in --config's subgraphs_to_exclude)");
    c.append_subgraph_to_exclude(split_names(pair.substr(0, colon)), split_names(pair.substr(colon + 1)));
  }
  for (const std::string& e : a.extra_options) {
    auto [key, value] = parse_extra_option(e);
    c.set_extra_option(key, value.dump());
  }
  for (const std::string& e : a.node_precision) {
    size_t eq = e.rfind('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--node-precision '" + e + "': expected NODE=TYPE or NODE=ACTIVATION,WEIGHT");
    try {
      c.set_extra_option("NodePrecision", nlohmann::json{{e.substr(0, eq), e.substr(eq + 1)}}.dump());
    } catch (const Error& err) {
      throw Error("--node-precision '" + e + "': " + err.what(), err.kind());
    }
  }
  c.calib_size(a.data.calib_size);
  c.threads(a.threads);
  if (a.workers) c.calib_workers(*a.workers);
  c.strict(a.strict);
  if (a.no_optimize_model) c.set("optimize_model", "false");
  if (a.include_cle) c.set("include_cle", "true");
  if (a.include_sq) c.set("include_sq", "true");
  if (a.include_rotation) c.set("include_rotation", "true");
  if (a.convert_fp16_to_fp32) c.set("convert_fp16_to_fp32", "true");
  if (a.convert_nchw_to_nhwc) c.set("convert_nchw_to_nhwc", "true");
  if (a.no_include_cle) c.set("include_cle", "false");  // Quark's presets turn it on
  if (a.include_fast_ft) c.set("include_fast_ft", "true");
  if (a.no_include_fast_ft) c.disable_fast_finetune();
  if (a.enable_dpu) c.set("enable_dpu", "true");
  if (a.dynamic) c.set("use_dynamic_quant", "true");
  if (a.enable_npu_transformer) c.set("enable_npu_transformer", "true");
  if (a.standard_ops) c.set_extra_option("BlockQDQAsStandardOps", "true");
  return c;
}

}  // namespace onnxptq::cli
