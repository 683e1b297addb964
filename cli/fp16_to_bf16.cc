// `onnxptq fp16-to-bf16`: Quark's convert_fp16_to_bf16, the model quantized with the BF16 preset.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_fp16_to_bf16_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  auto format = std::make_shared<std::string>("with_cast");
  CLI::App* cmd = app.add_subcommand(
      "fp16-to-bf16", "Convert a float16 model to bfloat16 with the BF16 preset (Quark convert_fp16_to_bf16)");
  cmd->add_option("--format", *format,
                  "with_cast (default: Cast pairs ONNX Runtime runs), customqdq (com.amd.quark Q/DQ ops), "
                  "simulate_bf16 (weights rounded, no Q/DQ); bf16 is refused");
  add_model_tool(cmd, a, [format](const Model& model) { return fp16_to_bf16(model, parse_bf16_format(*format)); });
  cmd->parse_complete_callback([format] { parse_bf16_format(*format); });
}

}  // namespace onnxptq::cli
