// `onnxptq fp32-to-fp16`: Quark's convert_fp32_to_fp16 (onnxconverter-common's float16 converter).
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_fp32_to_fp16_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  auto options = std::make_shared<Fp16Options>();
  CLI::App* cmd = app.add_subcommand(
      "fp32-to-fp16",
      "Convert a float32 model to float16; blocked ops stay float32 between Casts (Quark convert_fp32_to_fp16)");
  cmd->add_flag("--keep-io-types", options->keep_io_types, "Keep the graph inputs and outputs float32");
  cmd->add_option("--op-block-list", options->op_block_list,
                  "Op types kept float32 (comma-separated; default: Quark's list, Resize, TopK, Min, Max, ...)")
      ->delimiter(',');
  cmd->add_option("--node-block-list", options->node_block_list, "Node names kept float32 (comma-separated)")
      ->delimiter(',');
  add_model_tool(cmd, a, [options](const Model& model) { return fp32_to_fp16(model, *options); });
}

}  // namespace onnxptq::cli
