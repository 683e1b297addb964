// `onnxptq calibrate`: the range of every tensor the quantizer would calibrate, as JSON.
#include "onnxptq/calibrate.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/calib_data.h"
#include "cli/commands.h"
#include "cli/mpi_ranks.h"
#include "cli/progress.h"
#include "cli/quant_options.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"

namespace onnxptq::cli {
namespace {

struct CalibrateArgs {
  std::string model;
  std::string output;
  std::string config;           // --config: a preset or a JSON file, the options below over it
  std::set<std::string> given;  // the options given on the command line
  CalibDataArgs data;
  std::string method = "MinMax";
  std::string symmetric;  // "", "true", "false"
  bool moving_average = false;
  double averaging_constant = 0.01;
  size_t num_bins = 0;  // the method's default
  size_t num_quantized_bins = 128;
  double percentile = 99.999;
  std::vector<double> percentile_candidates = {99.99, 99.999, 99.99999};
  std::string lwp_metric = "mae";
  std::string scenario = "same";
  std::string minmse_mode = "All";
  std::string activation_type = "int8";
  std::vector<std::string> op_types;
  int threads = 0;
  int workers = 0;  // as many as the threads allow
  bool strict = false;
  bool quiet = false;
  bool no_optimize_model = false;
  std::string save_stats;  // --save-stats: a shard file instead of ranges
  std::string shard;       // --shard i/N
  std::string first_pass;  // --first-pass: merge-stats' merged first pass, for a shard's second
};

// --shard's "i/N": shard i (from 0) of N.
std::pair<size_t, size_t> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  auto digits = [](const std::string& t) {
    return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
  };
  if (slash == std::string::npos || !digits(text.substr(0, slash)) || !digits(text.substr(slash + 1)) ||
      text.size() > 40)
    throw Error("--shard must be i/N (shard i of N, from 0), got '" + text + "'");
  const size_t i = std::stoull(text.substr(0, slash)), n = std::stoull(text.substr(slash + 1));
  if (n == 0 || i >= n)
    throw Error("--shard " + text + ": shards are numbered 0 to N-1" +
                (n ? " (0 to " + std::to_string(n - 1) + ")" : ""));
  return {i, n};
}

// --activation-type's names for the config's QuantType names.
const char* activation_type_key(const std::string& t) {
  if (t == "int8") return "QInt8";
  if (t == "uint8") return "QUInt8";
  if (t == "int16") return "QInt16";
  if (t == "uint16") return "QUInt16";
  throw Error("--activation-type must be int8, uint8, int16 or uint16, got '" + t + "'");
}

std::string json_text(const nlohmann::json& value) { return value.dump(); }

void calibrate_command(CalibrateArgs a) {
  if (a.save_stats.empty() != a.shard.empty())
    throw Error(a.shard.empty() ? "--save-stats writes one shard's statistics: it needs --shard i/N"
                                : "--shard runs one share of the samples: it needs --save-stats FILE to keep them");
  if (!a.save_stats.empty() && !a.output.empty())
    throw Error("--save-stats and --output: a shard has statistics, not ranges (merge-stats writes those)");
  if (!a.save_stats.empty() && command_ranks())
    throw Error(
        "--shard and --save-stats run one share apart; under mpirun the ranks merge their statistics "
        "themselves: drop them, or run without mpirun");
  if (!a.first_pass.empty() && a.shard.empty())
    throw Error("--first-pass goes with --shard i/N and --save-stats: a shard's second pass");
  const bool sharded = !a.shard.empty();
  const auto [shard_index, shard_count] = sharded ? parse_shard(a.shard) : std::pair<size_t, size_t>{0, 0};
  if (!a.save_stats.empty()) check_output_path(a.model, a.save_stats, "--save-stats");
  if (!a.output.empty() && a.output != "-") check_output_path(a.model, a.output, "--output");
  const bool writer = command_rank() == 0;  // the other ranks compute the same, and say nothing
  if (!writer) a.quiet = true;
  // Without --config every option below sets its key (with its default when not given); with it,
  // only those given override the preset's or file's.
  Config config = config_of(a.config);
  auto use = [&](const std::string& option) { return a.config.empty() || a.given.count(option) > 0; };
  if (use("--method")) config.set("calibrate_method", json_text(a.method));
  if (a.symmetric == "true" || a.symmetric == "false") {
    config.set_extra_option("CalibTensorRangeSymmetric", a.symmetric);
    config.set_extra_option("ActivationSymmetric", a.symmetric);
  } else if (!a.symmetric.empty()) {
    throw Error("--symmetric must be true or false, got '" + a.symmetric + "'");
  }
  if (use("--moving-average")) config.set_extra_option("CalibMovingAverage", json_text(a.moving_average));
  if (use("--averaging-constant"))
    config.set_extra_option("CalibMovingAverageConstant", json_text(a.averaging_constant));
  if (a.num_bins > 0) config.set_extra_option("CalibNumBins", json_text(a.num_bins));
  if (use("--num-quantized-bins")) config.set_extra_option("CalibNumQuantizedBins", json_text(a.num_quantized_bins));
  if (use("--percentile")) config.set_extra_option("CalibPercentile", json_text(a.percentile));
  if (use("--percentile-candidates"))
    config.set_extra_option("PercentileCandidates", json_text(a.percentile_candidates));
  if (use("--lwp-metric")) config.set_extra_option("LWPMetric", json_text(a.lwp_metric));
  if (use("--minmse-mode")) config.set_extra_option("MinMSEMode", json_text(a.minmse_mode));
  if (use("--activation-type")) config.set("activation_type", json_text(activation_type_key(a.activation_type)));
  // Exactly the tensors `onnxptq quantize` would calibrate with the same method, type, symmetry
  // and op types: the plan's on the prepared model (a Relu's input takes the Relu's range, weights
  // are not calibrated).
  if (use("--op-types")) config.set("op_types_to_quantize", json_text(a.op_types));
  if (use("--no-optimize-model")) config.set("optimize_model", json_text(!a.no_optimize_model));
  config.calib_size(a.data.calib_size).threads(a.threads).calib_workers(a.workers).strict(a.strict);

  ProgressDisplay display(a.quiet, isatty(STDERR_FILENO));
  CalibrateOptions options;
  options.distribution_scenario = a.scenario;
  options.ranks = command_ranks();
  if (!a.quiet) options.log = [&display](const std::string& m) { display.line(m); };
  options.progress = [&display](const Progress& p) { display.update(p); };

  Model model = Model::load(a.model);
  std::unique_ptr<DataReader> data = open_calib_data(a.data, model);
  if (sharded) {
    const std::string first_pass = a.first_pass.empty() ? "" : read_text_file(a.first_pass, "--first-pass " + a.first_pass);
    write_text_file(a.save_stats,
                    calibrate_shard(model, *data, config, shard_index, shard_count, options, first_pass));
    if (!a.quiet)
      std::cerr << "statistics of shard " << shard_index << " of " << shard_count
                << (first_pass.empty() ? "" : " (second pass)") << " written to " << a.save_stats << "\n";
    return;
  }
  Calibration result = calibrate(model, *data, config, options);
  if (!writer) return;

  write_ranges(result, a.output, a.quiet);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate",
                                     "Run the float model over calibration data and write each tensor's range as JSON");
  cmd->add_option("MODEL", a->model, "ONNX model file")->required();
  add_calib_data_options(cmd, a->data);
  cmd->add_option("--config", a->config,
                  "A preset (onnxptq presets) or a JSON file of quantize_static's arguments, as `quantize --config`: "
                  "the ranges that quantize run calibrates; the options below given override it");
  cmd->add_option(
      "--method", a->method,
      "MinMax (default), Entropy, Percentile, Distribution, LayerWisePercentile, NonOverflow or MinMSE (power-of-two)");
  cmd->add_option("--symmetric", a->symmetric,
                  "true or false: symmetric ranges (CalibTensorRangeSymmetric; default true for Percentile and the "
                  "power-of-two methods)");
  cmd->add_flag("--moving-average", a->moving_average,
                "Moving average of the per-sample extrema (CalibMovingAverage; MinMax, NonOverflow)");
  cmd->add_option("--averaging-constant", a->averaging_constant, "CalibMovingAverageConstant (default 0.01)");
  cmd->add_option("--num-bins", a->num_bins,
                  "Histogram bins of Entropy, Percentile and Distribution (default: 128 for Entropy, 2048 for the "
                  "others, as in ORT and Quark)")
      ->check(non_negative());
  cmd->add_option("--num-quantized-bins", a->num_quantized_bins, "Quantized bins of Entropy (default 128)")
      ->check(non_negative());
  cmd->add_option("--percentile", a->percentile, "CalibPercentile (default 99.999)");
  cmd->add_option("--percentile-candidates", a->percentile_candidates,
                  "LayerWisePercentile: the percentiles tried per tensor (default 99.99 99.999 99.99999)");
  cmd->add_option("--lwp-metric", a->lwp_metric, "LayerWisePercentile: mae (default) or mse, the error compared");
  cmd->add_option("--scenario", a->scenario, "Distribution: same (default) or p3");
  cmd->add_option("--minmse-mode", a->minmse_mode, "MinMSE: All (default) or MostCommon");
  cmd->add_option("--activation-type", a->activation_type,
                  "int8 (default), uint8, int16 or uint16: the activation type the ranges are for (power-of-two "
                  "positions, LayerWisePercentile's errors, which Relu/Clip ranges are kept)");
  cmd->add_option("--op-types", a->op_types,
                  "Quantize these op types only (op_types_to_quantize; default: the quantizer's set)")
      ->delimiter(',');
  cmd->add_option("--output,-o", a->output, "JSON file to write (default: standard output)");
  cmd->add_option("--threads", a->threads, "Threads in all (default: every hardware thread)")->check(non_negative());
  cmd->add_option("--workers", a->workers,
                  "Samples run at once, sharing the threads (CalibWorkerNum; default 0: one a thread, up to 4)")
      ->check(non_negative());
  cmd->add_flag("--no-optimize-model", a->no_optimize_model,
                "Calibrate the model as given, without the preparation passes `quantize` runs first (tensor names "
                "then are the model's own)");
  cmd->add_option("--shard", a->shard,
                  "i/N: run shard i (from 0) of N, a contiguous share of the samples, and keep its statistics in "
                  "--save-stats (for jobs that do not talk; under mpirun the ranks share the samples themselves)");
  cmd->add_option("--save-stats", a->save_stats,
                  "Shard file to write (with --shard): its statistics, which `onnxptq merge-stats` combines into "
                  "the ranges of all the samples (MinMSE All and LayerWisePercentile: a first pass, then with "
                  "--first-pass a second)");
  cmd->add_option("--first-pass", a->first_pass,
                  "With --shard and --save-stats, for MinMSE All and LayerWisePercentile: the merged first pass "
                  "`merge-stats` wrote of every shard's first pass; this runs the shard's second pass on it");
  cmd->add_flag("--strict", a->strict, "Fail on a sample with NaN or Inf instead of skipping it");
  cmd->add_flag("--quiet", a->quiet, "Print no progress or warnings");
  cmd->callback([a, cmd] {
    for (const CLI::Option* o : cmd->get_options())
      if (o->count() > 0) a->given.insert(o->get_name());
    calibrate_command(*a);
  });
}

}  // namespace onnxptq::cli
