// Cross-layer equalization (vai_q_onnx 1.16's equalization.py, Quark's CLE) and ReplaceClip6Relu:
// data-free rewrites of the float model's weights that run before calibration.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace onnxptq::passes {

// The extra_options of CLE, with quantize_static's defaults.
struct CleOptions {
  bool replace_clip6_relu = false;           // ReplaceClip6Relu: Clip(0, 6) -> Relu before the pairs are found
  int64_t steps = 1;                         // CLESteps: sweeps over all pairs; -1 adaptive (until converged)
  double total_layer_diff_threshold = 2e-7;  // CLETotalLayerDiffThreshold: adaptive mode stops at or below it
  bool scale_append_bias = true;             // CLEScaleAppendBias: the head's bias counts in its range
  bool scale_use_threshold = true;           // CLEScaleUseThreshold: channels with r_head + r_tail below
  double weight_threshold = 0.5;             //   CLEWeightThreshold keep scale 1
  std::string balance_method = "max";        // CLEBalanceMethod: "max" is the only method (Error otherwise)
  // Which nodes may be changed (the quantizer's node filter: op types, nodes_to_exclude); empty: all.
  std::function<bool(const ir::Node&)> quantizable;
};

// A head and a tail whose channels are joined through positively homogeneous nodes only.
struct ClePair {
  ir::Node* head = nullptr;        // Conv, ConvTranspose or Gemm: its output channels ...
  ir::Node* tail = nullptr;        // ... are the input channels of this Conv, ConvTranspose or Gemm
  std::vector<ir::Node*> between;  // Relu, LeakyRelu, Pad, ReduceMean (in order)
};

struct CleResult {
  std::vector<ClePair> pairs;
  // Per sweep: the sum over the equalized nodes of mean |W_before - W_after| (the adaptive
  // mode's convergence measure).
  std::vector<double> sweep_changes;
  bool changed = false;
};

// The pairs CLE equalizes, in graph order (as vai_q_onnx 1.16, with its bugs fixed: a
// Conv without a group attribute has group 1, Gemm may be a head, both nodes must be supported).
// Supported: constant float weights (through Identity), any group count, Gemm with transA = 0 as
// a tail and a bias C that is per column or scalar.
std::vector<ClePair> cle_find_pairs(const ir::Model& model, const CleOptions& options);

// ReplaceClip6Relu when options ask for it, then the CLE sweeps (vai_q_onnx's); the adaptive mode
// stops after 1000 sweeps at most (the reference has no bound). Error naming the option when one
// is out of range. (ReplaceClip6Relu without include_cle: call replace_clip6_relu alone.)
CleResult equalize_cross_layers(ir::Model& model, const CleOptions& options, PassContext& context);

// The two passes with the default options, as PassInfo functions.
bool cross_layer_equalization(ir::Model& model, PassContext& context);
// Every Clip whose min is 0 and max 6 (attributes before opset 11, constant inputs from 11)
// becomes a Relu of the same name and output; min and max constants left unused are removed.
bool replace_clip6_relu(ir::Model& model, PassContext& context);

const PassInfo& cross_layer_equalization_pass();
const PassInfo& replace_clip6_relu_pass();

}  // namespace onnxptq::passes
