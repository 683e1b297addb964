// Mixed precision by hand: per-node precisions (extra option NodePrecision, the form Quark's
// specific_layer_config takes once lowered), ONNX Runtime's per-tensor TensorQuantOverrides
// (onnxruntime/python/tools/quantization/tensor_quant_overrides.py) and Quark's legacy
// MixedPrecisionTensor ({type: [tensor names]}, with specific_tensor_precision). The planner
// marks each node's tensors with its precision; settle_precisions then decides the tensors where
// two precisions meet, and apply_tensor_overrides applies the per-tensor entries last (they win,
// as in Quark).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "bfloat16", "bfp", "mx" or a
// quant type name ("QInt16", "QuantType.QUInt8", "QBFP", ...); "float" (or "float32") is nullopt:
// left in float.
// Error naming the known ones otherwise.
std::optional<ir::DataType> parse_precision(const std::string& name);
const char* precision_name(ir::DataType type);  // "int8", "uint16", "bfloat16", ...

// One node's precision: "TYPE" (activations and weight), "ACTIVATION,WEIGHT", or "float"; as
// JSON, that string or {"activation": TYPE, "weight": TYPE}.
NodePrecision parse_node_precision(const std::string& text);
NodePrecision parse_node_precision(const nlohmann::json& value, const std::string& node);

// The extra options of mixed precision, each into `config` (error naming the entry that is wrong):
// NodePrecision ({node: precision}), TensorQuantOverrides ({tensor: [{quant_type, symmetric,
// reduce_range, axis, rmin, rmax, scale, zero_point, convert: {quant_type, symmetric, rmin, rmax,
// scale, zero_point, recv_nodes}}]}), MixedPrecisionTensor ({type: [tensor names]}).
void apply_node_precision(QuantConfig& config, const nlohmann::json& value);
void apply_tensor_quant_overrides(QuantConfig& config, const nlohmann::json& value);
void apply_mixed_precision_tensor(QuantConfig& config, const nlohmann::json& value);
// AutoMixprecision: Quark's keys of include_auto_mp, checked one by one.
void apply_auto_mixprecision(AutoMixprecision& auto_mp, const nlohmann::json& value);

// Whether the config asks for any per-node or per-tensor precision.
bool has_mixed_precision(const QuantConfig& config);

// Error (one line, naming the node or tensor) for a precision the config's format cannot write:
// QOperator takes none, FixNeuron int8 only, QDQ no float16/bfloat16, power-of-two scales no
// float types, enable_dpu int8/uint8/int16 activations and int8 weights.
void check_mixed_precision(const QuantConfig& config);

// Where nodes of two precisions meet: an activation takes the highest precision among the
// quantized nodes that produce or read it (through tensors that share its parameters; data
// movement nodes have no precision of their own), tensors that share parameters follow their
// provider, and with dual_quant_nodes the readers that want a lower precision get a conversion
// to it. Biases whose input or weight became a float or 32-bit type are quantized like weights.
void settle_precisions(Plan& plan, const ir::Graph& graph, const QuantConfig& config);

// TensorQuantOverrides (and MixedPrecisionTensor) on the plan, after settle_precisions. Error
// naming a tensor the model does not have or a key its role cannot take; a tensor the plan does
// not quantize is a warning in plan.warnings.
void apply_tensor_overrides(Plan& plan, const ir::Graph& graph, const QuantConfig& config);

}  // namespace onnxptq::quant
