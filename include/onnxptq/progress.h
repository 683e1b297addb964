// Progress of the long phases (calibration samples, finetuned layers, search trials, sensitivity
// nodes), for a progress bar or a log.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace onnxptq {

struct Progress {
  std::string_view phase;  // "calibration", "fast finetune", "accuracy search", "sensitivity"
  std::string_view unit;   // "samples", "layers", "trials", "nodes"
  size_t done = 0;
  size_t total = 0;  // 0: not known in advance
};

// Called with done = 0 when a phase starts and after each item; from one thread at a time.
using ProgressFunction = std::function<void(const Progress&)>;

}  // namespace onnxptq
