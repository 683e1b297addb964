// `onnxptq sensitivity`: how much each quantized node costs the model's output (onnxptq/sensitivity.h).
#include "onnxptq/sensitivity.h"

#include <unistd.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/mpi_ranks.h"
#include "cli/progress.h"
#include "cli/quant_options.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"
#include "onnxptq/quantize.h"

namespace onnxptq::cli {
namespace {

struct SensitivityArgs {
  std::string model;
  QuantOptions q;
  size_t samples = 8;
  size_t output_index = 0;
  bool split = false;
  bool left_float = false;
  std::string json, csv, html;
  size_t top = 20;
  bool quiet = false;
};

std::string db(const std::optional<OutputMetrics>& m) {
  if (!m) return "";
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << m->sqnr_db;
  return out.str();
}

void sensitivity_command(SensitivityArgs a) {
  const bool writer = command_rank() == 0;  // under mpirun: the other ranks compute the same, and say nothing
  if (!writer) a.quiet = true;
  Config config = config_from(a.q);
  config.check();
  for (const auto& [path, option] : {std::pair{a.json, "--json"}, {a.csv, "--csv"}, {a.html, "--html"}})
    if (!path.empty()) check_output_path(a.model, path, option);
  if (a.samples == 0) throw Error("--samples must be at least 1");
  Model model = Model::load(a.model);
  std::unique_ptr<DataReader> reader = open_quantize_data(a.q.data, model, config, a.quiet);
  SensitivityOptions options;
  options.samples = a.samples;
  options.output_index = a.output_index;
  options.split = a.split;
  options.left_float = a.left_float;
  options.threads = a.q.threads;
  options.ranks = command_ranks();
  SensitivityReport report;
  {
    ProgressDisplay display(a.quiet, isatty(STDERR_FILENO));  // done before the table is printed
    std::function<void(const std::string&)> log;
    if (!a.quiet) log = [&display](const std::string& m) { display.line(m); };
    options.progress = [&display](const Progress& p) { display.update(p); };
    report = analyze_sensitivity(model, *reader, config, options, log);
  }
  if (!writer) return;
  const std::vector<NodeSensitivity>& nodes = report.nodes;
  if (!a.json.empty()) write_text_file(a.json, report.to_json() + "\n");
  if (!a.csv.empty()) write_text_file(a.csv, report.to_csv());
  if (!a.html.empty())
    write_text_file(a.html, report.to_html(a.model + " (" + (a.q.config.empty() ? "options" : a.q.config) + ")"));
  if (a.quiet) return;
  size_t shown = a.top == 0 ? nodes.size() : std::min(a.top, nodes.size());
  size_t width = 4, op_width = 2;
  for (size_t i = 0; i < shown; ++i) {
    width = std::max(width, nodes[i].node.size());
    op_width = std::max(op_width, nodes[i].op_type.size());
  }
  std::cout << "whole model quantized: output SQNR " << db(report.whole_model) << " dB\n";
  std::cout << std::left << std::setw(static_cast<int>(width + 2)) << "node" << std::setw(static_cast<int>(op_width))
            << "op"
            << "  alone dB" << (a.split ? "  weight dB  activ. dB" : "") << (a.left_float ? "  all-but dB" : "")
            << "\n";
  for (size_t i = 0; i < shown; ++i) {
    const NodeSensitivity& s = nodes[i];
    std::ostringstream line;
    line << std::left << std::setw(static_cast<int>(width + 2)) << s.node << std::setw(static_cast<int>(op_width))
         << s.op_type << std::right << std::setw(10) << db(s.alone);
    if (a.split) line << std::setw(11) << db(s.weight) << std::setw(11) << db(s.activations);
    if (a.left_float) line << std::setw(12) << db(s.left_float);
    std::cout << line.str() << "\n";
  }
}

}  // namespace

void add_sensitivity_command(CLI::App& app) {
  auto a = std::make_shared<SensitivityArgs>();
  CLI::App* cmd =
      app.add_subcommand("sensitivity",
                         "How much each quantized node costs the model's output: each node alone quantized, and on "
                         "request its weight and activations apart or the model with it left float");
  cmd->add_option("MODEL", a->model, "Float ONNX model file")->required();
  add_quant_options(cmd, a->q);
  cmd->add_option("--samples", a->samples, "Calibration samples the output error is measured on (default 8)")
      ->check(non_negative());
  cmd->add_option("--output-index", a->output_index, "The model output compared (default 0)")->check(non_negative());
  cmd->add_flag(
      "--split", a->split,
      "Also measure each node's weight alone and its activations alone (two more plans for each node with a weight)");
  cmd->add_flag("--left-float", a->left_float,
                "Also measure the whole model with each node left in float (one plan per node)");
  cmd->add_option("--json", a->json, "Write every measure as JSON");
  cmd->add_option("--csv", a->csv, "Write every measure as CSV");
  cmd->add_option("--html", a->html, "Write a page with a chart (inline SVG) and the table");
  cmd->add_option("--top", a->top, "Nodes printed, worst first (default 20; 0: all)")->check(non_negative());
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
  cmd->callback([a] { sensitivity_command(*a); });
}

}  // namespace onnxptq::cli
