// The finite extrema of float32 values, the statistic calibration takes of every tensor it sees.
// A kernel can take them while it writes its output, a block at a time while the block is in the
// L1 cache, so that they cost no second trip to memory (RunContext::output_extrema); the engine
// reads the tensor once more for the kernels that do not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>

#include "engine/parallel.h"

namespace onnxptq::engine {

// Smallest and largest finite value; lo > hi when there is none. NaN and infinities are skipped,
// and noted.
struct Extrema {
  float lo = std::numeric_limits<float>::infinity();
  float hi = -std::numeric_limits<float>::infinity();
  bool non_finite = false;  // some value was NaN or infinite

  bool empty() const { return lo > hi; }
  // The largest finite |x| (0 when there is none).
  float abs_max() const { return empty() ? 0.0f : std::max(-lo, hi); }
  void add(Extrema other) {
    lo = std::min(lo, other.lo);
    hi = std::max(hi, other.hi);
    non_finite = non_finite || other.non_finite;
  }
};

// The finite extrema of n values, on one thread.
Extrema finite_extrema(const float* data, size_t n);
// The same, split over up to `threads` threads (min and max are exact: any split gives the same).
Extrema finite_extrema(const float* data, size_t n, int threads);

// Where a kernel's threads leave the extrema of the output they write.
class ExtremaSink {
 public:
  void add(Extrema e) {
    std::lock_guard<std::mutex> lock(mutex_);
    extrema_.add(e);
    taken_ = true;
  }
  bool taken() const { return taken_; }
  Extrema extrema() const { return extrema_; }

 private:
  std::mutex mutex_;
  Extrema extrema_;
  bool taken_ = false;
};

// Values a block holds when its extrema are taken right after it is written: 16 KB, half the L1.
inline constexpr int64_t kExtremaBlock = 4096;

// parallel_for over the n elements of `out`, written by write(begin, end). With a sink (and float
// output), each thread writes its chunk in blocks of kExtremaBlock and takes each block's extrema
// as soon as it is written. `write` must write exactly out[begin, end) and its final values.
template <class T, class F>
void parallel_write(int threads, const T* out, int64_t n, int64_t min_chunk, ExtremaSink* sink, F&& write) {
  if constexpr (std::is_same_v<T, float>) {
    if (sink) {
      parallel_for(threads, n, min_chunk, [&](int64_t begin, int64_t end) {
        Extrema e;
        for (int64_t b = begin; b < end; b += kExtremaBlock) {
          int64_t stop = std::min(end, b + kExtremaBlock);
          write(b, stop);
          e.add(finite_extrema(out + b, static_cast<size_t>(stop - b)));
        }
        sink->add(e);
      });
      return;
    }
  }
  parallel_for(threads, n, min_chunk, write);
}

}  // namespace onnxptq::engine
