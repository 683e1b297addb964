// GPTQ over a quantization plan (Quark for ONNX's UseGPTQ, and MatMulNBits' Algorithm GPTQ): for
// each MatMul whose B [K, N] is a constant weight the plan quantizes to an integer type (and,
// beyond Quark, each Gemm with transA 0 and such a B, [N, K] with transB 1), in graph order, the
// Hessian H = 2/n X^T X of its input X (reshaped [-1, K]) over every calibration sample, then
// GPTQ's integers (gptq_core.h) on the plan's scales and zero points replace the plan's
// (TensorPlan::data) when they give a lower layer output error than the plan's rounding.
//
// X is the layer's input as the quantized model computes it (activations fake-quantized by the
// plan, the MatMuls before it already rounded by GPTQ), as Quark reads it from its quantized
// model; for MatMulNBits (weight-only, activations float) it is the float model's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "finetune/sample_store.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"
#include "quant/quantize.h"

namespace onnxptq::finetune {

// GPTQ of `plan`'s MatMul weights for `model` on `samples`, with config.gptq's BlockSize,
// PercDamp and ActOrder, on the threads of config.calib. One report a MatMul (pass "gptq"):
// loss_before the output error (mean square per element) of the plan's rounding, loss_after
// GPTQ's, kept when lower. `log` gets one line a layer.
std::vector<quant::FinetunedLayer> gptq_plan(const ir::Model& model, quant::Plan& plan,
                                             const quant::QuantConfig& config, const SampleInputs& samples,
                                             const std::function<void(const std::string&)>& log = {});

}  // namespace onnxptq::finetune
