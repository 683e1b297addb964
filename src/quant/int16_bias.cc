// Quark's Int16Bias post-process (its convert_bias_int32_to_int16 tool) on the plan.
#include <algorithm>

#include "quant/post_process.h"

namespace onnxptq::quant {

const std::set<std::string>& int16_bias_ops() {
  static const std::set<std::string> ops = {
      "Conv", "ConvTranspose", "Gemm", "LayerNormalization", "InstanceNormalization", "BatchNormalization"};
  return ops;
}

ir::Tensor clip_to_int16(const ir::Tensor& t, size_t& clipped) {
  std::vector<int16_t> out;
  for (int32_t v : t.values<int32_t>()) {
    const int32_t c = std::clamp<int32_t>(v, -32768, 32767);
    clipped += c != v;
    out.push_back(static_cast<int16_t>(c));
  }
  return ir::Tensor::from_values<int16_t>(t.dims(), out);
}

size_t convert_biases_to_int16(Plan& plan, const ir::Model& model) {
  size_t changed = 0;
  for (const ir::Node* node : model.graph->topological_order_with_bodies()) {  // the bodies' biases too
    const ir::Value* b = node->input(2);
    TensorPlan* t = int16_bias_ops().count(node->op_type) && b ? plan.find(b->name()) : nullptr;
    if (!t || t->role != Role::Bias || t->type != ir::DataType::Int32 || !t->data) continue;
    size_t clipped = 0;
    t->data = clip_to_int16(*t->data, clipped);
    t->type = ir::DataType::Int16;
    if (clipped)
      plan.warnings.push_back("Int16Bias: bias '" + t->name + "' has " + std::to_string(clipped) +
                              " values beyond int16 at its int32 scale: clipped");
    ++changed;
  }
  return changed;
}

}  // namespace onnxptq::quant
