// The error a quantized model makes, tensor by tensor: each quantized activation of a QDQ model
// (the output of a DequantizeLinear fed by a QuantizeLinear) against the same tensor of the float
// model, on the same samples. The report a user reads to decide which nodes to exclude.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ir/model.h"
#include "onnxptq/compare.h"
#include "onnxptq/data_reader.h"

namespace onnxptq::tools {

// A tensor's errors are the public API's (onnxptq/compare.h).
using onnxptq::TensorError;

// Runs both models on every sample of `reader` with the engine (`threads`: 0 for every hardware
// thread) and returns one entry per quantized activation the float model also has, worst SQNR
// first. Error when the quantized model has no QuantizeLinear/DequantizeLinear pair on an
// activation, or a sample does not fit a model (naming the sample).
std::vector<TensorError> compare_models(const ir::Model& float_model, const ir::Model& quantized_model,
                                        DataReader& reader, int threads = 0);

// A table for a terminal, the first `limit` tensors (0: all).
std::string format_comparison(const std::vector<TensorError>& errors, size_t limit);
// [{"tensor", "producer", "op_type", "sqnr", "cosine", "max_error", "elements"}, ...]; NaN and
// infinities as null.
nlohmann::json comparison_json(const std::vector<TensorError>& errors);
// The same as CSV with a header line; NaN and infinities as "nan", "inf".
std::string comparison_csv(const std::vector<TensorError>& errors);

}  // namespace onnxptq::tools
