// Comparing the results of a float model and its quantized version, file by file: the evaluate
// tool of the seeds (quark.onnx.tools.evaluate, as in "How to Measure Accuracy" of Quark's
// A8W8/A16W8 guide).
#pragma once

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "onnxptq/evaluate.h"

namespace onnxptq::tools {

// The metrics (Quark's cosine, L2 loss and PSNR) and the report are the public API's
// (onnxptq/evaluate.h).
using onnxptq::EvaluateReport;
using onnxptq::FileMetrics;
using onnxptq::ResultMetrics;

// Error when the shapes differ (naming both) or a tensor is not numeric.
ResultMetrics compare_results(const ir::Tensor& baseline, const ir::Tensor& quantized);

// A result file as numbers: .npy as stored; .png, .jpg, .jpeg as decoded 8-bit pixels
// [height, width, channels] (the file's own channels). Error naming the file otherwise.
ir::Tensor load_result(const std::filesystem::path& path);

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
