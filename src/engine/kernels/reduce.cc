#include "engine/kernel.h"

namespace onnxptq::engine {

void register_reduce_kernels(KernelRegistry&) {}

}  // namespace onnxptq::engine
