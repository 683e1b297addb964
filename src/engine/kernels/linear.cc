#include "engine/kernel.h"

namespace onnxptq::engine {

void register_linear_kernels(KernelRegistry&) {}

}  // namespace onnxptq::engine
