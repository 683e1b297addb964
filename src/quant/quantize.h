// quantize_static: plan, calibrate, assign parameters, export (docs/ARCHITECTURE.md).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calib/calibrate.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/config_keys.h"  // the config parser callers of quantize_static use
#include "quant/known_ranges.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// Calibrated ranges kept between quantizations of one prepared model, by the activation type
// their power-of-two positions were chosen for (float-scale ranges, which hold for any type,
// under Undefined).
using RangeCache = std::map<ir::DataType, calib::CalibrationResult>;

// One layer of fast finetune (finetune/fast_finetune.h), as the report gives it.
struct FinetunedLayer {
  std::string pass = "fast_finetune";  // or "bias_correction" (its bias moved, iterations its steps)
  std::string node;
  std::string op_type;
  std::string activation;  // the op trained with the node ("" when none)
  double loss_before = 0;  // the reconstruction loss with the weight rounded to nearest
  double loss_after = 0;   // with the trained weight
  int iterations = 0;
  bool kept = false;  // the trained weight replaced the plan's (its loss was lower, and with
                      // SelectiveUpdate the model's output closer to the float one)
  // SelectiveUpdate: the mean L2 distance of the model's output to the float model's, before and
  // with the trained weight.
  std::optional<std::pair<double, double>> output_distance;
  double seconds = 0;
  std::string skipped;  // why the node was not trained ("" when it was)
};

struct QuantizeResult {
  ir::Model model;
  // With optimize_model: the prepared float model the plan's node and tensor names refer to.
  std::optional<ir::Model> prepared;
  Plan plan;
  calib::CalibrationResult calibration;
  std::map<std::string, double> seconds;  // per phase: plan, calibrate, parameters, finetune, export
  std::vector<FinetunedLayer> finetuned;  // include_fast_ft: every target node, in graph order
};

// What the caller says when it calibrates on the seeds' one random sample for want of data.
inline constexpr const char* kNoCalibrationData =
    "no calibration data given: calibrating on one random sample (the seeds' RandomDataReader), "
    "so the ranges fit noise, not your data";

// Quantizes `model` with samples from `reader` (rewound as the methods need): with
// optimize_model, the preparation passes first (on a copy), then the plan (plan_quantization),
// calibration, parameters and export. `log` gets progress lines and warnings. Errors name what is wrong before any work
// where they can. A step after the parameters, before export: fast finetune (finetune/fast_finetune.h), which lives
// above the quantizer, changes the plan's quantized weights. `model` is the model the plan is for, `reader` its samples
// (rewound).
using PlanRefiner =
    std::function<std::vector<FinetunedLayer>(Plan& plan, const ir::Model& model, calib::DataReader& reader)>;

// With include_fast_ft, `refine` must be given (an Error otherwise). With `given`, its ranges
// are used and nothing is calibrated (quant/known_ranges.h; Error when they do not fit).
QuantizeResult quantize_static(const ir::Model& model, calib::DataReader& reader, const QuantConfig& config,
                               const std::function<void(const std::string&)>& log = {}, const PlanRefiner& refine = {},
                               const KnownRanges* given = nullptr);

// quantize_static's steps after preparation, into `r` whose `prepared` prepare_float_model set
// (for `float_model` and `config`): plan, calibration, enable_dpu's later passes, parameters,
// `refine` (with include_fast_ft), export. With `known_ranges`, ranges found there are used as they are and the tensors
// it lacks are calibrated and added to it: trials that differ only in what is quantized (nodes_to_exclude,
// nodes_to_quantize, node precisions) share one calibration. `reader` gives the samples of
// `float_model`'s inputs. Without `with_export`, r.model stays empty: the plan is for simulation only.
// `given`: as for quantize_static.
void quantize_prepared(QuantizeResult& r, const ir::Model& float_model, calib::DataReader& reader,
                       const QuantConfig& config, const std::function<void(const std::string&)>& log,
                       RangeCache* known_ranges, bool with_export = true, const PlanRefiner& refine = {},
                       const KnownRanges* given = nullptr);

// The float model as quantize_static quantizes it, on a copy: RemoveInputInit, optimize_model's
// preparation passes, then include_cle / ReplaceClip6Relu; nullopt when none of them applies. Adds the time of
// each step ("prepare", "cle") to `seconds` when given.
std::optional<ir::Model> prepare_float_model(const ir::Model& model, calib::DataReader& reader,
                                             const QuantConfig& config,
                                             const std::function<void(const std::string&)>& log = {},
                                             std::map<std::string, double>* seconds = nullptr);

// A reader giving samples fit for `model` (the prepared model) when a format conversion
// (convert_fp16_to_fp32, convert_nchw_to_nhwc) changed its inputs; nullptr when none was asked for.
std::unique_ptr<calib::DataReader> adapted_reader(calib::DataReader& reader, const ir::Model& model,
                                                  const QuantConfig& config);

// UseRandomData's reader for `model` (config.random_data), or nullptr when the config does not ask
// for random data.
std::unique_ptr<calib::DataReader> random_data_reader(const ir::Model& model, const QuantConfig& config);

// The plan quantize_static makes. Where the model does not give every value's element type
// (no shape inference ran), the first sample is run once to learn them (the seeds' smoke
// test), then the reader is rewound. Its tensors_to_calibrate() are what
// calibration must observe (`onnxptq calibrate` uses it too).
Plan plan_quantization(const ir::Model& model, calib::DataReader& reader, const QuantConfig& config);

// The report of a quantization (report.cc): a summary for people (nodes quantized by op type,
// nodes left float and why, time per phase).
std::string summary(const ir::Model& float_model, const QuantizeResult& result);
// The same for machines: {"quantized_nodes_by_op_type", "float_nodes", "seconds", "calibration", "warnings"},
// and "fast_finetune" (each target node: "node", "op_type", then "skipped", or "activation",
// "loss_before", "loss_after", "iterations", "kept", "seconds", and with SelectiveUpdate
// "output_distance_before", "output_distance_after") after fast finetune.
nlohmann::json report(const ir::Model& float_model, const QuantizeResult& result);

}  // namespace onnxptq::quant
