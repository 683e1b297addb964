// InstanceNormalization into Quark's com.amd.quark ExtendedInstanceNormalization, the NPU's
// bfloat16 instance norm (Quark SimulateDPU's convert_instance_norm_to_dpu_version, extra option
// ConvertInstanceNormToDPUVersion; the engine's kernel is engine/kernels/norm_pool_dpu_instance.cc).
#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As Quark: each InstanceNormalization the quantizer takes keeps its name, inputs, outputs and
// epsilon (1e-5 when absent) and changes operator. It stays in place (Quark appends it at the
// end of the node list, which changes no value).
bool convert_instance_norm_to_dpu_version(ir::Model& model, PassContext& context) {
  size_t changed = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "InstanceNormalization") || !context.should_quantize(*node)) continue;
    const float epsilon = node->attr_float("epsilon", 1e-5f);
    node->op_type = "ExtendedInstanceNormalization";
    node->domain = "com.amd.quark";
    node->set_attribute(ir::Attribute::of_float("epsilon", epsilon));
    ++changed;
  }
  if (!changed) return false;
  if (model.opset("com.amd.quark") < 1) model.set_opset("com.amd.quark", 1);
  context.log.push_back("convert_instance_norm_to_dpu_version: " + std::to_string(changed) +
                        " InstanceNormalization nodes into com.amd.quark ExtendedInstanceNormalization");
  return true;
}

}  // namespace onnxptq::passes
