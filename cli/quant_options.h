// The options of quantize_static that `quantize` and `sensitivity` share: the calibration data,
// --config (a preset or a JSON file) and the arguments and extra options that override it.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/calib_data.h"
#include "onnxptq/config.h"

namespace onnxptq::cli {

struct QuantOptions {
  std::string config;
  CalibDataArgs data;
  std::optional<std::string> quant_format, calibrate_method, activation_type, weight_type;
  bool per_channel = false, reduce_range = false;
  std::vector<std::string> op_types, nodes_to_quantize, nodes_to_exclude, input_nodes, output_nodes;
  std::vector<std::string> extra_op_types;
  std::vector<std::string> subgraphs_to_exclude;  // START,...:END,...
  std::vector<std::string> extra_options;   // KEY=VALUE
  std::vector<std::string> node_precision;  // NODE=PRECISION
  int threads = 0;
  std::optional<int> workers;
  bool strict = false;
  bool no_optimize_model = false;
  bool standard_ops = false;  // BlockQDQAsStandardOps
  bool include_cle = false, no_include_cle = false, include_sq = false, include_rotation = false;
  bool include_fast_ft = false, no_include_fast_ft = false;
  bool convert_fp16_to_fp32 = false, convert_nchw_to_nhwc = false;
  bool enable_dpu = false;
  bool dynamic = false;  // use_dynamic_quant
  bool enable_npu_transformer = false;
};

void add_quant_options(CLI::App* cmd, QuantOptions& options);

// The configuration of --config: a preset's name, else a JSON file of quantize_static's
// arguments; the default configuration for "". Error naming one that is neither.
Config config_of(const std::string& preset_or_file);

// The configuration the options ask for: the preset or file of --config, then the others over
// it. Error naming a config that is neither a preset nor a readable JSON file, or a bad value.
Config config_from(const QuantOptions& options);

}  // namespace onnxptq::cli
