// `onnxptq a8w8-npu-to-cpu`: Quark's convert_a8w8_npu_to_a8w8_cpu, 8-bit biases made int32.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_a8w8_npu_to_cpu_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand("a8w8-npu-to-cpu",
                                     "Make the 8-bit biases of an A8W8 NPU model int32 in units of s_x * s_w, as ONNX "
                                     "Runtime's CPU kernels take them (Quark convert_a8w8_npu_to_a8w8_cpu)");
  add_model_tool(cmd, a, [](const Model& model) { return a8w8_npu_to_cpu(model); });
}

}  // namespace onnxptq::cli
