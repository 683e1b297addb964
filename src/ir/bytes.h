// Tensor storage: the public onnxptq/bytes.h, under the IR's name.
#pragma once

#include "onnxptq/bytes.h"

namespace onnxptq::ir {
using onnxptq::Bytes;
}  // namespace onnxptq::ir
