#include "onnxptq/sample_ranks.h"

#include <algorithm>

namespace onnxptq {

SampleShare sample_share(size_t samples, int rank, int ranks) {
  const auto r = static_cast<size_t>(rank), n = static_cast<size_t>(ranks);
  const size_t each = samples / n, extra = samples % n;
  const size_t begin = r * each + std::min(r, extra);
  return {begin, begin + each + (r < extra ? 1 : 0)};
}

}  // namespace onnxptq
