// `onnxptq quantize`: quantize_static of the seeds on the command line.
#include "quant/quantize.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "accuracy/evaluate_command.h"
#include "accuracy/target_search.h"
#include "cli/calib_data.h"
#include "cli/commands.h"
#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/presets.h"

namespace onnxptq::cli {
namespace {

struct QuantizeArgs {
  std::string model;
  std::string output;
  std::string config;
  CalibDataArgs data;
  std::optional<std::string> quant_format, calibrate_method, activation_type, weight_type;
  bool per_channel = false, reduce_range = false;
  std::vector<std::string> op_types, nodes_to_quantize, nodes_to_exclude, input_nodes, output_nodes;
  std::vector<std::string> extra_options;  // KEY=VALUE
  std::string dump_plan, report;
  bool external_data = false;
  int threads = 0;
  std::optional<int> workers;
  bool strict = false;
  bool quiet = false;
  bool no_optimize_model = false;
  bool include_cle = false;
  bool convert_fp16_to_fp32 = false, convert_nchw_to_nhwc = false;
  bool no_include_cle = false;
  bool enable_dpu = false;
  bool enable_npu_transformer = false;
  // The accuracy target (accuracy/target_search.h).
  std::string evaluate_command;
  double evaluate_timeout = 0;
  bool lower_is_better = false;
  std::optional<double> max_loss, max_relative_loss, min_sqnr;
  std::string fallback_type = "float";
  size_t max_trials = 100;
  double time_limit = 0;
  bool stop_at_first_pass = false;
  size_t held_out = 0;
  size_t output_index = 0;

  bool searches() const { return max_loss || max_relative_loss || min_sqnr; }
};

// A folder for the search's candidate models, removed with everything in it at the end.
class TrialFolder {
 public:
  TrialFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "onnxptq-trials-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error("cannot make a folder for candidate models under " + pattern);
    path_ = pattern;
  }
  ~TrialFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

accuracy::SearchOptions search_options(const QuantizeArgs& a) {
  if (a.fallback_type != "float")
    throw Error("--fallback-type " + a.fallback_type +
                ": only float is built (falling back to int16 or bfloat16 needs per-node precision, not built yet)");
  accuracy::SearchOptions o;
  if (!a.evaluate_command.empty()) {
    std::string command = a.evaluate_command;
    double timeout = a.evaluate_timeout;
    o.target.evaluate = [command, timeout](const std::filesystem::path& model, const std::string& trial) {
      return accuracy::run_evaluate_command(command, model, timeout, trial).value;
    };
  } else if (a.lower_is_better) {
    throw Error("--lower-is-better is about --evaluate-command's metric; the built-in one (--min-sqnr) is higher-is-better");
  }
  o.target.lower_is_better = a.lower_is_better;
  o.target.max_loss = a.max_loss;
  o.target.max_relative_loss = a.max_relative_loss;
  o.target.min_sqnr = a.min_sqnr;
  o.max_trials = a.max_trials;
  o.time_limit = a.time_limit;
  o.stop_at_first_pass = a.stop_at_first_pass;
  o.held_out = a.held_out;
  o.output_index = a.output_index;
  o.threads = a.threads;
  o.float_model_path = a.model;
  return o;
}

void write_text(const std::string& path, const std::string& text) {
  ir::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

// KEY=VALUE: the value as JSON when it parses (true, 0.5, ["Conv"], {"MatMul": 1}), else a string.
std::pair<std::string, nlohmann::json> parse_extra_option(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw Error("--extra-option wants KEY=VALUE, got '" + text + "'");
  std::string value = text.substr(eq + 1);
  nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded()) j = value;
  return {text.substr(0, eq), j};
}

quant::QuantConfig config_from(const QuantizeArgs& a) {
  quant::QuantConfig c;
  c.calib.workers = 0;  // the command's default: as many as the threads allow (CalibWorkerNum can set it)
  if (quant::find_preset(a.config)) {
    quant::apply_preset(c, a.config);  // a preset's name before a file of that name
  } else if (!a.config.empty()) {
    std::ifstream in(a.config);
    if (!in)
      throw Error("--config '" + a.config +
                  "' is neither a preset nor a readable file (presets: " + quant::preset_names() + ")");
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) throw Error("config file '" + a.config + "' is not valid JSON");
    try {
      quant::apply_config_json(c, j);
    } catch (const Error& e) {
      throw Error("config file '" + a.config + "': " + e.what());
    }
  }
  if (a.quant_format) c.format = quant::parse_quant_format(*a.quant_format);
  if (a.calibrate_method) c.calibrate_method = calib::parse_method(*a.calibrate_method);
  if (a.activation_type) c.activation_type = quant::parse_quant_type(*a.activation_type);
  if (a.weight_type) c.weight_type = quant::parse_quant_type(*a.weight_type);
  c.per_channel = c.per_channel || a.per_channel;
  c.reduce_range = c.reduce_range || a.reduce_range;
  auto add = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  add(c.op_types_to_quantize, a.op_types);
  add(c.nodes_to_quantize, a.nodes_to_quantize);
  add(c.nodes_to_exclude, a.nodes_to_exclude);
  add(c.input_nodes, a.input_nodes);
  add(c.output_nodes, a.output_nodes);
  for (const std::string& e : a.extra_options) {
    auto [key, value] = parse_extra_option(e);
    quant::apply_extra_option(c, key, value);
  }
  c.calib.max_samples = a.data.calib_size;
  c.calib.threads = a.threads;
  if (a.workers) c.calib.workers = *a.workers;
  c.calib.strict = a.strict;
  if (a.no_optimize_model) c.optimize_model = false;
  if (a.include_cle) c.include_cle = true;
  if (a.convert_fp16_to_fp32) c.convert_fp16_to_fp32 = true;
  if (a.convert_nchw_to_nhwc) c.convert_nchw_to_nhwc = true;
  if (a.no_include_cle) c.include_cle = false;  // Quark's presets turn it on
  if (a.enable_dpu) c.enable_dpu = true;
  if (a.enable_npu_transformer) c.enable_npu_transformer = true;
  return c;
}

void quantize_command(QuantizeArgs a) {
  quant::QuantConfig config = config_from(a);
  quant::check_config(config);  // before reading any data
  ir::check_output_path(a.model, a.output, "--output");
  if (!a.report.empty()) ir::check_output_path(a.model, a.report, "--report");
  if (!a.dump_plan.empty()) ir::check_output_path(a.model, a.dump_plan, "--dump-plan");
  ir::Model model = ir::load_model(a.model);
  if (a.data.calib_data.empty() && !a.data.random) {
    a.data.random = 1;  // the seeds' RandomDataReader
    if (!a.quiet) std::cerr << "warning: " << quant::kNoCalibrationData << "\n";
  }
  std::unique_ptr<calib::DataReader> reader = open_calib_data(a.data, model.graph->fed_inputs());

  bool terminal = !a.quiet && isatty(STDERR_FILENO);
  std::function<void(const std::string&)> log;
  if (!a.quiet) log = [terminal](const std::string& m) { std::cerr << (terminal ? "onnxptq: " : "") << m << "\n"; };
  quant::QuantizeResult result;
  nlohmann::json search_json;
  std::string search_line;
  if (a.searches()) {
    accuracy::SearchOptions options = search_options(a);
    TrialFolder trials;
    options.work_dir = trials.path();
    accuracy::SearchResult search = accuracy::search_accuracy_target(model, *reader, config, options, log);
    search_json = accuracy::search_report(search);
    search_line = accuracy::search_summary(search) + "\n";
    if (!search.met) {
      command_status() = 1;  // the model is written, but it is not what was asked for
      if (a.quiet) std::cerr << "warning: " << search_line;
    }
    result = std::move(search.best);
  } else {
    result = quant::quantize_static(model, *reader, config, log);
  }

  ir::SaveOptions save;
  if (a.external_data) save.external_data = ir::SaveOptions::ExternalData::Always;
  if (!a.dump_plan.empty()) write_text(a.dump_plan, result.plan.to_json().dump(2) + "\n");
  if (!a.report.empty()) {
    nlohmann::json report = quant::report(model, result);
    if (!search_json.is_null()) report["accuracy_target"] = search_json;
    write_text(a.report, report.dump(2) + "\n");
  }
  ir::save_model(result.model, a.output, save);
  if (!a.quiet)
    std::cerr << quant::summary(model, result) << search_line << "quantized model written to " << a.output << "\n";
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a float ONNX model (quantize_static of vai_q_onnx / Quark)");
  cmd->add_option("MODEL", a->model, "Float ONNX model file")->required();
  cmd->add_option("--output,-o", a->output, "Quantized model file to write")->required();
  add_calib_data_options(cmd, a->data);
  cmd->add_option("--config", a->config,
                  "A preset (`onnxptq presets`) or a JSON file with quantize_static's arguments and extra_options; "
                  "the other options override it (docs/cli.md)");
  cmd->add_option(
      "--quant-format", a->quant_format,
      "QDQ (default), QOperator, VitisQuantFormat.QDQ, VitisQuantFormat.FixNeuron, ExtendedQuantFormat.QDQ");
  cmd->add_option("--calibrate-method", a->calibrate_method,
                  "MinMSE (default), NonOverflow, MinMax, Entropy, Percentile, Distribution, LayerWisePercentile");
  cmd->add_option("--activation-type", a->activation_type, "QInt8 (default), QUInt8, QInt16, QUInt16, ...");
  cmd->add_option("--weight-type", a->weight_type, "QInt8 (default), QUInt8, QInt16, QUInt16, ...");
  cmd->add_flag("--per-channel", a->per_channel, "Weights quantized per output channel");
  cmd->add_flag("--reduce-range", a->reduce_range, "7-bit weights (ORT's reduce_range)");
  cmd->add_option("--op-types-to-quantize", a->op_types, "Only these op types (comma-separated)")->delimiter(',');
  cmd->add_option("--nodes-to-quantize", a->nodes_to_quantize, "Only these nodes (comma-separated)")->delimiter(',');
  cmd->add_option("--nodes-to-exclude", a->nodes_to_exclude, "Leave these nodes in float (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--input-nodes", a->input_nodes, "Quantize from these nodes on (comma-separated)")->delimiter(',');
  cmd->add_option("--output-nodes", a->output_nodes, "Quantize up to these nodes (comma-separated)")->delimiter(',');
  cmd->add_option("--extra-option", a->extra_options, "KEY=VALUE of extra_options (repeatable; VALUE as JSON)");
  cmd->add_option("--dump-plan", a->dump_plan,
                  "Write the quantization plan (every tensor's type, scale, zero point) as JSON");
  cmd->add_option("--report", a->report,
                  "Write a report as JSON (nodes by op type, float nodes and why, time per phase)");
  cmd->add_flag("--use-external-data-format", a->external_data, "Write the weights to a .data file beside the model");
  cmd->add_option("--threads", a->threads, "Threads in all (default: every hardware thread)")->check(non_negative());
  cmd->add_option("--workers", a->workers,
                  "Calibration samples run at once (CalibWorkerNum; default 0: one a thread, up to 4)")->check(non_negative());
  cmd->add_flag("--strict", a->strict, "Fail on a calibration sample with NaN or Inf instead of skipping it");
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
  CLI::Option* include_cle = cmd->add_flag(
      "--include-cle", a->include_cle,
      "include_cle=True: cross-layer equalization of the float weights before calibration (CLE* extra options)");
  cmd->add_flag("--no-include-cle", a->no_include_cle,
                "include_cle=False, over a --config that turns it on (Quark's presets do)")
      ->excludes(include_cle);
  cmd->add_flag("--enable-dpu", a->enable_dpu,
                "enable_dpu=True: the NPU path (power-of-two QDQ; graph rewrites, QDQ removal before fused "
                "activations, SimulateDPU; their extra options)");
  cmd->add_flag("--enable-npu-transformer", a->enable_npu_transformer,
                "enable_npu_transformer=True (Quark): Gemm and MatMul by default, MatMulConstBOnly, and the "
                "ConvertBNToConv/ConvertReduceMeanToGlobalAvgPool/SplitLargeKernelPool/ConvertSplitToSlice rewrites");
  cmd->add_flag("--convert-fp16-to-fp32", a->convert_fp16_to_fp32,
                "convert_fp16_to_fp32=True: a float16 model made float32 first (float16 samples are widened)");
  cmd->add_flag("--convert-nchw-to-nhwc", a->convert_nchw_to_nhwc,
                "convert_nchw_to_nhwc=True: 4-D NCHW image inputs declared NHWC first (NCHW samples are transposed)");
  cmd->add_flag("--no-optimize-model", a->no_optimize_model,
                "optimize_model=False: quantize the model as given, without `onnxptq preprocess`'s passes");
  const char* target = "Accuracy target";
  cmd->add_option("--evaluate-command", a->evaluate_command,
                  "Scores a model: CMD with {model} replaced by a candidate's path, printing the metric as its last "
                  "line (docs/accuracy.md)")
      ->group(target);
  cmd->add_flag("--lower-is-better", a->lower_is_better, "The evaluate command's metric is an error (CER, loss)")
      ->group(target);
  CLI::Option* max_loss =
      cmd->add_option("--max-loss", a->max_loss, "Search for the cheapest model whose metric is at most this much "
                                                 "worse than the float model's (needs --evaluate-command)")
          ->group(target);
  CLI::Option* max_relative_loss =
      cmd->add_option("--max-relative-loss", a->max_relative_loss,
                      "The same as a fraction of the float model's metric (0.01: 1 %)")
          ->group(target)
          ->excludes(max_loss);
  cmd->add_option("--min-sqnr", a->min_sqnr,
                  "Search with the built-in metric: the output's SQNR (dB) on calibration samples held out")
      ->group(target)
      ->excludes(max_loss)
      ->excludes(max_relative_loss);
  cmd->add_option("--fallback-type", a->fallback_type, "What sensitive nodes fall back to: float (default)")
      ->group(target);
  cmd->add_option("--max-trials", a->max_trials, "Quantized models scored at most (default 100; 0: no limit)")
      ->group(target)
      ->check(non_negative());
  cmd->add_option("--time-limit", a->time_limit, "Seconds the search may take (default 0: no limit)")
      ->group(target)
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--evaluate-timeout", a->evaluate_timeout,
                  "Seconds one evaluate command may run before it is killed (default 0: no limit)")
      ->group(target)
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--stop-at-first-pass", a->stop_at_first_pass, "End with the first model that meets the target")
      ->group(target);
  cmd->add_option("--held-out", a->held_out,
                  "--min-sqnr: calibration samples held out to measure on (default: a quarter, 1 to 32)")
      ->group(target)
      ->check(non_negative());
  cmd->add_option("--output-index", a->output_index, "The model output the built-in measures compare (default 0)")
      ->group(target)
      ->check(non_negative());
  cmd->callback([a, cmd] {
    for (const char* option : {"--evaluate-command", "--lower-is-better", "--fallback-type", "--max-trials",
                               "--time-limit", "--evaluate-timeout", "--stop-at-first-pass", "--held-out",
                               "--output-index"})
      if (cmd->count(option) && !a->searches())
        throw Error(std::string(option) + " belongs to the accuracy target search: give --max-loss, "
                    "--max-relative-loss or --min-sqnr");
    quantize_command(*a);
  });
}

}  // namespace onnxptq::cli
