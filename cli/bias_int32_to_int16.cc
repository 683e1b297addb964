// `onnxptq bias-int32-to-int16`: Quark's convert_bias_int32_to_int16.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_bias_int32_to_int16_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bias-int32-to-int16",
      "Store int32 biases as int16, clipped; below opset 21 with com.microsoft DequantizeLinear (Quark "
      "convert_bias_int32_to_int16)");
  add_model_tool(cmd, a, [](const Model& model) { return bias_int32_to_int16(model); });
}

}  // namespace onnxptq::cli
