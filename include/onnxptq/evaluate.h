// Comparing the results of a float model and of its quantized version, file by file: the evaluate
// tool of the seeds (quark.onnx.tools.evaluate, as in "How to Measure Accuracy" of Quark's
// A8W8/A16W8 guide), `onnxptq evaluate` and onnxptq.evaluate in Python.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace onnxptq {

// The three metrics of Quark's evaluate tool, on the values flattened to one vector:
// cosine = a.b / (|a| |b|), l2 = |a - b|, psnr = 20 log10(max(a)) - 10 log10(max(mse, 1e-10)),
// where a is the baseline. A zero vector has no direction: its cosine is NaN.
struct ResultMetrics {
  double cosine = 0;
  double l2 = 0;
  double psnr = 0;
};

struct FileMetrics {
  std::string file;
  ResultMetrics metrics;
};

struct EvaluateReport {
  std::vector<FileMetrics> files;  // by file name
  ResultMetrics average;           // the mean of each metric over the files

  // A table for people: one line per file, then the average.
  std::string to_table() const;
  // {"files": [{"file", "cosine", "l2", "psnr"}, ...], "average": {"cosine", "l2", "psnr"}}, NaN
  // and infinities as null, indented by two spaces.
  std::string to_json() const;
};

// Every .npy, .png, .jpg and .jpeg file of `baseline` (by extension, any case; not recursive)
// against the file of the same name in `quantized`: .npy as stored, images as their decoded 8-bit
// pixels [height, width, channels]. Error when a folder is missing, has no result file, the two
// folders do not hold the same result files, or two results differ in shape or are not numbers
// (naming the file).
EvaluateReport evaluate_folders(const std::filesystem::path& baseline, const std::filesystem::path& quantized);

}  // namespace onnxptq
