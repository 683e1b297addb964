// The one load-quantize path: quantize_static, Quark's automatic mixed precision or the
// accuracy-target search, then the summary, the report and the plan, for the command line, the
// Python module and C++ callers alike.
#include "onnxptq/quantize.h"

#include <optional>
#include <nlohmann/json.hpp>

#include "accuracy/auto_mixprecision.h"
#include "accuracy/evaluate_command.h"
#include "accuracy/target_search.h"
#include "api/ranges.h"
#include "calib/progress_reader.h"
#include "finetune/fast_finetune.h"
#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/files.h"
#include "quant/float16_model.h"
#include "quant/quantize.h"

namespace onnxptq {

const char* const kNoCalibrationData = quant::kNoCalibrationData;

namespace {

accuracy::SearchOptions search_options(const AccuracyTarget& t, const EvaluateFunction& evaluate,
                                       const std::filesystem::path& model_path) {
  if (!evaluate && t.lower_is_better)
    throw Error(
        "lower_is_better is about the evaluate function's metric; the built-in one (min_sqnr) is "
        "higher-is-better");
  accuracy::SearchOptions o;
  o.target.evaluate = evaluate;
  o.target.lower_is_better = t.lower_is_better;
  o.target.max_loss = t.max_loss;
  o.target.max_relative_loss = t.max_relative_loss;
  o.target.min_sqnr = t.min_sqnr;
  if (!t.fallback_type.empty()) o.fallback_type = accuracy::parse_fallback_type(t.fallback_type);
  o.fallback_order = accuracy::parse_fallback_order(t.fallback_order);
  o.max_trials = t.max_trials;
  o.time_limit = t.time_limit;
  o.stop_at_first_pass = t.stop_at_first_pass;
  o.finetune_recipe = t.finetune_recipe;
  o.held_out = t.held_out;
  o.output_index = t.output_index;
  o.threads = t.threads;
  o.float_model_path = model_path;
  return o;
}

// The ranges quantize() uses instead of calibrating: QuantizeOptions::ranges, or SaveAndRestore's
// file when it exists (nullopt, and `save_to` its path, when it does not).
std::optional<quant::KnownRanges> given_ranges(const quant::QuantConfig& c, const QuantizeOptions& o,
                                               std::filesystem::path& save_to) {
  std::optional<quant::KnownRanges> given;
  if (o.ranges) given = api::known_ranges_of(*o.ranges, o.ranges_source);
  if (!c.save_and_restore.empty()) {
    const std::string source = "SaveAndRestore '" + c.save_and_restore + "'";
    if (given) throw Error(source + " and " + o.ranges_source + " both give the ranges: choose one");
    std::error_code ec;
    if (std::filesystem::exists(c.save_and_restore, ec)) {
      const std::string text = read_text_file(c.save_and_restore, source);
      try {
        given = api::known_ranges_of(Calibration::from_json(text), source);
      } catch (const Error& e) {
        throw Error(source + ": " + e.what(), e.kind());
      }
    } else {
      save_to = c.save_and_restore;
    }
  }
  if ((given || !save_to.empty()) && (c.include_auto_mp || o.target))
    throw Error((given ? given->source : "SaveAndRestore '" + c.save_and_restore + "'") +
                ": ranges kept for reuse go with one quantization, not include_auto_mp or an accuracy target "
                "search (which calibrate for each candidate)");
  return given;
}

}  // namespace

EvaluateFunction command_evaluator(const std::string& command, double timeout_seconds) {
  return [command, timeout_seconds](const std::filesystem::path& model, const std::string& trial) {
    return accuracy::run_evaluate_command(command, model, timeout_seconds, trial).value;
  };
}

QuantizeOutcome quantize(const Model& model, DataReader& reader, const Config& config, const QuantizeOptions& o) {
  quant::QuantConfig c = config.quant();
  c.calib.progress = o.progress;
  c.calib.ranks = o.ranks;
  if (o.ranks && o.ranks->size() > 1 && (c.include_fast_ft || (c.include_auto_mp && c.auto_mp.use_fast_ft)))
    throw Error(
        "include_fast_ft: fast finetune trains in one process; run it without ranks (mpirun -np 1), or "
        "calibrate over ranks and quantize with the ranges (QuantizeOptions::ranges)");
  if (o.ranks && o.ranks->size() > 1 && (c.include_auto_mp || o.target))
    throw Error(std::string(c.include_auto_mp ? "include_auto_mp" : "an accuracy target") +
                ": the search runs in one process; run it without ranks, or calibrate over ranks and quantize with "
                "the ranges (QuantizeOptions::ranges)");
  quant::check_config(c);  // before reading any data
  const ir::Model& m = model.ir();
  quant::resolve_float16_model(c, m, o.log);  // QuantizeFP16
  if (c.quantize_fp16 && *c.quantize_fp16 && (c.include_auto_mp || o.target))
    throw Error(
        "QuantizeFP16 (a float16 model) with include_auto_mp or an accuracy target: their trial models are "
        "float32; convert the model first (convert_fp16_to_fp32)");
  if (c.include_auto_mp && o.target) throw Error("include_auto_mp and an accuracy target are two searches: choose one");
  if (c.use_dynamic_quant && (o.target || o.ranges))
    throw Error(std::string("use_dynamic_quant with ") + (o.target ? "an accuracy target" : "given ranges") +
                ": dynamic quantization calibrates nothing and has no Q/DQ recipe to search");
  if (c.use_matmul_nbits && o.target)
    throw Error("UseMatMulNBits with an accuracy target: the search tries Q/DQ recipes; the MatMulNBits path has none");
  if (o.evaluate && !o.target && !(c.include_auto_mp && c.auto_mp.top1_acc_target))
    throw Error(
        "an evaluate function belongs to an accuracy target (max loss or max relative loss) or to "
        "include_auto_mp with AutoMixprecision.Top1AccTarget");
  std::filesystem::path save_to;
  const std::optional<quant::KnownRanges> given = given_ranges(c, o, save_to);
  std::unique_ptr<DataReader> random = quant::random_data_reader(m, c);  // UseRandomData
  std::unique_ptr<DataReader> counted;
  if (o.progress) counted = calib::make_progress_reader(random ? *random : reader, o.progress, c.calib.max_samples);
  DataReader& data = counted ? *counted : random ? *random : reader;
  quant::QuantizeResult result;
  nlohmann::json search_json, auto_mp_json;
  std::string search_line;
  bool met = true;
  // Candidate models are written to files only for an evaluate function, which reads them by path:
  // without one the searches write nothing (Quark's crypto mode).
  std::optional<ir::TemporaryFolder> trials;
  if (o.evaluate && (c.include_auto_mp || o.target)) trials.emplace("onnxptq-trials");
  const std::filesystem::path work_dir = trials ? trials->path() : std::filesystem::path();
  if (c.include_auto_mp) {
    accuracy::AutoMixResult mixed = accuracy::auto_mixprecision(m, data, c, o.evaluate, work_dir, o.log);
    auto_mp_json = accuracy::auto_mixprecision_report(mixed);
    result = std::move(mixed.result);
  } else if (o.target) {
    accuracy::SearchOptions options = search_options(*o.target, o.evaluate, o.model_path);
    options.work_dir = work_dir;
    accuracy::SearchResult search = accuracy::search_accuracy_target(m, data, c, options, o.log);
    search_json = accuracy::search_report(search);
    search_line = accuracy::search_summary(search);
    met = search.met;
    result = std::move(search.best);
  } else {
    result = quant::quantize_static(m, data, c, o.log, finetune::post_quantization_refiner(c, o.log),
                                    given ? &*given : nullptr);
    if (!save_to.empty()) {
      write_text_file(save_to,
                      api::calibration_of(result.calibration, c.calibrate_method, c.activation_type).to_json() + "\n");
      if (o.log)
        o.log("SaveAndRestore: ranges of " + std::to_string(result.calibration.ranges.size()) + " tensors written to " +
              save_to.string());
    }
  }
  quant::restore_float16_model(result.model, m, c, o.log);
  nlohmann::json report = quant::report(m, result);
  if (!search_json.is_null()) report["accuracy_target"] = search_json;
  if (!auto_mp_json.is_null()) report["auto_mixprecision"] = auto_mp_json;
  std::string summary = quant::summary(m, result);
  std::string plan = result.plan.to_json().dump(2);
  return QuantizeOutcome{Model(std::make_shared<const ir::Model>(std::move(result.model))),
                         std::move(summary),
                         report.dump(2),
                         std::move(plan),
                         met,
                         std::move(search_line)};
}

}  // namespace onnxptq
