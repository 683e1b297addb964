// Per-node sensitivity: how much of a quantized model's output error each quantized node makes.
// The plan is simulated (quant/simulate.h) with only one node's tensors quantized (its inputs,
// weight, bias and outputs, with the parameters they have in the whole plan), with only its
// weight (and bias), with only its activations, and, on request, with every node quantized but
// that one; the chosen model output is compared with the float model's. Quark's AutoMixprecision
// ranks nodes the first way, Intel Neural Compressor's per-op fallback the last; here both come
// from simulations of one calibration instead of a quantization (or a metric run) per node. The
// first three run only what is downstream of the node, from the float values at its cut
// (accuracy/downstream.h).
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "calib/data_reader.h"
#include "ir/model.h"
#include "onnxptq/sensitivity.h"
#include "quant/config.h"
#include "quant/plan.h"
#include "quant/quantize.h"

namespace onnxptq::accuracy {

// The measures and the report are the public API's (onnxptq/sensitivity.h).
using onnxptq::NodeSensitivity;
using onnxptq::OutputMetrics;
using onnxptq::SensitivityOptions;
using onnxptq::SensitivityReport;

class OutputError {
 public:
  // Error when the shapes differ (naming `what`); non-float tensors are compared as float.
  void add(const ir::Tensor& reference, const ir::Tensor& value, const std::string& what);
  double sqnr_db() const;
  OutputMetrics metrics() const;

 private:
  double signal_ = 0, noise_ = 0, dot_ = 0, value_energy_ = 0;
  size_t count_ = 0;
  double kl_sum_ = 0;
  size_t kl_rows_ = 0;
  bool probabilities_ = true;
};

// Samples and the float model's output `output_index` on each: what the measures compare with.
struct ReferenceOutputs {
  std::vector<Feed> feeds;
  std::vector<ir::Tensor> outputs;
  size_t output_index = 0;
};

// `model` run on every sample of `reader` (at most `max_samples`, 0: all). Error when the model
// has no output `output_index` or a sample does not fit the model.
ReferenceOutputs reference_outputs(const ir::Model& model, DataReader& reader, size_t output_index, size_t max_samples,
                                   int threads);

// reference_outputs of `prepared`, the float model as quant::prepare_float_model made it for
// `config`, on `reader`'s samples (rewound first), adapted to its inputs where a format conversion
// changed them (quant::adapted_reader).
ReferenceOutputs prepared_reference_outputs(const ir::Model& prepared, DataReader& reader,
                                            const quant::QuantConfig& config, size_t output_index, size_t max_samples,
                                            int threads);

// The error of `run` (a model's outputs for a feed) against `reference`, over its samples;
// shape errors name `what` and the sample.
OutputMetrics compare_to_reference(const ReferenceOutputs& reference,
                                   const std::function<std::vector<ir::Tensor>(const Feed&)>& run,
                                   const std::string& what = "");

// Which of a node's quantized tensors a partial plan keeps.
enum class NodePart { All, Weight, Activations };

// The plan with only `node`'s tensors quantized (all, its weight and bias, or its activations):
// its inputs and outputs as the whole plan quantizes them (shared parameters resolved), and the
// output of an activation the plan removes after it (whose quantization clips in its place).
quant::Plan plan_of_node(const quant::Plan& plan, const ir::Graph& graph, const std::string& node,
                         NodePart part = NodePart::All);

// `model` (the model the plan is for) simulated with `plan`, against `reference`.
OutputMetrics simulated_error(const ir::Model& model, const quant::Plan& plan, const quant::QuantConfig& config,
                              const ReferenceOutputs& reference, int threads);

// The model and plan of the whole configuration with `node` left in float; nullopt when that
// cannot be made (a node enable_dpu's passes made, which no option can name).
using LeftFloatPlan = std::function<std::optional<std::pair<ir::Model, quant::Plan>>(const std::string& node)>;

// The LeftFloatPlan of `config`: quant::quantize_prepared with the node added to
// nodes_to_exclude, on a copy of `prepared` (the float model as prepare_float_model made it, or
// nullopt for `float_model` itself), with the ranges of `ranges` (tensors it lacks calibrated on
// `reader` and added). Every argument must outlive the result.
LeftFloatPlan left_float_plans(const ir::Model& float_model, const std::optional<ir::Model>& prepared,
                               DataReader& reader, const quant::QuantConfig& config, quant::RangeCache& ranges);

// For every node of plan.quantized_nodes, the alone measure of `model` (the model the plan was
// made for) on `reference`'s samples (fed as they are to `model`); with `split`, the weight and
// activation measures (two more plans for each node with a weight); with `left_float`, the measure with the node left
// float (for nodes whose alone error is not zero). Ordered worst alone first. The alone, weight and activation measures
// are simulated_error's of plan_of_node's plans, computed by downstream_errors (downstream.h)
// from the float values at each node's cut, not by whole-model runs; `log` gets one line on where
// their time went. The left-float measures are whole-model simulations. `progress` counts the
// nodes measured, the alone (and split) measures first, then the left-float ones.
std::vector<NodeSensitivity> analyze_nodes(const ir::Model& model, const quant::Plan& plan,
                                           const quant::QuantConfig& config, const ReferenceOutputs& reference,
                                           int threads, bool split, const LeftFloatPlan& left_float = {},
                                           const std::function<void(const std::string&)>& log = {},
                                           const ProgressFunction& progress = {});

// The whole analysis of `config` on `model` (not changed): prepare_float_model and the plan once,
// calibration once, then analyze_nodes on the first `samples` samples of `reader` (rewound as
// needed). `log` gets the quantizer's progress lines.
SensitivityReport analyze_sensitivity(const ir::Model& model, DataReader& reader, const quant::QuantConfig& config,
                                      const SensitivityOptions& options,
                                      const std::function<void(const std::string&)>& log = {});

// The analysis for machines: {"output_index", "samples", "whole_model": metrics, "nodes": [{"node",
// "op_type", "alone", "weight", "activations", "left_float"}]}, metrics as {"sqnr_db", "cosine",
// "rmse", "kl"} or null when not measured, infinities and NaN as null. CSV: one line per node,
// the same columns flattened.
nlohmann::json sensitivity_json(const SensitivityReport& report);
std::string sensitivity_csv(const std::vector<NodeSensitivity>& nodes);
// A page for people: the whole model's error, then one row per node with bars of its alone
// error and, when measured, its weight and activation errors (inline SVG, no script, no network), worst first. `title`
// names the model and configuration.
std::string sensitivity_html(const SensitivityReport& report, const std::string& title);

}  // namespace onnxptq::accuracy
