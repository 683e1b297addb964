// The calibration-data options shared by `onnxptq calibrate` and `onnxptq quantize`, and the
// reader they describe.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "onnxptq/calibrate.h"
#include "onnxptq/config.h"
#include "onnxptq/model.h"
#include "onnxptq/readers.h"

namespace onnxptq::cli {

struct CalibDataArgs {
  std::string calib_data;  // folder of .npy/.npz files, or of images with input_spec
  std::string input_spec;  // image preprocessing
  size_t calib_size = 0;  // first N samples; 0: all
  std::optional<size_t> random;  // N seeded random samples instead of files
  uint32_t random_seed = 0;
  std::vector<std::string> random_shapes;  // NAME=AxB...
  std::vector<std::string> random_ranges;  // NAME=LOW:HIGH
};

void add_calib_data_options(CLI::App* cmd, CalibDataArgs& args);

// Error when no source or two sources are given, or an option does not go with the source.
std::unique_ptr<DataReader> open_calib_data(const CalibDataArgs& args, const Model& model);

// The data `quantize` and `sensitivity` read: without a source, one random sample (the seeds'
// RandomDataReader) with the seeds' warning, unless the config's UseRandomData asks for random
// data itself; with a source and UseRandomData, a warning that the source is not read.
std::unique_ptr<DataReader> open_quantize_data(CalibDataArgs args, const Model& model, const Config& config,
                                               bool quiet);

// The ranges as JSON to `output` ("" or "-": standard output), then, unless quiet, a line on
// standard error saying how many tensors from how many samples (`from`: where, e.g. "3 shards of ").
void write_ranges(const Calibration& result, const std::string& output, bool quiet, const std::string& from = "");

}  // namespace onnxptq::cli
