// Seeded random inputs for a model: the same generator as tests/oracle/ort_run.js (mulberry32,
// uniform floats in [0, 1) from the top 24 bits, one stream over the inputs in order), so the
// engine and ONNX Runtime can be fed identical data from a seed alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxptq::tools {

// `shapes` gives the dimensions of inputs whose shape is not fully known. Error naming the input
// for a dynamic shape without an entry, a given shape contradicting the model, or a non-float input.
std::map<std::string, ir::Tensor> random_inputs(const std::vector<const ir::Value*>& inputs, uint32_t seed,
                                                const std::map<std::string, std::vector<int64_t>>& shapes);

// "1x3x224x224" -> {1,3,224,224}; Error naming `what` on anything else.
std::vector<int64_t> parse_dims(const std::string& text, const std::string& what);

}  // namespace onnxptq::tools
