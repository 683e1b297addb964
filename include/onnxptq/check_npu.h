// `onnxptq check-npu`: the NPU's shift constraints (vai_q_onnx 1.16's IPULimitationCheck) evaluated
// on a written power-of-two model, from the positions its quantize nodes carry.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "onnxptq/model.h"

namespace onnxptq {

// One constraint a node breaks.
struct NpuViolation {
  std::string node, op_type;
  std::string rule;           // vai_q_onnx's name of the rule: "AdjustShiftCut", "AlignConcat", ...
  std::string quantity;       // what the rule bounds: "shift_cut = wpos + ipos - opos"
  int value = 0;              // its value in the model
  std::optional<int> lo, hi;  // the interval allowed; nothing on a side without bound
  std::string terms;          // the positions it was computed from: "wpos 9, ipos 7, opos -1"
};

struct NpuCheck {
  size_t positions = 0;  // quantize nodes whose position was read
  size_t checks = 0;     // (rule, node) pairs evaluated: every position the rule needs was there
  std::vector<NpuViolation> violations;

  // "N violations (P positions, C rule checks)" and one line per violation: rule, op type and node,
  // quantity = value, the interval allowed, the terms.
  std::string to_text() const;
  // {"positions", "checks", "violations": [{"rule", "node", "op_type", "quantity", "value",
  // "allowed": [lo, hi] (null for no bound), "terms"}]}, indented by two spaces.
  std::string to_json() const;
};

// Reads each tensor's position from the model's QuantizeLinear/DequantizeLinear (any domain),
// VitisQuantizeLinear/VitisDequantizeLinear and ExtendedQuantizeLinear/ExtendedDequantizeLinear
// (pos = -log2 of the scale) and FixNeuron (its `pos` attribute), finds them around each node as
// vai_q_onnx's refinement does (LeakyRelu and PRelu count as fused activations), and evaluates each
// rule on every node of the default domain. Error for a scale that is not one power of two (or per
// channel), a FixNeuron without an integer pos, or a model without quantize nodes.
NpuCheck check_npu(const Model& model);

}  // namespace onnxptq
