// Turns a BatchNormalization on a 4-D input into a 1x1 depthwise Conv (vai_q_onnx ConvertBNToConv).
#include <cmath>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// As vai_q_onnx 1.16's ConvertBNToConv (optimize.py): exactly 5 inputs, epsilon read from the
// attribute only (no attribute: left alone, ONNX's default is not applied), parameters from
// constants, W = mult as [C,1,1,1] with mult = gamma / sqrt(var + eps), B = beta - mean * mult; the
// Conv takes the BN's name and output, its weights "<out>weights" and "<out>bias", group = C,
// kernel_shape and strides [1,1]. The input's rank is read from its type wherever it is known
// (vai_q_onnx looks in value_info only, so it skips a BN right on a graph input: converting that
// one too is harmless).
bool convert_bn_to_conv(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t converted = 0;
  for (ir::Node* bn : nodes_in_order(graph)) {
    if (!is_op(bn, "BatchNormalization") || bn->inputs().size() != 5 || !bn->output(0) || !bn->input(0)) continue;
    if (bn->outputs().size() > 1 && bn->output(1)) continue;  // training mode: running statistics
    if (!context.should_quantize(*bn)) continue;  // vai_q_onnx's should_quantize_node (dpu.h)
    if (bn->attr_int("training_mode", 0) != 0 || !bn->find_attribute("epsilon")) continue;
    if (model.opset("") < 9 && bn->attr_int("spatial", 1) != 1) continue;
    const ir::ValueType& type = bn->input(0)->type;
    if (!type.is_tensor() || !type.has_shape || type.shape.size() != 4 || type.elem_type != ir::DataType::Float)
      continue;
    const ir::Tensor* p[4];
    bool ok = true;
    for (size_t i = 0; i < 4; ++i) {
      p[i] = float_constant_of(bn->input(i + 1));
      ok = ok && p[i] && p[i]->rank() == 1 && p[i]->size() == p[0]->size();
    }
    if (!ok) continue;
    float eps = bn->attr_float("epsilon", 0.0f);
    int64_t channels = p[0]->size();
    std::vector<float> weight(channels), bias(channels);
    auto gamma = p[0]->values<float>(), beta = p[1]->values<float>(), mean = p[2]->values<float>(),
         var = p[3]->values<float>();
    for (int64_t c = 0; c < channels; ++c) {
      weight[c] = gamma[c] / std::sqrt(var[c] + eps);
      bias[c] = beta[c] - mean[c] * weight[c];
    }
    ir::Value* x = bn->input(0);
    ir::Value* out = bn->output(0);
    std::vector<ir::Value*> params(bn->inputs().begin() + 1, bn->inputs().end());
    std::string name = bn->name;
    ir::Value* w = add_initializer(model, graph, out->name() + "weights",
                                   ir::Tensor::from_values<float>({channels, 1, 1, 1}, weight));
    ir::Value* b =
        add_initializer(model, graph, out->name() + "bias", ir::Tensor::from_values<float>({channels}, bias));
    ir::Node* conv = graph.insert_node_before(bn, "Conv", {x, w, b}, {}, name);  // keeps the file order
    graph.remove_node(bn);
    graph.set_node_output(conv, 0, out);
    conv->set_attribute(ir::Attribute::of_int("group", channels));
    conv->set_attribute(ir::Attribute::of_ints("kernel_shape", {1, 1}));
    conv->set_attribute(ir::Attribute::of_ints("strides", {1, 1}));
    // The parameters go with the BN when nothing else reads them.
    for (ir::Value* v : params)
      if (v->uses().empty() && !graph.is_output(v) && v->has_initializer()) {
        graph.remove_input(v);
        graph.remove_value(v);
      }
    ++converted;
  }
  if (converted)
    context.log.push_back("convert_bn_to_conv: " + std::to_string(converted) + " BatchNormalization nodes to Conv");
  return converted > 0;
}

}  // namespace onnxptq::passes
