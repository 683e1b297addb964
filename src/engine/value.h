// What the engine computes with: a tensor (nearly every value), a sequence of tensors, or an
// optional holding one of those or nothing (the ONNX types tensor, seq(tensor) and optional(...);
// https://onnx.ai/onnx/intro/concepts.html#input-output-data-types). Kernels of tensor ops never
// see the other kinds: the engine hands them the tensors alone (kernel.h, Kernel::run), and only
// the ops made for sequences and optionals, or that pass any value along (Identity, If, Loop,
// Scan), are ValueKernels. Hooks (observers, fake quantization) see tensors only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace onnxptq::engine {

using ir::DataType;
using ir::Tensor;

class Value {
 public:
  enum class Kind : uint8_t { Tensor, Sequence, Optional };

  Value() = default;
  Value(Tensor tensor) : tensor_(std::move(tensor)) {}  // NOLINT(google-explicit-constructor): a tensor is a value

  // A sequence of tensors of one element type; Undefined: not known yet (the first tensor put in
  // says it).
  static Value sequence(DataType elem_type, std::vector<Tensor> items);
  // An optional without an element, and one holding `element` (a tensor or a sequence).
  static Value none();
  static Value some(Value element);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_optional() const { return kind_ == Kind::Optional; }

  // Error saying what the value is instead, for each of these.
  const Tensor& tensor() const;
  Tensor& mutable_tensor();
  DataType elem_type() const;                // of a sequence
  const std::vector<Tensor>& items() const;  // of a sequence
  bool has_element() const;                  // of an optional
  const Value& element() const;              // of an optional that has one

  // "a float tensor [2,3]", "a sequence of 3 float tensors", "an empty optional", ...
  std::string describe() const;

 private:
  Kind kind_ = Kind::Tensor;
  Tensor tensor_;
  DataType elem_type_ = DataType::Undefined;
  std::shared_ptr<const std::vector<Tensor>> items_;  // shared: copies of a sequence are cheap
  std::shared_ptr<const Value> element_;              // an optional's; nullptr when it has none
};

}  // namespace onnxptq::engine
