// Quark's convert_bias_int32_to_int16 tool on a written QDQ model: int32 biases stored as int16
// (the quantizer's Int16Bias does the same on the plan, quant/post_process.h).
#include <algorithm>

#include "passes/rewrite.h"
#include "quant/export.h"
#include "quant/post_process.h"
#include "quant/qdq_nodes.h"

namespace onnxptq::quant {

Int16Biases store_biases_as_int16(ir::Model& model) {
  ir::Graph& g = *model.graph;
  std::vector<ir::Node*> dequantizers;  // each int32 bias DequantizeLinear once
  for (ir::Node* n : g.topological_order()) {
    if (!int16_bias_ops().count(n->op_type) || n->inputs().size() < 3) continue;
    ir::Node* dq = dequantize_producer(n->input(2));
    if (!dq || std::find(dequantizers.begin(), dequantizers.end(), dq) != dequantizers.end()) continue;
    const ir::Value* data = dq->input(0);
    if (!data->has_initializer() || data->initializer().dtype() != ir::DataType::Int32) continue;
    const ir::Tensor* zp = constant_tensor(dq->input(2));
    if (zp && zp->dtype() != ir::DataType::Int32) continue;
    dequantizers.push_back(dq);
  }
  Int16Biases out;
  for (ir::Node* dq : dequantizers) {
    passes::set_constant_input(model, dq, 0, clip_to_int16(dq->input(0)->initializer(), out.clipped));
    if (const ir::Tensor* zp = constant_tensor(dq->input(2)))
      passes::set_constant_input(model, dq, 2, clip_to_int16(*zp, out.clipped));
    if ((dq->domain.empty() || dq->domain == "ai.onnx") && model.opset("") < 21) {
      dq->domain = "com.microsoft";  // ONNX's DequantizeLinear takes int16 from opset 21
      ++out.contrib;
    }
    ++out.converted;
  }
  if (out.contrib && model.opset("com.microsoft") == 0) model.set_opset("com.microsoft", 1);
  remove_unused_initializers(g);
  return out;
}

}  // namespace onnxptq::quant
