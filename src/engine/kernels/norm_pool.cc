#include "engine/kernel.h"

namespace onnxptq::engine {

void register_norm_pool_kernels(KernelRegistry&) {}

}  // namespace onnxptq::engine
