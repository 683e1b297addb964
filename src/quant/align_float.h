// Quark's align_quantize_info (quark/onnx/postprocess/refinement/refine.py): scale alignment on a plan whose
// parameters are assigned, for float scales (and power-of-two ones outside the NPU path, as Quark's
// ExtendedQDQQuantizer does): Concat, Pad, Transpose and Reshape inputs take their output's
// parameters, pool and Slice outputs their input's, and AdjustBiasScale requantizes int32 biases
// whose scale is no longer s_input * s_weight.
#pragma once

#include <string>
#include <vector>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// One tensor whose parameters a rule changed.
struct AlignChange {
  std::string rule;         // "AlignConcat", "AlignPool", ..., "AdjustBiasScale"
  std::string node;         // the node the rule looked at
  std::string tensor;       // the tensor whose parameters changed (a parameter provider, or a bias)
  double from = 0, to = 0;  // its (first) scale before and after
};

// The sweeps of align_quantize_info over `model`'s nodes in topological order, at most 5 (Quark's
// MaxLoopNum default; they stop when a sweep changes nothing), each rule in Quark's order and
// switched by config.align_* (unset: off) and config.adjust_bias_scale:
//   AlignConcat     Concat               output -> every activation input
//   AlignPool       MaxPool, AveragePool, GlobalAveragePool   input 0 -> every output
//   AlignPad        Pad                  output -> every activation input
//   AlignSlice      Slice                input 0 -> every output
//   AlignTranspose  Transpose            output -> input
//   AlignReshape    Reshape              output -> input
//   AdjustBiasScale Conv, ConvTranspose, Gemm: an int32 bias is quantized again from its float values
//                   with s_input * s_weight (* beta) when that changed (Quark rescales the rounded
//                   int32 values and truncates them: double rounding, documented in docs/options.md).
// Parameters are copied between parameter providers (Plan::provider), so tensors sharing them
// follow; weights and biases are never an alignment's target (Quark skips a DequantizeLinear
// without its QuantizeLinear). Returns every change, in order.
std::vector<AlignChange> align_float_scales(Plan& plan, const ir::Model& model, const QuantConfig& config);

}  // namespace onnxptq::quant
