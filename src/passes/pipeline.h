// Preparing a float model for quantization: shape inference, the opset upgrade, then the graph
// optimisation passes until none changes anything; and every pass found by its name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/model.h"
#include "passes/pass.h"

namespace onnxptq::passes {

// Every value gets a known element type and rank where it can (shape_inference.cc). Uses
// context.onnx_shape, engine_shape, guess_output_rank and input_shapes.
bool infer_shapes(ir::Model& model, PassContext& context);

// Default-domain opset below context.target_opset: the graph converted to it (libonnx's version
// converter, with onnxptq's adapters where libonnx's give other results), checked by libonnx's
// checker (opset_upgrade.cc). Error naming the conversion when it cannot be done.
bool upgrade_opset(ir::Model& model, PassContext& context);

struct PrepareOptions {
  bool skip_optimization = false;    // shapes and opset only
  bool skip_onnx_shape = false;      // no libonnx shape inference
  bool skip_symbolic_shape = false;  // no engine sample run to fill what static inference misses
  bool guess_output_rank = false;
  int64_t target_opset = 13;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // When not empty: only these passes (by name), in this order, instead of the default pipeline.
  std::vector<std::string> passes;
};

struct PrepareResult {
  bool changed = false;
  std::vector<std::string> log;  // one line per thing a pass did
};

// Shape inference, the opset upgrade, then (unless skip_optimization) the passes of
// optimization_passes() in their order, repeated until a round changes nothing (at most 8
// rounds), then shape inference again for the values the rewrites made.
PrepareResult prepare(ir::Model& model, const PrepareOptions& options);

// The passes prepare can run: infer_shapes, upgrade_opset and the optimisation passes.
const std::vector<PassInfo>& all_passes();
// The pass of that name; Error listing the known names otherwise.
const PassInfo& find_pass(std::string_view name);

}  // namespace onnxptq::passes
