// Quark's dump_model (`onnxptq dump-model`): a quantized model run on one sample, the integer value
// of every quantized tensor written to files, for a bit-exact comparison with what the hardware
// computes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"

namespace onnxptq {

struct DumpOptions {
  bool dump_float = false;  // also every float32 node output, as <name>_float.bin / .txt
  std::filesystem::path output_dir = "dump_results";
  int threads = 0;  // 0: every hardware thread
};

struct DumpResult {
  size_t quantized = 0;      // quantized tensors written
  size_t float_tensors = 0;  // float tensors written (dump_float)
  std::vector<std::string> warnings;
};

// Runs `model` on the first sample of `reader` with onnxptq's engine and writes, into
// options.output_dir (made if missing), for each dequantize node (DequantizeLinear of any domain,
// ExtendedDequantizeLinear, VitisDequantizeLinear) of an integer type the integers it reads (the
// QuantizeLinear's output, or the stored weight) as <name>.bin (raw, little-endian, the integer
// type) and <name>.txt (one value a line), <name> being the dequantize node's output with '/'
// made '_'; for each FixNeuron, round-half-even(y * 2^pos) clipped to int8 of its output y (as
// Quark does). Error when the model has no such node and dump_float is off, when the reader gives
// no sample, or a file cannot be written; with dump_float and no quantize node, a warning.
DumpResult dump_model(const Model& model, DataReader& reader, const DumpOptions& options = {});

}  // namespace onnxptq
