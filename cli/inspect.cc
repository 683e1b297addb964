// `onnxptq inspect`: a model's IR version, opsets, inputs and outputs, op types and parameters.
#include "onnxptq/inspect.h"

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "onnxptq/model.h"

namespace onnxptq::cli {

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("inspect", "Show a model's IR version, opsets, inputs and outputs, op types and parameters");
  cmd->add_option("MODEL", opts->model, "ONNX model file")->required();
  cmd->add_flag("--json", opts->json, "Print the same facts as one JSON object");
  cmd->callback([opts] {
    Model model = Model::load(opts->model);
    if (opts->json)
      std::cout << inspect_json(model) << "\n";
    else
      std::cout << inspect_text(model);
  });
}

}  // namespace onnxptq::cli
