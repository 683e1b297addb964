// Quark's automatic mixed precision (include_auto_mp with the AutoMixprecision extra option;
// Quark's quark/onnx auto_mixprecision, legacy API): the model is quantized at the configured
// precision, each candidate node (TargetOpType) is measured with only it converted to the target
// precision (ActTargetQuantType, WeightTargetQuantType), the candidates are sorted least harmful
// first, then converted one by one, cumulatively, until NumTarget nodes are, or the next one would
// take the loss past L2Target (or Top1AccTarget with an evaluate function): that one is not taken.
// The loss is measured on a simulation of each plan (quant/simulate.h) from one calibration,
// instead of a quantized model file per step.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "accuracy/target_search.h"
#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/quantize.h"

namespace onnxptq::accuracy {

struct AutoMixResult {
  quant::QuantizeResult result;  // the model with the converted nodes
  quant::QuantConfig config;     // node_precision holds them
  // Each candidate's loss with only it converted, least harmful first, and whether it was taken.
  struct Candidate {
    std::string node;
    double alone = 0;
    bool converted = false;
  };
  std::vector<Candidate> candidates;
  std::string metric;  // "l2" (mean over samples of |y - y_float|_2 on output OutputIndex) or "top1 loss"
  double loss = 0;     // of the model written
  double target = 0;
  std::string stop_reason;
};

// Runs it for `config` (include_auto_mp set) on `model` with samples from `reader` (rewound as
// needed). With `evaluate` (the user's accuracy, higher is better), the loss is the drop of that
// metric from the float model's, against Top1AccTarget; candidate models are written to
// `work_dir`. Error when Top1AccTarget and `evaluate` do not come together.
AutoMixResult auto_mixprecision(const ir::Model& model, DataReader& reader, const quant::QuantConfig& config,
                                const EvaluateFunction& evaluate = {}, const std::filesystem::path& work_dir = {},
                                const std::function<void(const std::string&)>& log = {});

// {"metric", "target", "loss", "stop_reason", "candidates": [{"node", "alone", "converted"}]}.
nlohmann::json auto_mixprecision_report(const AutoMixResult& result);

}  // namespace onnxptq::accuracy
