// `onnxptq quantize`: quantize_static of the seeds on the command line.
#include "quant/quantize.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "accuracy/auto_mixprecision.h"
#include "accuracy/evaluate_command.h"
#include "accuracy/target_search.h"
#include "cli/commands.h"
#include "cli/quant_options.h"
#include "finetune/fast_finetune.h"
#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/presets.h"

namespace onnxptq::cli {
namespace {

struct QuantizeArgs {
  std::string model;
  std::string output;
  QuantOptions q;
  std::string dump_plan, report;
  bool external_data = false;
  bool quiet = false;
  // The accuracy target (accuracy/target_search.h).
  std::string evaluate_command;
  double evaluate_timeout = 0;
  bool lower_is_better = false;
  std::optional<double> max_loss, max_relative_loss, min_sqnr;
  std::optional<std::string> fallback_type;
  std::string fallback_order = "left-float";
  size_t max_trials = 100;
  double time_limit = 0;
  bool stop_at_first_pass = false;
  bool no_finetune_recipe = false;
  size_t held_out = 0;
  size_t output_index = 0;

  bool searches() const { return max_loss || max_relative_loss || min_sqnr; }
};

// --evaluate-command as a metric function (--evaluate-timeout per run).
accuracy::EvaluateFunction evaluate_function(const QuantizeArgs& a) {
  return [command = a.evaluate_command, timeout = a.evaluate_timeout](const std::filesystem::path& model,
                                                                       const std::string& trial) {
    return accuracy::run_evaluate_command(command, model, timeout, trial).value;
  };
}

accuracy::SearchOptions search_options(const QuantizeArgs& a) {
  accuracy::SearchOptions o;
  if (a.fallback_type) o.fallback_type = accuracy::parse_fallback_type(*a.fallback_type);
  if (!a.evaluate_command.empty()) {
    o.target.evaluate = evaluate_function(a);
  } else if (a.lower_is_better) {
    throw Error("--lower-is-better is about --evaluate-command's metric; the built-in one (--min-sqnr) is higher-is-better");
  }
  o.target.lower_is_better = a.lower_is_better;
  o.fallback_order = accuracy::parse_fallback_order(a.fallback_order);
  o.target.max_loss = a.max_loss;
  o.target.max_relative_loss = a.max_relative_loss;
  o.target.min_sqnr = a.min_sqnr;
  o.max_trials = a.max_trials;
  o.time_limit = a.time_limit;
  o.stop_at_first_pass = a.stop_at_first_pass;
  o.finetune_recipe = !a.no_finetune_recipe;
  o.held_out = a.held_out;
  o.output_index = a.output_index;
  o.threads = a.q.threads;
  o.float_model_path = a.model;
  return o;
}

void quantize_command(QuantizeArgs a) {
  quant::QuantConfig config = config_from(a.q);
  quant::check_config(config);  // before reading any data
  if (config.include_auto_mp && a.searches())
    throw Error("include_auto_mp and an accuracy target are two searches: choose one");
  // Quark's AutoMixprecision scores with the command when Top1AccTarget is set.
  bool auto_mp_evaluates = config.include_auto_mp && config.auto_mp.top1_acc_target;
  if (!a.evaluate_command.empty() && !a.searches() && !auto_mp_evaluates)
    throw Error("--evaluate-command belongs to the accuracy target search (give --max-loss, --max-relative-loss or "
                "--min-sqnr) or to include_auto_mp with AutoMixprecision.Top1AccTarget");
  ir::check_output_path(a.model, a.output, "--output");
  if (!a.report.empty()) ir::check_output_path(a.model, a.report, "--report");
  if (!a.dump_plan.empty()) ir::check_output_path(a.model, a.dump_plan, "--dump-plan");
  ir::Model model = ir::load_model(a.model);
  if (a.q.data.calib_data.empty() && !a.q.data.random) {
    a.q.data.random = 1;  // the seeds' RandomDataReader
    if (!a.quiet) std::cerr << "warning: " << quant::kNoCalibrationData << "\n";
  }
  std::unique_ptr<calib::DataReader> reader = open_calib_data(a.q.data, model.graph->fed_inputs());

  bool terminal = !a.quiet && isatty(STDERR_FILENO);
  std::function<void(const std::string&)> log;
  if (!a.quiet) log = [terminal](const std::string& m) { std::cerr << (terminal ? "onnxptq: " : "") << m << "\n"; };
  quant::QuantizeResult result;
  nlohmann::json search_json, auto_mp_json;
  std::string search_line;
  if (config.include_auto_mp) {
    ir::TemporaryFolder trials("onnxptq-trials");
    accuracy::EvaluateFunction evaluate;
    if (!a.evaluate_command.empty()) evaluate = evaluate_function(a);
    accuracy::AutoMixResult mixed = accuracy::auto_mixprecision(model, *reader, config, evaluate, trials.path(), log);
    auto_mp_json = accuracy::auto_mixprecision_report(mixed);
    result = std::move(mixed.result);
  } else if (a.searches()) {
    accuracy::SearchOptions options = search_options(a);
    ir::TemporaryFolder trials("onnxptq-trials");
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
    result = quant::quantize_static(model, *reader, config, log, finetune::fast_finetune_refiner(config, log));
  }

  ir::SaveOptions save;
  if (a.external_data) save.external_data = ir::SaveOptions::ExternalData::Always;
  if (!a.dump_plan.empty()) ir::write_text_file(a.dump_plan, result.plan.to_json().dump(2) + "\n");
  if (!a.report.empty()) {
    nlohmann::json report = quant::report(model, result);
    if (!search_json.is_null()) report["accuracy_target"] = search_json;
    if (!auto_mp_json.is_null()) report["auto_mixprecision"] = auto_mp_json;
    ir::write_text_file(a.report, report.dump(2) + "\n");
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
  add_quant_options(cmd, a->q);
  cmd->add_option("--dump-plan", a->dump_plan,
                  "Write the quantization plan (every tensor's type, scale, zero point) as JSON");
  cmd->add_option("--report", a->report,
                  "Write a report as JSON (nodes by op type, float nodes and why, time per phase)");
  cmd->add_flag("--use-external-data-format", a->external_data, "Write the weights to a .data file beside the model");
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
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
  cmd->add_option("--fallback-type", a->fallback_type,
                  "What sensitive nodes fall back to: float, int16 or bfloat16 (default: int16 with --enable-dpu, "
                  "else float)")
      ->group(target);
  cmd->add_option("--fallback-order", a->fallback_order,
                  "left-float (default: by the output SQNR with only that node in float) or alone (with only it "
                  "quantized)")
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
  cmd->add_flag("--no-finetune-recipe", a->no_finetune_recipe,
                "Leave out the last recipe, AdaRound fast finetune (minutes where the others take seconds)")
      ->group(target);
  cmd->add_option("--held-out", a->held_out,
                  "--min-sqnr: calibration samples held out to measure on (default: a quarter, 1 to 32)")
      ->group(target)
      ->check(non_negative());
  cmd->add_option("--output-index", a->output_index, "The model output the built-in measures compare (default 0)")
      ->group(target)
      ->check(non_negative());
  cmd->callback([a, cmd] {
    for (const char* option : {"--lower-is-better", "--fallback-type", "--fallback-order", "--max-trials",
                               "--time-limit", "--evaluate-timeout", "--stop-at-first-pass", "--no-finetune-recipe", "--held-out",
                               "--output-index"})
      if (cmd->count(option) && !a->searches())
        throw Error(std::string(option) + " belongs to the accuracy target search: give --max-loss, "
                    "--max-relative-loss or --min-sqnr");
    quantize_command(*a);
  });
}

}  // namespace onnxptq::cli
