// Test support: compare two ONNX models field by field, independently of onnxptq's IR.
#pragma once

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>

namespace onnxptq::testing {

// Reads a ModelProto straight with protobuf (no onnxptq code involved).
onnx::ModelProto read_model_proto(const std::filesystem::path& path);

// Rewrites every TensorProto in the message (subgraphs, attributes, functions included) so its
// data sits in raw_data, whichever typed field held it: an encoding difference, not a change.
void normalize_tensor_encoding(google::protobuf::Message& message);

// Empty when `a` and `b` are equal field by field after normalising both (an unset field
// equals its default value); otherwise protobuf's report of the differences.
std::string model_difference(onnx::ModelProto a, onnx::ModelProto b);

}  // namespace onnxptq::testing
