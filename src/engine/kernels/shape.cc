#include "engine/kernel.h"

namespace onnxptq::engine {

void register_shape_kernels(KernelRegistry&) {}

}  // namespace onnxptq::engine
