// Reductions of one tensor split over threads in blocks of a fixed size, whatever the thread
// count: per-block results are combined in block order, so a floating-point sum comes out the
// same with any number of threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/parallel.h"

namespace onnxptq::calib {

inline constexpr size_t kReduceBlock = size_t{1} << 15;

// fn(values, count) on each block of `data`, on up to `threads` threads; the results in block order.
template <class T, class F>
std::vector<T> reduce_blocks(int threads, const float* data, size_t n, F&& fn) {
  std::vector<T> out((n + kReduceBlock - 1) / kReduceBlock);
  engine::parallel_for(threads, static_cast<int64_t>(out.size()), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      size_t start = static_cast<size_t>(b) * kReduceBlock;
      out[static_cast<size_t>(b)] = fn(data + start, std::min(kReduceBlock, n - start));
    }
  });
  return out;
}

}  // namespace onnxptq::calib
