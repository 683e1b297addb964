// What is read off a written quantized model (by Int16Bias after export, and by the model tools:
// remove_qdq, qdq_to_qop, the A8W8, U16U8 and bias converters, dump_model): its quantize and dequantize nodes in every
// format onnxptq writes (ONNX's and com.microsoft's QuantizeLinear/DequantizeLinear, Quark's Extended*, vai_q_onnx's
// Vitis*) and their constant parameters.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/model.h"
#include "qmath/params.h"

namespace onnxptq::quant {

bool is_quantize_node(const ir::Node& n);
bool is_dequantize_node(const ir::Node& n);

// The constant value of `v`: an initializer or a Constant node's tensor; nullptr otherwise.
const ir::Tensor* constant_tensor(const ir::Value* v);

// The constant parameters of a quantize or dequantize node: the integer type (its zero point's;
// without one, a dequantize node's input type, a quantize node's uint8 as ONNX says), one parameter per tensor or one
// per index of `axis` (ONNX's default axis 1, negative as written). nullopt when the scale or zero point is not a
// constant, the scale is not float32, or the type is not an integer type.
struct QdqParams {
  ir::DataType type = ir::DataType::UInt8;
  std::vector<qmath::ScaleZeroPoint> params;
  std::optional<int64_t> axis;  // set when there is more than one parameter
};
std::optional<QdqParams> qdq_params(const ir::Node& n);

// The DequantizeLinear reading `q` as its only use (q not a graph output), or nullptr.
ir::Node* single_dequantize_reader(const ir::Value* q);

// The node producing `v` when it is a dequantize node, or nullptr.
ir::Node* dequantize_producer(const ir::Value* v);

// "<op_type> '<name>'" for messages.
std::string describe_node(const ir::Node& n);

// Initializers nothing reads any more (parameters of removed nodes), and value_info of values gone.
void remove_unused_initializers(ir::Graph& graph);

}  // namespace onnxptq::quant
