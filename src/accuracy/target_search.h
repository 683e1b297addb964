// Quantizing to an accuracy target: the user says how much of a metric they may lose, and the
// search looks for the cheapest quantized model that keeps it. First whole-model recipes (per
// channel weights, the calibration methods of the scale kind, CLE on or off, AdaRound fast
// finetune; each kept when it improves the metric, as a coordinate search), then, from the best recipe, nodes fall back to
// float in sensitivity order (accuracy/sensitivity.h): a bisection finds the shortest prefix of
// that order that meets the target, then fallbacks are reverted, by groups split in halves, where
// the target holds without them. The approach of Intel Neural Compressor's "basic" tuning
// strategy (per-op fallback, cumulative, then MSE_V2's revert), with the fallback order from
// simulations of one plan instead of one quantization per op.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "accuracy/sensitivity.h"
#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/quantize.h"

namespace onnxptq::accuracy {

// Scores a model file (the user's metric); `trial` names the trial for messages.
using EvaluateFunction = std::function<double(const std::filesystem::path& model, const std::string& trial)>;

struct AccuracyTarget {
  // The user's metric. Without one, the metric is the SQNR (dB) of the model output
  // `output_index` against the float model's on samples held out of calibration.
  EvaluateFunction evaluate;
  bool lower_is_better = false;
  // With `evaluate`, exactly one: the metric may be worse than the float model's by this much
  // (absolute), or by this fraction of it (relative, as Intel Neural Compressor's criterion).
  std::optional<double> max_loss, max_relative_loss;
  // Without `evaluate`: the output SQNR to reach.
  std::optional<double> min_sqnr;
};

// The order nodes fall back to float in: by the output SQNR of the model with only that node
// left float (most recovered first; Intel Neural Compressor's per-op fallback, measured on a
// simulation), or with only that node quantized (worst first; Quark AutoMixprecision's).
// Both leave out nodes whose quantization alone changes nothing.
enum class FallbackOrder { LeftFloat, Alone };
// "left-float", "alone"; Error naming them otherwise.
FallbackOrder parse_fallback_order(const std::string& name);

// What a sensitive node falls back to: float (nullopt), or a wider type for its activations and
// weights (int16, bfloat16; an NPU configuration, enable_dpu, keeps int8 weights). When even
// every candidate at that type misses, the fallback starts over in float.
using FallbackType = std::optional<ir::DataType>;
// "float", "int16", "bfloat16"; Error naming them otherwise.
FallbackType parse_fallback_type(const std::string& name);
// The default per configuration: what its hardware runs. int16 for the NPU path (enable_dpu: the
// NPU runs A16W8 nodes, a float node leaves it for the CPU), float elsewhere (ONNX Runtime runs
// a 16-bit Q/DQ node in float anyway).
FallbackType default_fallback_type(const quant::QuantConfig& config);

struct SearchOptions {
  AccuracyTarget target;
  FallbackOrder fallback_order = FallbackOrder::LeftFloat;
  std::optional<FallbackType> fallback_type;  // unset: default_fallback_type
  size_t max_trials = 100;  // quantized models scored; 0: no limit
  double time_limit = 0;    // seconds; 0: no limit (the trial running when it passes completes)
  bool stop_at_first_pass = false;  // end with the first model that meets the target
  // The last whole-model recipe, when the configuration has no fast finetune: AdaRound with
  // Quark's DEFAULT_ADAROUND_PARAMS (include_fast_ft), kept, as every recipe, when it helps; the
  // fallback trials after it then finetune too.
  bool finetune_recipe = true;
  // Built-in metric: samples held out of the calibration data (the last ones) to measure on;
  // 0: a quarter of them, at least 1 and at most 32.
  size_t held_out = 0;
  size_t sensitivity_samples = 8;  // samples the fallback order is measured on
  size_t output_index = 0;         // the model output the built-in measures compare
  int threads = 0;
  // Where candidate models are written for `evaluate` (one at a time, removed after scoring).
  std::filesystem::path work_dir;
  // The float model's file, scored for the baseline with `evaluate`; empty: written to work_dir.
  std::filesystem::path float_model_path;
};

struct Trial {
  size_t index = 0;
  std::string phase;   // "recipe", "fallback", "revert"
  std::string change;  // what this trial changed, for people
  double metric = 0;
  bool meets = false;
  double seconds = 0;
  std::vector<std::string> fallback;  // nodes that fell back
  std::string fallback_type;          // to what: "float", "int16", ...
};

struct SearchResult {
  quant::QuantizeResult best;  // the model chosen
  // The configuration that made it: nodes_to_exclude (float) or node_precision holds the fallback.
  quant::QuantConfig config;
  size_t best_trial = 0;
  bool met = false;
  double float_metric = 0;
  double required = 0;  // the metric the target asks for
  bool lower_is_better = false;
  std::vector<Trial> trials;
  std::vector<NodeSensitivity> sensitivity;  // the fallback order, when the fallback phase ran
  std::string stop_reason;                   // why the search ended
  double seconds = 0;
};

// Runs the search on `model` with samples from `reader` (rewound as needed) from `base`, the
// user's configuration; format constraints hold because every recipe passes check_config
// (power-of-two stays power-of-two, enable_dpu keeps per-tensor weights). Error when the target
// is not well formed, the float model's metric is not a number, or a trial fails (naming it).
SearchResult search_accuracy_target(const ir::Model& model, DataReader& reader, const quant::QuantConfig& base,
                                    const SearchOptions& options,
                                    const std::function<void(const std::string&)>& log = {});

// One line: whether the target was met, by which trial, and the metric against the target.
std::string search_summary(const SearchResult& result);
// {"float_metric", "required", "lower_is_better", "met", "best_trial", "stop_reason", "seconds",
//  "trials": [{"index", "phase", "change", "metric", "meets", "seconds", "fallback", "fallback_type"}],
//  "sensitivity": [{"node", "op_type", "alone_db", "left_float_db"}] (the fallback order),
//  "node_precision": {node: "float" or {"activation", "weight", "bias"}: types},
//  "weighted_nodes": {"quantized", "eight_bit", "total"}}: weighted nodes are Conv, ConvTranspose,
//  Gemm, MatMul; eight_bit those whose activations and weight are all 8-bit.
nlohmann::json search_report(const SearchResult& result);

}  // namespace onnxptq::accuracy
