// check-npu: the NPU's shift constraints (vai_q_onnx 1.16's IPULimitationCheck) evaluated on an
// exported power-of-two model, from the positions its quantize nodes carry.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ir/model.h"
#include "onnxptq/check_npu.h"

namespace onnxptq::tools {

// The result is the public API's (onnxptq/check_npu.h): each violation with the rule's quantity,
// its value and the interval it left (quant::IpuConstraint's, no bound as nothing).
using onnxptq::NpuCheck;
using onnxptq::NpuViolation;

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
