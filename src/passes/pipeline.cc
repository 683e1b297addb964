// prepare: shape inference, opset upgrade and the optimisation passes until nothing changes.
#include "passes/pipeline.h"

#include "onnxptq/error.h"
#include "passes/model_format.h"
#include "passes/optimize.h"

namespace onnxptq::passes {
namespace {

const PassInfo kInferShapes{"infer_shapes",
                            "every value's element type and rank: ONNX inference, then an engine run on one sample",
                            &infer_shapes};
const PassInfo kUpgradeOpset{"upgrade_opset", "default-domain opset below the target converted to it", &upgrade_opset};

constexpr int kMaxRounds = 8;

PassContext context_of(const PrepareOptions& options) {
  PassContext context;
  context.target_opset = options.target_opset;
  context.onnx_shape = !options.skip_onnx_shape;
  context.engine_shape = !options.skip_symbolic_shape;
  context.guess_output_rank = options.guess_output_rank;
  context.input_shapes = options.input_shapes;
  return context;
}

}  // namespace

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = [] {
    std::vector<PassInfo> all{kInferShapes, kUpgradeOpset};
    for (const PassInfo& p : optimization_passes()) all.push_back(p);
    for (const PassInfo& p : optional_optimization_passes()) all.push_back(p);
    for (const PassInfo& p : model_format_passes()) all.push_back(p);
    return all;
  }();
  return passes;
}

const PassInfo& find_pass(std::string_view name) {
  std::string known;
  for (const PassInfo& p : all_passes()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw Error("unknown pass '" + std::string(name) + "' (passes: " + known + ")");
}

PrepareResult prepare(ir::Model& model, const PrepareOptions& options) {
  PassContext context = context_of(options);
  PrepareResult result;
  auto run = [&](const PassInfo& pass) {
    bool changed = pass.run(model, context);
    result.changed = result.changed || changed;
    return changed;
  };
  if (!options.passes.empty()) {
    std::vector<const PassInfo*> chosen;
    for (const std::string& name : options.passes) chosen.push_back(&find_pass(name));  // all named before any runs
    for (const PassInfo* pass : chosen) run(*pass);
  } else {
    if (context.onnx_shape || context.engine_shape || context.guess_output_rank) run(kInferShapes);
    // The converter's new nodes (Constant inputs, Flatten/Reshape around Softmax) get types too.
    if (run(kUpgradeOpset) && (context.onnx_shape || context.engine_shape)) run(kInferShapes);
    if (!options.skip_optimization) {
      bool any = false;
      for (int round = 0; round < kMaxRounds; ++round) {
        bool changed = false;
        for (const PassInfo& pass : optimization_passes()) changed = run(pass) || changed;
        any = any || changed;
        if (!changed) break;
      }
      if (any && (context.onnx_shape || context.engine_shape)) run(kInferShapes);
    }
  }
  result.log = std::move(context.log);
  return result;
}

}  // namespace onnxptq::passes
