// `onnxptq check-npu`: the NPU's shift constraints on a power-of-two quantized model; exit 1 when violated.
#include "onnxptq/check_npu.h"

#include <iostream>

#include "cli/commands.h"
#include "onnxptq/model.h"

namespace onnxptq::cli {

void add_check_npu_command(CLI::App& app) {
  struct Args {
    std::string model;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "check-npu",
      "Evaluate the NPU's shift constraints (vai_q_onnx IPULimitationCheck) on a power-of-two quantized model "
      "and list the violations; exit 0 when none, 1 when some");
  cmd->add_option("MODEL", a->model, "A quantized model with power-of-two scales (QDQ, VitisQuantFormat, FixNeuron)")
      ->required();
  cmd->add_flag("--json", a->json, "Print the result as JSON");
  cmd->callback([a] {
    NpuCheck check = check_npu(Model::load(a->model));
    if (a->json)
      std::cout << check.to_json() << "\n";
    else
      std::cout << check.to_text();
    if (!check.violations.empty()) command_status() = 1;
  });
}

}  // namespace onnxptq::cli
