// Ranges calibrated before, used instead of calibrating: one calibration for many quantizations
// (`onnxptq quantize --ranges`, Quark's SaveAndRestore).
#pragma once

#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "ir/model.h"
#include "quant/config.h"

namespace onnxptq::quant {

struct KnownRanges {
  calib::CalibrationResult result;
  calib::Method method = calib::Method::MinMax;
  ir::DataType activation_type = ir::DataType::Int8;
  std::string source;  // what errors call them: "--ranges 'r.json'"
};

// Error (one line, naming the source) when `known` was calibrated with another calibrate_method
// or for another activation_type than `config` asks, or has a tensor `model` does not have (the
// ranges of another model). Tensors of `model` it has but the plan does not calibrate (nodes
// excluded since) are fine.
void check_known_ranges(const KnownRanges& known, const ir::Model& model, const QuantConfig& config);

// The ranges of `tensors`, calibrated for `type`, from `known`. Error naming the first tensor it
// has no range for, or a type other than its own (mixed precision with power-of-two scales
// calibrates once per type).
calib::CalibrationResult take_known_ranges(const KnownRanges& known, const std::vector<std::string>& tensors,
                                           ir::DataType type);

}  // namespace onnxptq::quant
