// `onnxptq quantize`: quantize_static of the seeds on the command line.
#include "onnxptq/quantize.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/mpi_ranks.h"
#include "cli/progress.h"
#include "cli/quant_options.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"

namespace onnxptq::cli {
namespace {

struct QuantizeArgs {
  std::string model;
  std::string output;
  QuantOptions q;
  std::string dump_plan, report;
  std::string ranges;  // `onnxptq calibrate -o FILE`'s JSON
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

AccuracyTarget accuracy_target(const QuantizeArgs& a) {
  if (a.evaluate_command.empty() && a.lower_is_better)
    throw Error(
        "--lower-is-better is about --evaluate-command's metric; the built-in one (--min-sqnr) is higher-is-better");
  AccuracyTarget t;
  t.lower_is_better = a.lower_is_better;
  t.max_loss = a.max_loss;
  t.max_relative_loss = a.max_relative_loss;
  t.min_sqnr = a.min_sqnr;
  if (a.fallback_type) t.fallback_type = *a.fallback_type;
  t.fallback_order = a.fallback_order;
  t.max_trials = a.max_trials;
  t.time_limit = a.time_limit;
  t.stop_at_first_pass = a.stop_at_first_pass;
  t.finetune_recipe = !a.no_finetune_recipe;
  t.held_out = a.held_out;
  t.output_index = a.output_index;
  t.threads = a.q.threads;
  return t;
}

void quantize_command(QuantizeArgs a) {
  const bool writer = command_rank() == 0;  // under mpirun: the other ranks compute the same, and say nothing
  if (!writer) a.quiet = true;
  Config config = config_from(a.q);
  config.check();  // before reading any data
  check_output_path(a.model, a.output, "--output");
  if (!a.report.empty()) check_output_path(a.model, a.report, "--report");
  if (!a.dump_plan.empty()) check_output_path(a.model, a.dump_plan, "--dump-plan");
  QuantizeOptions options;
  if (a.searches()) options.target = accuracy_target(a);
  if (!a.evaluate_command.empty()) options.evaluate = command_evaluator(a.evaluate_command, a.evaluate_timeout);
  options.model_path = a.model;
  options.ranks = command_ranks();
  if (!a.ranges.empty()) {
    options.ranges_source = "--ranges '" + a.ranges + "'";
    const std::string text = read_text_file(a.ranges, options.ranges_source);
    try {
      options.ranges = Calibration::from_json(text);
    } catch (const Error& e) {
      throw Error(options.ranges_source + ": " + e.what(), e.kind());
    }
  }
  Model model = Model::load(a.model);
  // With --ranges nothing is calibrated: no warning about calibrating on a random sample.
  std::unique_ptr<DataReader> reader = open_quantize_data(a.q.data, model, config, a.quiet || options.ranges);

  QuantizeOutcome result = [&] {
    ProgressDisplay display(a.quiet, isatty(STDERR_FILENO));
    if (!a.quiet) {
      options.log = [&display](const std::string& m) { display.line(m); };
      options.progress = [&display](const Progress& p) { display.update(p); };
    }
    return quantize(model, *reader, config, options);
  }();
  if (!writer) return;
  std::string search_line = result.search_summary.empty() ? "" : result.search_summary + "\n";
  if (!result.target_met) {
    command_status() = 1;  // the model is written, but it is not what was asked for
    if (a.quiet) std::cerr << "warning: " << search_line;
  }
  if (!a.dump_plan.empty()) write_text_file(a.dump_plan, result.plan_json + "\n");
  if (!a.report.empty()) write_text_file(a.report, result.report_json + "\n");
  result.model.save(a.output, a.external_data);
  if (!a.quiet) std::cerr << result.summary << search_line << "quantized model written to " << a.output << "\n";
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
  cmd->add_option("--ranges", a->ranges,
                  "Use the ranges `onnxptq calibrate -o FILE` wrote instead of calibrating (same model, "
                  "calibrate method and activation type; data is then read only for shapes and fast finetune)");
  cmd->add_flag("--use-external-data-format", a->external_data, "Write the weights to a .data file beside the model");
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
  const char* target = "Accuracy target";
  cmd->add_option("--evaluate-command", a->evaluate_command,
                  "Scores a model: CMD with {model} replaced by a candidate's path, printing the metric as its last "
                  "line (docs/accuracy.md)")
      ->group(target);
  cmd->add_flag("--lower-is-better", a->lower_is_better, "The evaluate command's metric is an error (CER, loss)")
      ->group(target);
  CLI::Option* max_loss = cmd->add_option("--max-loss", a->max_loss,
                                          "Search for the cheapest model whose metric is at most this much "
                                          "worse than the float model's (needs --evaluate-command)")
                              ->group(target);
  CLI::Option* max_relative_loss = cmd->add_option("--max-relative-loss", a->max_relative_loss,
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
                "Leave out the last recipe, fast finetune (AdaRound; AdaQuant for float16/bfloat16 and "
                "block-format weights; minutes where the others take seconds)")
      ->group(target);
  cmd->add_option("--held-out", a->held_out,
                  "--min-sqnr: calibration samples held out to measure on (default: a quarter, 1 to 32)")
      ->group(target)
      ->check(non_negative());
  cmd->add_option("--output-index", a->output_index, "The model output the built-in measures compare (default 0)")
      ->group(target)
      ->check(non_negative());
  cmd->callback([a, cmd] {
    for (const char* option :
         {"--lower-is-better", "--fallback-type", "--fallback-order", "--max-trials", "--time-limit",
          "--evaluate-timeout", "--stop-at-first-pass", "--no-finetune-recipe", "--held-out", "--output-index"})
      if (cmd->count(option) && !a->searches())
        throw Error(std::string(option) +
                    " belongs to the accuracy target search: give --max-loss, "
                    "--max-relative-loss or --min-sqnr");
    quantize_command(*a);
  });
}

}  // namespace onnxptq::cli
