// Each subcommand of `onnxptq` lives in its own file and adds itself to the app here.
#pragma once

#include <CLI/CLI.hpp>

namespace onnxptq::cli {

void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_preprocess_command(CLI::App& app);
void add_evaluate_command(CLI::App& app);
void add_compare_command(CLI::App& app);

}  // namespace onnxptq::cli
