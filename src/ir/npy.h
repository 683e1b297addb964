// NumPy .npy files: the tensors users feed to and get from `onnxptq run`, and calibration samples.
#pragma once

#include <filesystem>
#include <string>

#include "ir/tensor.h"
#include "onnxptq/tensor_files.h"

namespace onnxptq::ir {

// load_npy and save_npy (onnxptq/tensor_files.h) belong here too.
using onnxptq::load_npy;
using onnxptq::save_npy;

// Parses .npy bytes held in memory (e.g. one member of an .npz archive).
Tensor parse_npy(const std::byte* data, size_t size, const std::string& display_name);

// The .npy bytes of a tensor (header and data).
std::string npy_bytes(const Tensor& tensor);

}  // namespace onnxptq::ir
