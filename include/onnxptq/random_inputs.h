// Seeded random inputs for one run of a model (`onnxptq run --random SEED`): the generator of
// tests/oracle/ort_run.js (mulberry32, uniform floats in [0, 1) from the top 24 bits, one stream
// over the inputs in order), so that onnxptq and ONNX Runtime can be fed identical data from a
// seed alone. Calibration's random samples are random_reader's (onnxptq/readers.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"

namespace onnxptq {

// A float32 tensor for each input of `model.inputs()`; `shapes` gives the dimensions of inputs whose
// shape is not fully known. Error naming the input for a dynamic shape without an entry, a given
// shape contradicting the model or naming no input, or an input that is not float32.
Feed random_inputs(const Model& model, uint32_t seed, const std::map<std::string, std::vector<int64_t>>& shapes = {});

// A shape as the command line writes it: "1x3x224x224" -> {1, 3, 224, 224}. Error naming `what`
// (the option) for anything else.
std::vector<int64_t> parse_dims(const std::string& text, const std::string& what);

}  // namespace onnxptq
