// IPULimitationCheck: the NPU's shift constraints on a power-of-two plan (vai_q_onnx's refine.py adjust_quantize_info).
#pragma once

#include <string>
#include <vector>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// One position changed by a rule.
struct IpuAdjustment {
  std::string rule;    // "AdjustShiftCut", "AlignConcat", ...
  std::string node;    // the node the rule looked at
  std::string tensor;  // the tensor whose position changed (its parameter provider)
  int from = 0, to = 0;
};

// Changes the power-of-two positions of `plan` (after assign_parameters) so that the
// constraints of ipu_rules.h hold on `model`, in refine.py's order, sweeping config.ipu.max_loops times (or until
// nothing changes), with the sub-options of config.ipu and config.align_*. Weights and biases
// whose position changes are quantized again from their float values (vai_q_onnx does not: a
// documented bug). Returns every change made, in order.
std::vector<IpuAdjustment> apply_ipu_limitations(Plan& plan, const ir::Model& model, const QuantConfig& config);

// One line per rule that ran, with the number of positions it changed.
std::vector<std::string> ipu_limitation_log(const std::vector<IpuAdjustment>& changes, const QuantConfig& config);

// Error when the check's options (IPULimitationCheck, Adjust*, MaxLoopNum) leave their defaults
// where the check does not run (no enable_dpu, or float scales), or MaxLoopNum is negative.
void check_ipu_config(const QuantConfig& config);

}  // namespace onnxptq::quant
