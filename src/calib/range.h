// A range of values, [lo, hi]: what the statistics give and the calibration methods read.
#pragma once

namespace onnxptq::calib {

struct Range {
  double lo = 0;
  double hi = 0;
};

}  // namespace onnxptq::calib
