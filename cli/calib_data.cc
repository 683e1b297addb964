#include "cli/calib_data.h"

#include <iostream>

#include "cli/commands.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"
#include "onnxptq/quantize.h"
#include "onnxptq/random_inputs.h"

namespace onnxptq::cli {

void add_calib_data_options(CLI::App* cmd, CalibDataArgs& a) {
  cmd->add_option("--calib-data", a.calib_data,
                  "Calibration samples: a folder of .npy/.npz files (one sample each; .npz keys are input names), "
                  "or of images (JPEG, PNG, BMP) with --input-spec");
  cmd->add_option("--input-spec", a.input_spec,
                  "Image preprocessing for an image folder, e.g. resize=256,crop=224,order=rgb,scale=0.0039215686,"
                  "mean=0.485:0.456:0.406,std=0.229:0.224:0.225,layout=nchw (docs/calibration-data.md)");
  cmd->add_option("--calib-size", a.calib_size, "Use only the first N samples (default: all)")->check(non_negative());
  cmd->add_option("--random", a.random,
                  "Calibrate on N seeded random samples instead of files (the seeds' UseRandomData)")
      ->check(non_negative());
  cmd->add_option("--random-seed", a.random_seed, "Seed of --random (default 0)");
  cmd->add_option("--random-shape", a.random_shapes,
                  "NAME=AxBx... for an input with dynamic dimensions (RandomDataReaderInputShape)");
  cmd->add_option("--random-range", a.random_ranges,
                  "NAME=LOW:HIGH value range of an input (RandomDataReaderInputDataRange)");
}

namespace {

std::pair<double, double> parse_range(const std::string& text, const std::string& what) {
  size_t colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      size_t used_lo = 0, used_hi = 0;
      double lo = std::stod(text.substr(0, colon), &used_lo);
      double hi = std::stod(text.substr(colon + 1), &used_hi);
      if (used_lo == colon && used_hi == text.size() - colon - 1) return {lo, hi};
    }
  } catch (const std::exception&) {
  }
  throw Error(what + ": '" + text + "' is not LOW:HIGH");
}

}  // namespace

std::unique_ptr<DataReader> open_calib_data(const CalibDataArgs& a, const Model& model) {
  if (a.random && !a.calib_data.empty()) throw Error("--calib-data and --random exclude each other");
  if (!a.random && a.calib_data.empty()) throw Error("give calibration data: --calib-data FOLDER or --random N");
  if (!a.random && (!a.random_shapes.empty() || !a.random_ranges.empty()))
    throw Error("--random-shape and --random-range go with --random");
  if (a.random) {
    if (!a.input_spec.empty()) throw Error("--input-spec goes with an image folder in --calib-data, not --random");
    RandomData r;
    r.seed = a.random_seed;
    r.count = *a.random;
    for (const std::string& s : a.random_shapes) {
      size_t eq = s.find('=');
      if (eq == std::string::npos) throw Error("--random-shape '" + s + "' is not NAME=AxBx...");
      r.shapes[s.substr(0, eq)] = parse_dims(s.substr(eq + 1), "--random-shape " + s.substr(0, eq));
    }
    for (const std::string& s : a.random_ranges) {
      size_t eq = s.find('=');
      if (eq == std::string::npos) throw Error("--random-range '" + s + "' is not NAME=LOW:HIGH");
      r.ranges[s.substr(0, eq)] = parse_range(s.substr(eq + 1), "--random-range " + s.substr(0, eq));
    }
    return random_reader(model, r);
  }
  if (!a.input_spec.empty()) return image_folder_reader(a.calib_data, model, a.input_spec);
  return npy_folder_reader(a.calib_data, model);
}

std::unique_ptr<DataReader> open_quantize_data(CalibDataArgs args, const Model& model, const Config& config,
                                               bool quiet) {
  const bool given = !args.calib_data.empty() || args.random;
  if (!given) {
    args.random = 1;  // never read by dynamic quantization
    if (!quiet && !config.uses_random_data() && !config.uses_dynamic_quant()) std::cerr << "warning: " << kNoCalibrationData << "\n";
  } else if (!quiet && config.uses_random_data()) {
    std::cerr << "warning: UseRandomData: calibrating on its random sample; "
              << (args.calib_data.empty() ? "--random" : "--calib-data") << " is not read\n";
  }
  return open_calib_data(args, model);
}

void write_ranges(const Calibration& result, const std::string& output, bool quiet, const std::string& from) {
  std::string text = result.to_json() + "\n";
  if (output.empty() || output == "-") {
    std::cout << text;
    return;
  }
  write_text_file(output, text);
  if (!quiet)
    std::cerr << "ranges of " << result.tensors.size() << " tensors from " << from
              << result.samples - result.skipped_samples.size() << " samples written to " << output << "\n";
}

}  // namespace onnxptq::cli
