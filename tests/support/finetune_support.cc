#include "support/finetune_support.h"

#include <random>

namespace onnxptq::testing {

std::vector<float> random_values(size_t n, uint32_t seed, float low, float high, size_t block) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(low, high);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = d(rng) + (block ? static_cast<float>((i / block) % 5) * 3.0f : 0.0f);
  return v;
}

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
  return index;
}

}  // namespace onnxptq::testing
