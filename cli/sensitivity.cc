// `onnxptq sensitivity`: how much each quantized node costs the model's output (accuracy/sensitivity.h).
#include "accuracy/sensitivity.h"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/quant_options.h"
#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/quantize.h"

namespace onnxptq::cli {
namespace {

struct SensitivityArgs {
  std::string model;
  QuantOptions q;
  size_t samples = 8;
  size_t output_index = 0;
  bool left_float = false;
  std::string json, csv, html;
  size_t top = 20;
  bool quiet = false;
};

void write_text(const std::string& path, const std::string& text) {
  ir::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

std::string db(double v) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << v;
  return out.str();
}

void sensitivity_command(SensitivityArgs a) {
  quant::QuantConfig config = config_from(a.q);
  quant::check_config(config);
  for (const auto& [path, option] : {std::pair{a.json, "--json"}, {a.csv, "--csv"}, {a.html, "--html"}})
    if (!path.empty()) ir::check_output_path(a.model, path, option);
  if (a.samples == 0) throw Error("--samples must be at least 1");
  ir::Model model = ir::load_model(a.model);
  CalibDataArgs data = a.q.data;
  if (data.calib_data.empty() && !data.random) {
    data.random = 1;
    if (!a.quiet) std::cerr << "warning: " << quant::kNoCalibrationData << "\n";
  }
  std::unique_ptr<calib::DataReader> reader = open_calib_data(data, model.graph->fed_inputs());
  std::function<void(const std::string&)> log;
  if (!a.quiet) log = [](const std::string& m) { std::cerr << m << "\n"; };

  // The configuration's plan and ranges, once; every measure simulates a part of it.
  std::optional<ir::Model> prepared = quant::prepare_float_model(model, *reader, config, log);
  calib::CalibrationResult ranges;
  quant::QuantizeResult q;
  if (prepared) q.prepared = ir::clone_model(*prepared);
  reader->rewind();
  quant::quantize_prepared(q, model, *reader, config, log, &ranges, /*with_export=*/false);
  const ir::Model& float_prepared = prepared ? *prepared : model;
  reader->rewind();
  std::unique_ptr<calib::DataReader> adapted = quant::adapted_reader(*reader, float_prepared, config);
  accuracy::ReferenceOutputs reference = accuracy::reference_outputs(
      float_prepared, adapted ? *adapted : *reader, a.output_index, a.samples, a.q.threads);
  const ir::Model& simulated = q.prepared ? *q.prepared : model;
  accuracy::OutputMetrics whole = accuracy::simulated_error(simulated, q.plan, config, reference, a.q.threads);
  accuracy::LeftFloatPlan left_float;
  if (a.left_float) left_float = accuracy::left_float_plans(model, prepared, *reader, config, ranges);
  if (log)
    log("measuring " + std::to_string(q.plan.quantized_nodes.size()) + " quantized nodes on " +
        std::to_string(reference.feeds.size()) + " samples");
  std::vector<accuracy::NodeSensitivity> nodes =
      accuracy::analyze_nodes(simulated, q.plan, config, reference, a.q.threads, /*split=*/true, left_float);

  if (!a.json.empty()) write_text(a.json, accuracy::sensitivity_json(nodes, whole, reference).dump(2) + "\n");
  if (!a.csv.empty()) write_text(a.csv, accuracy::sensitivity_csv(nodes));
  if (!a.html.empty())
    write_text(a.html, accuracy::sensitivity_html(nodes, whole, a.model + " (" + (a.q.config.empty() ? "options" : a.q.config) + ")"));
  if (a.quiet) return;
  size_t shown = a.top == 0 ? nodes.size() : std::min(a.top, nodes.size());
  size_t width = 4, op_width = 2;
  for (size_t i = 0; i < shown; ++i) {
    width = std::max(width, nodes[i].node.size());
    op_width = std::max(op_width, nodes[i].op_type.size());
  }
  std::cout << "whole model quantized: output SQNR " << db(whole.sqnr_db) << " dB\n";
  std::cout << std::left << std::setw(static_cast<int>(width + 2)) << "node"
            << std::setw(static_cast<int>(op_width)) << "op" << "  alone dB  weight dB  activ. dB"
            << (a.left_float ? "  all-but dB" : "") << "\n";
  for (size_t i = 0; i < shown; ++i) {
    const accuracy::NodeSensitivity& s = nodes[i];
    std::ostringstream line;
    line << std::left << std::setw(static_cast<int>(width + 2)) << s.node << std::setw(static_cast<int>(op_width)) << s.op_type
         << std::right << std::setw(10)
         << db(s.alone.sqnr_db) << std::setw(11) << db(s.weight.sqnr_db) << std::setw(11) << db(s.activations.sqnr_db);
    if (a.left_float) line << std::setw(12) << (s.left_float ? db(s.left_float->sqnr_db) : "");
    std::cout << line.str() << "\n";
  }
}

}  // namespace

void add_sensitivity_command(CLI::App& app) {
  auto a = std::make_shared<SensitivityArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sensitivity", "How much each quantized node costs the model's output: each alone, its weight, its activations");
  cmd->add_option("MODEL", a->model, "Float ONNX model file")->required();
  add_quant_options(cmd, a->q);
  cmd->add_option("--samples", a->samples, "Calibration samples the output error is measured on (default 8)")
      ->check(non_negative());
  cmd->add_option("--output-index", a->output_index, "The model output compared (default 0)")->check(non_negative());
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
