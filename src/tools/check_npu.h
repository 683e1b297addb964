// check-npu: the NPU's shift constraints (vai_q_onnx 1.16's IPULimitationCheck) evaluated on an
// exported power-of-two model, from the positions its quantize nodes carry.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ir/model.h"
#include "quant/ipu_rules.h"

namespace onnxptq::tools {

struct NpuViolation {
  std::string node, op_type, rule;
  quant::IpuConstraint constraint;  // the quantity, its value and the interval it left
};

struct NpuCheck {
  size_t positions = 0;  // quantize nodes whose position was read
  size_t checks = 0;     // (rule, node) pairs evaluated: every position the rule needs was there
  std::vector<NpuViolation> violations;
};

// Reads each tensor's position from the model's QuantizeLinear/DequantizeLinear (any domain),
// VitisQuantizeLinear/VitisDequantizeLinear and ExtendedQuantizeLinear/ExtendedDequantizeLinear
// (pos = -log2 of the scale, which must be a power of two) and FixNeuron (its `pos` attribute),
// finds them around each node as vai_q_onnx's refinement (refine.py) does (LeakyRelu and PRelu
// count as fused activations), and evaluates each of its constraints on every node. Error for a
// scale that is not one power of two, a FixNeuron without a pos, or a model without quantize nodes.
NpuCheck check_npu(const ir::Model& model);

// "N violations" and one line per violation: rule, node, quantity = value, allowed interval, terms.
std::string format_npu_check(const NpuCheck& check);
// {"positions", "checks", "violations": [{"rule", "node", "op_type", "quantity", "value", "allowed": [lo, hi]
// (null for no bound), "terms"}]}
nlohmann::json npu_check_json(const NpuCheck& check);

}  // namespace onnxptq::tools
