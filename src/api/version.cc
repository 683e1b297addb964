#include "onnxptq/onnxptq.h"

namespace onnxptq {

const char* version() { return ONNXPTQ_VERSION; }

}  // namespace onnxptq
