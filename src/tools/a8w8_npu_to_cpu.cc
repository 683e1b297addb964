// convert_a8w8_npu_to_a8w8_cpu (Quark's tool): an A8W8 model for the NPU stores each Conv,
// ConvTranspose and Gemm bias as an 8-bit weight of its own scale (Int32Bias false); ONNX
// Runtime's CPU kernels want an int32 bias in units of s_x * s_w. Each such bias is dequantized and
// quantized again that way (quant::quantize_bias, ORT's rule: round half to even, clipped to int32;
// Quark's tool truncates toward zero and reads per-tensor scales only).
#include <algorithm>

#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "quant/qdq_nodes.h"
#include "quant/tensor_quant.h"
#include "tools/convert.h"

namespace onnxptq::tools {

ir::Model a8w8_npu_to_cpu(const ir::Model& model, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  ir::Graph& g = *m.graph;
  size_t dequantize_nodes = 0, converted = 0, clipped = 0;
  std::vector<ir::Node*> replaced;  // the 8-bit bias DequantizeLinear nodes
  for (const auto& node : g.nodes()) dequantize_nodes += is_dequantize_node(*node);
  if (dequantize_nodes == 0) throw Error("the model has no DequantizeLinear node: it is not a quantized (QDQ) model");
  const int64_t opset = m.opset("");
  for (ir::Node* n : passes::nodes_in_order(g)) {
    if (n->op_type != "Conv" && n->op_type != "ConvTranspose" && n->op_type != "Gemm") continue;
    if (n->inputs().size() < 3) continue;
    ir::Node* x_dq = dequantize_producer(n->input(0));
    ir::Node* w_dq = dequantize_producer(n->input(1));
    ir::Node* b_dq = dequantize_producer(n->input(2));
    if (!x_dq || !w_dq || !b_dq) continue;
    std::optional<QdqParams> px = qdq_params(*x_dq), pw = qdq_params(*w_dq), pb = qdq_params(*b_dq);
    const ir::Tensor* b = constant_tensor(b_dq->input(0));
    if (!px || !pw || !pb || !b || px->params.size() != 1 || pb->type == ir::DataType::Int32) continue;
    if (n->op_type == "Gemm" && n->attr_float("beta", 1.0f) != 1.0f) continue;  // the bias's scale would hold beta
    const size_t channels = static_cast<size_t>(b->size());
    if (b->rank() != 1 || (pw->params.size() != 1 && pw->params.size() != channels)) continue;
    if (pw->params.size() > 1 && opset < 13)
      throw Error("a8w8_npu_to_cpu: " + describe_node(*n) + " has per-channel weights; its int32 bias needs a " +
                  "DequantizeLinear with axis, which needs opset 13 (the model has " + std::to_string(opset) + ")");
    std::optional<int64_t> b_axis = pb->params.size() > 1 ? std::optional<int64_t>(0) : std::nullopt;
    ir::Tensor bias = quant::dequantize_tensor(*b, pb->params, b_axis);
    quant::QuantizedBias q =
        quant::quantize_bias(bias, px->params[0].scale, pw->params, quant::bias_options_of(quant::Tool::quark));
    clipped += q.clipped;
    std::vector<float> scales(q.scales.begin(), q.scales.end());
    std::vector<int64_t> dims =
        scales.size() > 1 ? std::vector<int64_t>{static_cast<int64_t>(scales.size())} : std::vector<int64_t>{};
    const std::string base = n->input(2)->name();
    ir::Value* data = passes::add_initializer(m, g, base + "_int32", std::move(q.data));
    ir::Value* scale =
        passes::add_initializer(m, g, base + "_int32_scale", ir::Tensor::from_values<float>(dims, scales));
    ir::Value* zp = passes::add_initializer(m, g, base + "_int32_zero_point", ir::Tensor(ir::DataType::Int32, dims));
    ir::Value* out = g.add_unique_value(base + "_int32_DequantizeLinear_Output");
    ir::Node* dq = g.insert_node_before(n, "DequantizeLinear", {data, scale, zp}, {out},
                                        g.fresh_name(base + "_int32_DequantizeLinear"));
    if (scales.size() > 1) dq->set_attribute(ir::Attribute::of_int("axis", 0));
    g.set_node_input(n, 2, out);
    if (std::find(replaced.begin(), replaced.end(), b_dq) == replaced.end()) replaced.push_back(b_dq);
    ++converted;
  }
  if (converted == 0)
    throw Error(
        "no Conv, ConvTranspose or Gemm reads a dequantized input, weight and 8- or 16-bit bias: "
        "nothing to convert (is it an A8W8 NPU model, quantized with Int32Bias false?)");
  for (ir::Node* old : replaced) {
    ir::Value* out = old->output(0);
    if (!out->uses().empty() || g.is_output(out)) continue;  // still read by another node
    g.remove_node(old);
    g.remove_value(out);
  }
  remove_unused_initializers(g);
  g.sort_nodes();
  result.changed = converted;
  result.log.push_back(std::to_string(converted) + " biases made int32 in units of s_x * s_w");
  if (clipped) result.log.push_back("warning: " + std::to_string(clipped) + " biases had values beyond int32, clipped");
  return m;
}

}  // namespace onnxptq::tools
