// Types of the public API. Tensors are the library's own: a data type, dims and shared,
// immutable-once-shared storage (see ir/tensor.h for construction and access).
#pragma once

#include "ir/data_type.h"
#include "ir/tensor.h"

namespace onnxptq {

using DataType = ir::DataType;
using Tensor = ir::Tensor;

}  // namespace onnxptq
