// Writing a quantized model from a float model and its plan (with parameters assigned).
#pragma once

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// The model in the config's format. The float model is not changed. Graph inputs and outputs
// keep their names and float types. Error when the model's opset cannot hold the plan
// (per-channel parameters need opset 13).
ir::Model export_model(const ir::Model& model, const Plan& plan, const QuantConfig& config);

// QuantFormat.QDQ (ORT's layout and names, shared/spec/ort_quantization.md §4.4-4.8, 4.12):
// weights stored quantized with a DequantizeLinear (or float with a Q/DQ pair under
// AddQDQPairToWeight), int32 biases with a DequantizeLinear writing the bias's name, and a
// QuantizeLinear/DequantizeLinear pair after every quantized activation (one per consumer under
// DedicatedQDQPair). 16-bit types use opset 21's ops, or com.microsoft's below opset 21.
ir::Model export_qdq(const ir::Model& model, const Plan& plan, const QuantConfig& config);

}  // namespace onnxptq::quant
