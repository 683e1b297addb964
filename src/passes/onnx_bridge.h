// libonnx (the reference implementation of the format) on onnxptq's IR: its shape inference, its
// version converter and its checker. Large initializers go to libonnx as graph inputs of the same
// type and shape (their values are not needed), so models over 2 GB fit in one protobuf.
#pragma once

#include <cstdint>
#include <string>

#include "ir/model.h"

namespace onnxptq::passes {

// libonnx's shape inference (data propagation on, node errors not fatal) on a copy of `model`.
// Returns that copy with every value's type as ONNX inferred it (value_info filled); tensors
// bigger than the 2 GB-safe threshold appear as graph inputs there. Error with libonnx's message
// when it gives up on the whole model (inconsistent declared types).
ir::Model onnx_infer_shapes(const ir::Model& model);

// libonnx's version converter from the model's default-domain opset to `target`, then libonnx's
// checker on the result (when the original passes it). Nodes whose adapters need input shapes read them from
// value_info, so ranks must be known first. Error naming the conversion and libonnx's message on failure.
ir::Model onnx_convert_version(const ir::Model& model, int64_t target);

// libonnx's checker (full check: with shape inference). Error with its message.
void onnx_check_model(const ir::Model& model);

// Whether libonnx has a schema for `op_type` in the default domain or ai.onnx.ml, at any opset.
bool onnx_knows_op(const std::string& op_type);

}  // namespace onnxptq::passes
