// `onnxptq block-to-standard-ops`: Quark's BFP / MX nodes written as standard ONNX ops.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_block_to_standard_ops_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand(
      "block-to-standard-ops",
      "Write every com.amd.quark BFPQuantizeDequantize / MXQuantizeDequantize node as standard ONNX ops computing "
      "the same values bit for bit, so that ONNX Runtime runs the model without Quark's custom-op library");
  add_model_tool(cmd, a, [](const Model& model) { return block_to_standard_ops(model); });
}

}  // namespace onnxptq::cli
