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
  cmd->add_option("--fix-shapes", *shapes,
                  "NAME:[d1,d2,...];... for inputs and outputs, e.g. 'input:[1,3,224,224]' (without it, every input "
                  "must be fixed already: the shapes of the tensors are stored)");
  auto parsed = [shapes] {
    return shapes->empty() ? std::map<std::string, std::vector<int64_t>>{} : parse_fix_shapes(*shapes);
  };
  add_model_tool(cmd, a, [parsed](const Model& model) { return fix_shapes(model, parsed()); });
  cmd->parse_complete_callback([parsed] { parsed(); });  // the syntax is checked before the model is read
}

}  // namespace onnxptq::cli
