// convert_bias_int32_to_int16 (Quark's tool, its Int16Bias option): the int32 bias of each Conv,
// ConvTranspose, Gemm and normalization that a DequantizeLinear dequantizes is stored as int16
// with the same scale, values clipped to int16 as Quark clips them. ONNX's DequantizeLinear takes
// int16 from opset 21; below it the bias's DequantizeLinear becomes com.microsoft's, which takes
// int16 at any opset (Quark converts the model to opset 21 instead, which libonnx's version
// converter, stopping at opset 17 here, cannot do).
#include <algorithm>
#include <set>

#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "tools/convert.h"
#include "tools/qdq_nodes.h"

namespace onnxptq::tools {

namespace {

const std::set<std::string>& bias_ops() {
  static const std::set<std::string> ops = {
      "Conv", "ConvTranspose", "Gemm", "LayerNormalization", "InstanceNormalization", "BatchNormalization"};
  return ops;
}

// The int32 bias DequantizeLinear nodes of the graph: an initializer data input and int32 zero point.
std::vector<ir::Node*> int32_bias_dequantizers(const ir::Graph& g) {
  std::vector<ir::Node*> out;
  for (ir::Node* n : g.topological_order()) {
    if (!bias_ops().count(n->op_type) || n->inputs().size() < 3) continue;
    ir::Node* dq = dequantize_producer(n->input(2));
    if (!dq || std::find(out.begin(), out.end(), dq) != out.end()) continue;
    const ir::Value* data = dq->input(0);
    if (!data->has_initializer() || data->initializer().dtype() != ir::DataType::Int32) continue;
    const ir::Tensor* zp = constant_tensor(dq->input(2));
    if (zp && zp->dtype() != ir::DataType::Int32) continue;
    out.push_back(dq);
  }
  return out;
}

ir::Tensor narrowed(const ir::Tensor& t, size_t& clipped) {
  std::vector<int16_t> out;
  for (int32_t v : t.values<int32_t>()) {
    int32_t c = std::clamp<int32_t>(v, -32768, 32767);
    clipped += c != v;
    out.push_back(static_cast<int16_t>(c));
  }
  return ir::Tensor::from_values<int16_t>(t.dims(), out);
}

}  // namespace

ir::Model bias_int32_to_int16(const ir::Model& model, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  if (int32_bias_dequantizers(*m.graph).empty())
    throw Error(
        "the model has no int32 bias dequantized for a Conv, ConvTranspose, Gemm or normalization: "
        "nothing to convert");
  ir::Graph& g = *m.graph;
  size_t converted = 0, clipped = 0, contrib = 0;
  for (ir::Node* dq : int32_bias_dequantizers(g)) {
    passes::set_constant_input(m, dq, 0, narrowed(dq->input(0)->initializer(), clipped));
    if (const ir::Tensor* zp = constant_tensor(dq->input(2)))
      passes::set_constant_input(m, dq, 2, narrowed(*zp, clipped));
    if ((dq->domain.empty() || dq->domain == "ai.onnx") && m.opset("") < 21) {
      dq->domain = "com.microsoft";
      ++contrib;
    }
    ++converted;
  }
  if (contrib) {
    if (m.opset("com.microsoft") == 0) m.set_opset("com.microsoft", 1);
    result.log.push_back(std::to_string(contrib) + " bias DequantizeLinear nodes made com.microsoft's (opset " +
                         std::to_string(m.opset("")) + " < 21: ONNX's takes no int16)");
  }
  remove_unused_initializers(g);
  result.changed = converted;
  result.log.push_back(std::to_string(converted) + " int32 biases stored as int16");
  if (clipped)
    result.log.push_back("warning: " + std::to_string(clipped) + " bias values were beyond int16 and clipped");
  return m;
}

}  // namespace onnxptq::tools
