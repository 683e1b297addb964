// Test support for the fast finetune tests: seeded layer inputs and weights, and multi-indices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnxptq::testing {

// Seeded values in [low, high), plus a different offset every `block` values (0: none): rows
// whose mean is far from 0 test that a variance does not cancel.
std::vector<float> random_values(size_t n, uint32_t seed, float low = -1, float high = 1, size_t block = 0);

// The multi-index of row-major element `i` of a tensor of `dims`.
std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims);

}  // namespace onnxptq::testing
