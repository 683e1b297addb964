// What the fuzz targets that run a model feed it: small inputs only, so that a mutated dimension
// costs no memory before the library has had its chance to refuse it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/model.h"

namespace onnxptq::fuzz {

// The shape of every fed input, unknown dimensions set to 1, when each has a known rank and at
// most 4096 elements; nullopt otherwise. Negative sizes are kept: the library must refuse them.
std::optional<std::map<std::string, std::vector<int64_t>>> small_input_shapes(const ir::Model& model);

}  // namespace onnxptq::fuzz
