#include "engine/kernel.h"

namespace onnxptq::engine {

void register_elementwise_kernels(KernelRegistry&) {}

}  // namespace onnxptq::engine
