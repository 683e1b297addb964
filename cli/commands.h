// Each subcommand of `onnxptq` lives in its own file and adds itself to the app here.
#pragma once

#include <CLI/CLI.hpp>

namespace onnxptq::cli {

void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_merge_stats_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_preprocess_command(CLI::App& app);
void add_evaluate_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_check_npu_command(CLI::App& app);
void add_presets_command(CLI::App& app);
void add_options_command(CLI::App& app);
void add_sensitivity_command(CLI::App& app);
void add_dump_model_command(CLI::App& app);
void add_remove_qdq_command(CLI::App& app);
void add_block_to_standard_ops_command(CLI::App& app);
void add_qdq_to_qop_command(CLI::App& app);
void add_fix_shapes_command(CLI::App& app);
void add_a8w8_npu_to_cpu_command(CLI::App& app);
void add_u16u8_to_u8u8_command(CLI::App& app);
void add_bias_int32_to_int16_command(CLI::App& app);
void add_lstm_to_customlstm_command(CLI::App& app);
void add_fp32_to_fp16_command(CLI::App& app);
void add_fp32_to_bf16_command(CLI::App& app);
void add_fp16_to_bf16_command(CLI::App& app);

// The check of every count, size and thread number on the command line: digits only (CLI11 would
// read "-1" into an unsigned option as 2^64 - 1, and a negative thread count as "all").
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) return "";
        return "expected a whole number of 0 or more, got '" + value + "'";
      },
      "N");
}

// The exit status of a command that ran but has findings to report (check-npu: 1 for violations).
int& command_status();

}  // namespace onnxptq::cli
