// A reader that reports each sample it passes on (onnxptq/progress.h): how far a pass over the
// calibration data has come, the samples being read as the workers need them. Each start over
// begins a new count.
#pragma once

#include <memory>
#include <string>

#include "onnxptq/data_reader.h"
#include "onnxptq/progress.h"

namespace onnxptq::calib {

// `source` must outlive the result. `limit` (0: none) caps the total shown, as max_samples
// caps what is read.
std::unique_ptr<DataReader> make_progress_reader(DataReader& source, ProgressFunction progress, size_t limit = 0);

}  // namespace onnxptq::calib
