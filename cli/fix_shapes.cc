// `onnxptq fix-shapes`: Quark's convert_dynamic_to_fixed and fix_shapes, dynamic dims made fixed and
// every tensor's shape stored.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_fix_shapes_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  auto shapes = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "fix-shapes",
      "Fix dynamic input (and output) dims and store every tensor's shape (Quark convert_dynamic_to_fixed, "
      "fix_shapes)");
  cmd->add_option("--fix-shapes", *shapes, "NAME:[d1,d2,...];... for inputs and outputs, e.g. 'input:[1,3,224,224]'")
      ->required();
  add_model_tool(cmd, a, [shapes](const Model& model) { return fix_shapes(model, parse_fix_shapes(*shapes)); });
  // The syntax is checked before the model is read.
  cmd->parse_complete_callback([shapes] { parse_fix_shapes(*shapes); });
}

}  // namespace onnxptq::cli
