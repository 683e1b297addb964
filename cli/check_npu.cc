// `onnxptq check-npu`: the NPU's shift constraints on a power-of-two quantized model; exit 1 when violated.
#include "tools/check_npu.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ir/model.h"

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
    tools::NpuCheck check = tools::check_npu(ir::load_model(a->model));
    if (a->json)
      std::cout << tools::npu_check_json(check).dump(2) << "\n";
    else
      std::cout << tools::format_npu_check(check);
    if (!check.violations.empty()) command_status() = 1;
  });
}

}  // namespace onnxptq::cli
