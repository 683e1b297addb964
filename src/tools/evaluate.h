// Comparing the results of a float model and its quantized version, file by file: the evaluate
// tool of the seeds (quark.onnx.tools.evaluate, as in "How to Measure Accuracy" of Quark's
// A8W8/A16W8 guide).
#pragma once

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace onnxptq::tools {

// The three metrics of Quark's evaluate tool, on the values flattened to one vector:
// cosine = a.b / (|a| |b|), l2 = |a - b|, psnr = 20 log10(max(a)) - 10 log10(max(mse, 1e-10)),
// where a is the baseline. A zero vector has no direction: its cosine is NaN.
struct ResultMetrics {
  double cosine = 0;
  double l2 = 0;
  double psnr = 0;
};

// Error when the shapes differ (naming both) or a tensor is not numeric.
ResultMetrics compare_results(const ir::Tensor& baseline, const ir::Tensor& quantized);

// A result file as numbers: .npy as stored; .png, .jpg, .jpeg as decoded 8-bit pixels
// [height, width, channels] (the file's own channels). Error naming the file otherwise.
ir::Tensor load_result(const std::filesystem::path& path);

struct FileMetrics {
  std::string file;
  ResultMetrics metrics;
};

struct EvaluateReport {
  std::vector<FileMetrics> files;  // by file name
  ResultMetrics average;           // the mean of each metric over the files
};

// Every .npy, .png, .jpg and .jpeg file of `baseline` (by extension, any case; not recursive)
// against the file of the same name in `quantized`. Error when a folder is missing, has no
// result file, or the two folders do not hold the same result files.
EvaluateReport evaluate_folders(const std::filesystem::path& baseline, const std::filesystem::path& quantized);

// A table for people: one line per file, then the average.
std::string format_report(const EvaluateReport& report);
// {"files": [{"file", "cosine", "l2", "psnr"}, ...], "average": {"cosine", "l2", "psnr"}}; NaN and
// infinities as null.
nlohmann::json report_json(const EvaluateReport& report);

}  // namespace onnxptq::tools
