// NumPy .npy files: the tensors users feed to and get from `onnxptq run`, and calibration samples.
#pragma once

#include <filesystem>
#include <string>

#include "ir/tensor.h"

namespace onnxptq::ir {

// Reads format versions 1 to 3: little- or big-endian numbers (f2 f4 f8, i1..i8, u1..u8, b1), C or
// Fortran order (the result is always C order). The data of a C-order little-endian file is
// mapped, not copied. Error naming the file for anything else.
Tensor load_npy(const std::filesystem::path& path);

// Parses .npy bytes held in memory (e.g. one member of an .npz archive).
Tensor parse_npy(const std::byte* data, size_t size, const std::string& display_name);

// Writes C order, little-endian, through a temporary file renamed into place.
void save_npy(const Tensor& tensor, const std::filesystem::path& path);

// The .npy bytes of a tensor (header and data).
std::string npy_bytes(const Tensor& tensor);

}  // namespace onnxptq::ir
