#include "engine/value.h"

#include "onnxptq/error.h"

namespace onnxptq::engine {

Value Value::sequence(DataType elem_type, std::vector<Tensor> items) {
  Value v;
  v.kind_ = Kind::Sequence;
  v.elem_type_ = elem_type;
  v.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::Optional;
  return v;
}

Value Value::some(Value element) {
  if (element.is_optional()) throw Error("an optional cannot hold an optional");
  Value v;
  v.kind_ = Kind::Optional;
  v.element_ = std::make_shared<const Value>(std::move(element));
  return v;
}

const Tensor& Value::tensor() const {
  if (kind_ != Kind::Tensor) throw Error("expected a tensor, got " + describe());
  return tensor_;
}

Tensor& Value::mutable_tensor() {
  if (kind_ != Kind::Tensor) throw Error("expected a tensor, got " + describe());
  return tensor_;
}

DataType Value::elem_type() const {
  if (kind_ != Kind::Sequence) throw Error("expected a sequence, got " + describe());
  return elem_type_;
}

const std::vector<Tensor>& Value::items() const {
  if (kind_ != Kind::Sequence) throw Error("expected a sequence, got " + describe());
  return *items_;
}

bool Value::has_element() const {
  if (kind_ != Kind::Optional) throw Error("expected an optional, got " + describe());
  return element_ != nullptr;
}

const Value& Value::element() const {
  if (!has_element()) throw Error("the optional has no element");
  return *element_;
}

std::string Value::describe() const {
  switch (kind_) {
    case Kind::Tensor:
      return "a " + std::string(ir::data_type_name(tensor_.dtype())) + " tensor " + ir::dims_to_string(tensor_.dims());
    case Kind::Sequence: {
      std::string type = elem_type_ == DataType::Undefined ? "" : std::string(ir::data_type_name(elem_type_)) + " ";
      return "a sequence of " + std::to_string(items_->size()) + " " + type + "tensors";
    }
    case Kind::Optional:
      return element_ ? "an optional holding " + element_->describe() : "an empty optional";
  }
  return "a value";
}

}  // namespace onnxptq::engine
