// Quark's Int16Bias post-process (its convert_bias_int32_to_int16 tool) on the plan.
#include <algorithm>
#include <set>

#include "quant/post_process.h"

namespace onnxptq::quant {

size_t convert_biases_to_int16(Plan& plan, const ir::Model& model) {
  static const std::set<std::string> ops = {
      "Conv", "ConvTranspose", "Gemm", "LayerNormalization", "InstanceNormalization", "BatchNormalization"};
  size_t changed = 0;
  for (const auto& node : model.graph->nodes()) {
    const ir::Value* b = node->input(2);
    TensorPlan* t = ops.count(node->op_type) && b ? plan.find(b->name()) : nullptr;
    if (!t || t->role != Role::Bias || t->type != ir::DataType::Int32 || !t->data) continue;
    std::span<const int32_t> in = t->data->values<int32_t>();
    ir::Tensor out(ir::DataType::Int16, t->data->dims());
    std::span<int16_t> values = out.mutable_values<int16_t>();
    size_t clipped = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      int32_t v = std::clamp<int32_t>(in[i], -32768, 32767);  // np.clip, as Quark
      clipped += v != in[i];
      values[i] = static_cast<int16_t>(v);
    }
    t->data = std::move(out);
    t->type = ir::DataType::Int16;
    if (clipped)
      plan.warnings.push_back("Int16Bias: bias '" + t->name + "' has " + std::to_string(clipped) +
                              " values beyond int16 at its int32 scale: clipped");
    ++changed;
  }
  return changed;
}

}  // namespace onnxptq::quant
