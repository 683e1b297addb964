// Tensors: the public onnxptq/tensor.h, under the IR's names.
#pragma once

#include "ir/bytes.h"
#include "ir/data_type.h"
#include "onnxptq/tensor.h"

namespace onnxptq::ir {
using onnxptq::checked_element_count;
using onnxptq::data_type_of;
using onnxptq::dims_to_string;
using onnxptq::element_count;
using onnxptq::kMaxElements;
using onnxptq::Tensor;
}  // namespace onnxptq::ir
