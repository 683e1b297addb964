// Samples made to fit a model converted before quantization (as does Quark's
// CachedDataReader): float16 arrays widened for inputs the model now takes as float
// (convert_fp16_to_fp32), 4-D NCHW arrays transposed for inputs it now takes NHWC (convert_nchw_to_nhwc).
#pragma once

#include <memory>
#include <vector>

#include "calib/data_reader.h"

namespace onnxptq::calib {

struct FeedAdaptation {
  bool widen_float16 = false;  // a float16 array for a float input is widened (exactly)
  // An array [N, C, H, W] for an input declared [N, H, W, C] with fixed H, W, C (and so, after the
  // conversion, H > C and W > C: the two layouts cannot be confused) is transposed; an array
  // already NHWC passes unchanged.
  bool nchw_to_nhwc = false;
};

// A reader over `base` (which must outlive it) whose samples are adapted to `inputs`, the fed
// inputs of the converted model. Samples that need nothing pass unchanged; rewind, size and
// describe are base's.
std::unique_ptr<DataReader> adapt_reader(DataReader& base, const std::vector<const ir::Value*>& inputs,
                                         const FeedAdaptation& adaptation);

}  // namespace onnxptq::calib
