#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "ir/model.h"
#include "tools/inspect.h"

namespace onnxptq::cli {

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's IR version, opsets, inputs and outputs, op types and parameters");
  cmd->add_option("MODEL", opts->model, "ONNX model file")->required();
  cmd->add_flag("--json", opts->json, "Print the same facts as one JSON object");
  cmd->callback([opts] {
    ir::Model model = ir::load_model(opts->model);
    auto summary = tools::inspect_model(model);
    if (opts->json)
      std::cout << summary.dump(2) << "\n";
    else
      std::cout << tools::format_inspection(summary);
  });
}

}  // namespace onnxptq::cli
