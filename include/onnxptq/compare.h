// The error a quantized model makes, tensor by tensor (`onnxptq compare`): each quantized
// activation of a QDQ model (the output of a DequantizeLinear fed by a QuantizeLinear) against the
// same tensor of the float model, on the same samples. The report a user reads to decide which
// nodes to exclude.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"

namespace onnxptq {

struct TensorError {
  std::string tensor;    // the float model's name
  std::string producer;  // node writing it in the float model ("" for a graph input)
  std::string op_type;
  double sqnr = 0;       // 10 log10(sum a^2 / sum (a - b)^2) over every sample, dB (inf: no error)
  double cosine = 0;     // a.b / (|a| |b|) over every sample (NaN for a zero vector)
  double max_error = 0;  // max |a - b|
  size_t elements = 0;   // values compared, over every sample
};

struct ModelComparison {
  std::vector<TensorError> tensors;  // worst SQNR first (NaN counts as worst)

  // A table for a terminal: the first `limit` tensors (0: all), then how many more there are.
  std::string to_table(size_t limit = 20) const;
  // [{"tensor", "producer", "op_type", "sqnr", "cosine", "max_error", "elements"}, ...], NaN and
  // infinities as null, indented by two spaces.
  std::string to_json() const;
  // The same as CSV with a header line, names quoted (RFC 4180); NaN and infinities as "nan", "inf".
  std::string to_csv() const;
};

// Runs both models on every sample of `reader` with the engine (`threads`: 0 for every hardware
// thread) and compares every quantized activation the float model also has. Error when the
// quantized model has no QuantizeLinear/DequantizeLinear pair on a tensor of the float model, the
// reader gives no sample, or a sample does not fit a model (naming the sample).
ModelComparison compare_models(const Model& float_model, const Model& quantized_model, DataReader& reader,
                               int threads = 0);

}  // namespace onnxptq
