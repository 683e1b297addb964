// Tensors in files: NumPy .npy files (what `onnxptq run` reads and writes, and calibration
// samples) and serialized onnx.TensorProto messages (the input_N.pb / output_N.pb files of the
// ONNX backend test data).
#pragma once

#include <filesystem>

#include "onnxptq/tensor.h"

namespace onnxptq {

// Reads .npy format versions 1 to 3: little- or big-endian numbers (f2 f4 f8, i1..i8, u1..u8, b1),
// C or Fortran order (the result is always C order). The data of a C-order little-endian file is
// mapped, not copied. Error (bad input) naming the file for anything else.
Tensor load_npy(const std::filesystem::path& path);

// Writes C order, little-endian, the bytes numpy.save writes, through a temporary file renamed
// into place. Error for an element type .npy has no code for (string, 4- and 8-bit floats, ...)
// or naming the file when it cannot be written.
void save_npy(const Tensor& tensor, const std::filesystem::path& path);

// Reads one serialized onnx.TensorProto. Error naming the file if it is missing or is not a tensor.
Tensor load_tensor(const std::filesystem::path& path);

}  // namespace onnxptq
