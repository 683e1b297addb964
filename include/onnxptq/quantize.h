// quantize_static: a float model and calibration data in, a quantized model out, with the
// summary and the report; optionally searching for the cheapest model that meets an accuracy
// target (docs/accuracy.md). The command line and the Python module both call this.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "onnxptq/calibrate.h"
#include "onnxptq/config.h"
#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"
#include "onnxptq/progress.h"
#include "onnxptq/sample_ranks.h"

namespace onnxptq {

// Scores a candidate model file (`trial` names it in messages): higher is better unless the
// target says lower_is_better.
using EvaluateFunction = std::function<double(const std::filesystem::path& model, const std::string& trial)>;

// A metric from a command of yours: `command` run through /bin/sh with every "{model}" replaced by
// the model's path, shell-quoted (appended after a space when there is no "{model}"), for at most
// `timeout_seconds` (0: no limit); the last non-empty line of its standard output is the score.
// Error naming the trial and the end of the command's output when it fails, runs past the limit
// (it is killed, with its children) or prints no number.
EvaluateFunction command_evaluator(const std::string& command, double timeout_seconds = 0);

// The accuracy target of the search (docs/accuracy.md): one of max_loss, max_relative_loss
// (scored by QuantizeOptions::evaluate) or min_sqnr (the output's SQNR on held-out calibration
// samples).
struct AccuracyTarget {
  bool lower_is_better = false;  // the evaluate function's metric is an error (CER, loss)
  std::optional<double> max_loss{}, max_relative_loss{}, min_sqnr{};
  std::string fallback_type{};                // "float", "int16", "bfloat16"; "": by the config
  std::string fallback_order = "left-float";  // or "alone"
  size_t max_trials = 100;                    // 0: no limit
  double time_limit = 0;                      // seconds; 0: no limit
  bool stop_at_first_pass = false;
  bool finetune_recipe = true;  // fast finetune (AdaRound, or AdaQuant) as the last recipe
  size_t held_out = 0;          // min_sqnr: samples held out (0: a quarter, 1 to 32)
  size_t output_index = 0;
  int threads = 0;
};

struct QuantizeOptions {
  // Progress lines ("calibrating 287 tensors ...", one per finetuned layer, ...); warnings start
  // with "warning: ". May be called from several threads, one call at a time.
  std::function<void(const std::string&)> log{};
  // Items done of the long phases: calibration samples, finetuned layers, search trials.
  ProgressFunction progress{};
  std::optional<AccuracyTarget> target{};
  // The metric of a candidate model, for the accuracy target or for AutoMixprecision's
  // Top1AccTarget (higher is better there); Error when neither asks for it.
  EvaluateFunction evaluate{};
  // The float model's path, when it has one: the accuracy search scores it from there.
  std::filesystem::path model_path{};
  // Ranges calibrated before (calibrate(), or Calibration::from_json of what `onnxptq calibrate`
  // wrote): nothing is calibrated, these are used, so one calibration serves many quantizations.
  // Error (naming ranges_source) when they were calibrated with another calibrate_method or for
  // another activation_type than the config's, lack a tensor the plan calibrates, or have one the
  // model does not (another model's); with include_auto_mp, an accuracy target or the
  // SaveAndRestore extra option.
  std::optional<Calibration> ranges{};
  std::string ranges_source = "the given ranges";
  // Several processes sharing the calibration samples (onnxptq/sample_ranks.h): each calls
  // quantize with the same arguments and gets the same model. Not with include_fast_ft, whose
  // training runs in one process (Error). Null: this process alone.
  std::shared_ptr<SampleRanks> ranks{};
};

struct QuantizeOutcome {
  Model model;                 // the quantized model
  std::string summary;         // quantized nodes by op type, nodes left float and why, time per phase
  std::string report_json;     // --report's JSON (with "accuracy_target" / "auto_mixprecision")
  std::string plan_json;       // --dump-plan's JSON: every tensor's type, scale and zero point
  bool target_met = true;      // false when a target search ended without meeting it
  std::string search_summary;  // the search's last line, after a search
};

// Quantizes `model` with `config` on the samples of `reader` (include_auto_mp, an accuracy
// target or neither). Error before any data is read for a config that does not hold together.
// The SaveAndRestore extra option (Quark's; old name TensorsRangeFile) names a file of ranges in
// Calibration::to_json's form: when it exists, its ranges are used as QuantizeOptions::ranges are;
// otherwise the ranges calibrated are written to it once the quantization has succeeded.
QuantizeOutcome quantize(const Model& model, DataReader& reader, const Config& config,
                         const QuantizeOptions& options = {});

// The seeds' message when no calibration data is given and one random sample stands in.
extern const char* const kNoCalibrationData;

}  // namespace onnxptq
