// ONNX Runtime's quant_pre_process (`onnxptq preprocess`): a float model prepared for
// quantization as a new model (shape inference, the opset upgrade, the graph optimisation passes),
// after vai_q_onnx's model format conversions when asked. The input model is never modified.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "onnxptq/model.h"

namespace onnxptq {

struct PreprocessOptions {
  bool skip_optimization = false;    // shape inference and the opset upgrade only
  bool skip_onnx_shape = false;      // no ONNX (libonnx) shape inference
  bool skip_symbolic_shape = false;  // no engine run on a sample to type what static inference cannot
  bool guess_output_rank = false;    // outputs nothing could type get the type and rank of the node's input 0
  int64_t target_opset = 13;         // models of a lower default-domain opset are converted to it
  // Input shapes of the sample run, by input name (a dynamic dimension not given: 1 in front, else 64).
  std::map<std::string, std::vector<int64_t>> input_shapes{};
  // When not empty: only these passes, by name, in this order, instead of the default pipeline.
  std::vector<std::string> passes{};
  // vai_q_onnx 1.16's conversions, run first (as its quantize_static runs them): every float16
  // tensor and type made float32; 4-D NCHW image inputs declared NHWC, a Transpose moved into the
  // graph.
  bool convert_fp16_to_fp32 = false;
  bool convert_nchw_to_nhwc = false;
  // What the conversions did or left alone and why, a line at a time, once both have run.
  std::function<void(const std::string&)> conversion_log{};
  // One line per thing a pass did, once the passes have run.
  std::function<void(const std::string&)> pass_log{};
};

// The checks made before any model is read: Error naming an unknown pass in options.passes (and
// listing the passes there are).
void check_preprocess_options(const PreprocessOptions& options);

// The prepared model, marked as quant_pre_process marks it (metadata onnx.quant.pre_process =
// onnxruntime.quant) so that ONNX Runtime's quantizer knows it was pre-processed. Error naming the
// node or conversion a pass cannot handle.
Model preprocess(const Model& model, const PreprocessOptions& options = {});

}  // namespace onnxptq
