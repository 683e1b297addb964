// Rounds Clip's bounds to the DPU's integers in [-128, 127] (Quark SimulateDPU's
// convert_clip_to_dpu_version, extra option ConvertClipToDPUVersion).
#include <algorithm>
#include <cmath>
#include <optional>

#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// Python's round (half to even) of the bound, then clamped to the int8 range, as float32.
float dpu_bound(float value) {
  return static_cast<float>(std::clamp(std::nearbyint(static_cast<double>(value)), -128.0, 127.0));
}

}  // namespace

// As Quark: a Clip whose bounds are initializers (input 1 and 2, opset 11 and later) gets them
// rounded and clamped; a missing bound becomes -128 (min) or 127 (max). Bounds given as
// attributes (below opset 11) or computed by other nodes are left alone, as Quark does, with a
// line saying so. Quark writes the rounded value into a shared initializer in place; here a
// shared one is copied so its other readers keep their value.
bool convert_clip_to_dpu_version(ir::Model& model, PassContext& context) {
  if (model.opset("") < 11) return false;
  size_t changed = 0;
  for (ir::Node* clip : nodes_in_order(*model.graph)) {
    if (!is_op(clip, "Clip") || !context.should_quantize(*clip)) continue;
    std::optional<float> bounds[2];
    bool constant = true;
    for (size_t i = 1; i <= 2; ++i) {
      const ir::Value* v = clip->input(i);
      if (!v) continue;
      const ir::Tensor* t = v->has_initializer() ? float_constant_of(v) : nullptr;
      if (!t || t->size() != 1) {
        constant = false;
        break;
      }
      bounds[i - 1] = t->values<float>()[0];
    }
    if (!constant) {
      context.log.push_back("convert_clip_to_dpu_version: Clip " + clip->name +
                            " keeps its bounds (they are not initializers)");
      continue;
    }
    const float fallback[2] = {-128.0f, 127.0f};
    for (size_t i = 1; i <= 2; ++i) {
      float dpu = bounds[i - 1] ? dpu_bound(*bounds[i - 1]) : fallback[i - 1];
      if (bounds[i - 1] && *bounds[i - 1] == dpu) continue;
      set_constant_input(model, clip, i, ir::Tensor::from_values<float>({}, std::vector<float>{dpu}));
    }
    ++changed;
  }
  if (changed) context.log.push_back("convert_clip_to_dpu_version: " + std::to_string(changed) + " Clip nodes");
  return changed > 0;
}

}  // namespace onnxptq::passes
