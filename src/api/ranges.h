// Calibration (the public ranges, onnxptq/calibrate.h) to and from the library's forms: the
// calibrator's result, and the ranges quantize_static takes instead of calibrating.
#pragma once

#include <string>

#include "calib/calibrate.h"
#include "onnxptq/calibrate.h"
#include "quant/known_ranges.h"

namespace onnxptq::api {

// `r` as the public Calibration, calibrated with `method` for `activation_type`.
Calibration calibration_of(const calib::CalibrationResult& r, calib::Method method, ir::DataType activation_type);

// `c` as quantize_static's given ranges; `source` names them in errors.
quant::KnownRanges known_ranges_of(const Calibration& c, std::string source);

}  // namespace onnxptq::api
