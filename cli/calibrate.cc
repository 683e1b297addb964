// `onnxptq calibrate`: the range of every tensor the quantizer would calibrate, as JSON.
#include "calib/calibrate.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calib/progress_reader.h"
#include "cli/calib_data.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "engine/session.h"
#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/quantize.h"

namespace onnxptq::cli {
namespace {

struct CalibrateArgs {
  std::string model;
  std::string output;
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
};

ir::DataType parse_activation_type(const std::string& t) {
  if (t == "int8") return ir::DataType::Int8;
  if (t == "uint8") return ir::DataType::UInt8;
  if (t == "int16") return ir::DataType::Int16;
  if (t == "uint16") return ir::DataType::UInt16;
  throw Error("--activation-type must be int8, uint8, int16 or uint16, got '" + t + "'");
}

nlohmann::ordered_json ranges_json(const calib::CalibrationResult& r, const calib::CalibOptions& o) {
  nlohmann::ordered_json j;
  j["method"] = calib::method_name(o.method);
  j["samples"] = r.samples;
  j["skipped_samples"] = r.skipped;
  j["passes"] = r.passes;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const auto& [name, t] : r.ranges) {
    nlohmann::ordered_json e;
    e["min"] = t.lo;
    e["max"] = t.hi;
    if (t.pos) e["pos"] = *t.pos;
    if (o.method == calib::Method::Distribution) {
      e["mean"] = t.mean;
      e["std"] = t.std;
    }
    tensors[name] = e;
  }
  j["tensors"] = tensors;
  return j;
}

void calibrate_command(const CalibrateArgs& a) {
  calib::CalibOptions o;
  o.method = calib::parse_method(a.method);
  if (a.symmetric == "true")
    o.symmetric = true;
  else if (a.symmetric == "false")
    o.symmetric = false;
  else if (!a.symmetric.empty())
    throw Error("--symmetric must be true or false, got '" + a.symmetric + "'");
  o.moving_average = a.moving_average;
  o.averaging_constant = a.averaging_constant;
  o.num_bins = a.num_bins;
  o.num_quantized_bins = a.num_quantized_bins;
  o.percentile = a.percentile;
  o.percentile_candidates = a.percentile_candidates;
  o.lwp_metric = a.lwp_metric;
  o.scenario = a.scenario;
  o.minmse_mode = a.minmse_mode;
  o.activation_type = parse_activation_type(a.activation_type);
  o.max_samples = a.data.calib_size;
  o.threads = a.threads;
  o.workers = a.workers;
  o.strict = a.strict;
  ProgressDisplay display(a.quiet, isatty(STDERR_FILENO));
  if (!a.quiet) o.log = [&display](const std::string& m) { display.line(m); };

  // Exactly the tensors `onnxptq quantize` would calibrate with the same method, type, symmetry
  // and op types: the plan's on the prepared model (a Relu's input takes the Relu's range, weights
  // are not calibrated).
  quant::QuantConfig config;
  config.calibrate_method = o.method;
  config.activation_type = o.activation_type;
  config.activation_symmetric = o.symmetric.value_or(false);
  config.op_types_to_quantize = a.op_types;
  config.calib = o;

  config.optimize_model = !a.no_optimize_model;

  Model source = Model::load(a.model);
  const ir::Model& loaded = source.ir();
  std::unique_ptr<DataReader> data = open_calib_data(a.data, source);
  std::unique_ptr<DataReader> reader = calib::make_progress_reader(
      *data, [&display](const Progress& p) { display.update(p); }, o.max_samples);
  std::optional<ir::Model> prepared = quant::prepare_float_model(loaded, *reader, config);
  const ir::Model& model = prepared ? *prepared : loaded;
  std::vector<std::string> tensors = quant::plan_quantization(model, *reader, config).tensors_to_calibrate();
  calib::CalibrationResult result = calib::calibrate(model, tensors, *reader, o);

  std::string text = ranges_json(result, o).dump(2) + "\n";
  if (a.output.empty() || a.output == "-") {
    std::cout << text;
    return;
  }
  ir::write_text_file(a.output, text);
  if (!a.quiet)
    std::cerr << "ranges of " << result.ranges.size() << " tensors from " << result.samples - result.skipped.size()
              << " samples written to " << a.output << "\n";
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate",
                                     "Run the float model over calibration data and write each tensor's range as JSON");
  cmd->add_option("MODEL", a->model, "ONNX model file")->required();
  add_calib_data_options(cmd, a->data);
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
  cmd->add_flag("--strict", a->strict, "Fail on a sample with NaN or Inf instead of skipping it");
  cmd->add_flag("--quiet", a->quiet, "Print no progress or warnings");
  cmd->callback([a] { calibrate_command(*a); });
}

}  // namespace onnxptq::cli
