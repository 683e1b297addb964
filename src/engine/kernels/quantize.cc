#include "engine/kernel.h"

namespace onnxptq::engine {

void register_quantize_kernels(KernelRegistry&) {}

}  // namespace onnxptq::engine
