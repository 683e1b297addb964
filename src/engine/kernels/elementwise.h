// Private to the elementwise family: the broadcast iterator every binary, variadic and ternary
// op walks with, the element-type dispatch, and the registration of the family's parts.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/extrema.h"
#include "engine/kernel.h"
#include "engine/parallel.h"
#include "engine/vector_math.h"
#include "onnxptq/error.h"

namespace onnxptq::engine::elementwise {

void register_binary(KernelRegistry& r);    // arithmetic, comparison, logic, BitShift, PRelu
void register_variadic(KernelRegistry& r);  // Min, Max, Sum, Mean, Where
void register_unary(KernelRegistry& r);     // maths, activations, Clip
void register_cast(KernelRegistry& r);      // Cast, CastLike

// Elements per thread below which splitting the work costs more than it saves: memory-bound
// loops want big chunks, loops calling exp/erf per element smaller ones.
inline constexpr int64_t kCheapChunk = 32768;
inline constexpr int64_t kCostlyChunk = 4096;

constexpr int kMaxBroadcastInputs = 3;

// How a broadcast output is walked: the dims are collapsed so that the innermost run is as long
// as possible, and in it every input either advances by one element or repeats one element
// (same-shape, scalar and per-channel operands all end up as long contiguous runs).
struct BroadcastPlan {
  std::vector<int64_t> out_dims;
  int64_t total = 0;  // elements of the output
  int inputs = 0;
  int64_t inner = 1;  // length of each innermost run
  std::array<int64_t, kMaxBroadcastInputs> inner_step{};  // 0 or 1 per input
  std::vector<int64_t> outer_dims;                         // dims outside the run, outermost first
  std::array<std::vector<int64_t>, kMaxBroadcastInputs> outer_strides;  // per input, in elements
};

// Multidirectional (NumPy) broadcast of up to three shapes; Error naming them when they do not
// broadcast.
BroadcastPlan broadcast_plan(const std::vector<const std::vector<int64_t>*>& shapes);

// Calls fn(offsets, out_begin, len) for runs covering the output elements [begin, end):
// offsets[k] is where input k starts for the run, which it walks with step inner_step[k].
template <class Fn>
void broadcast_walk(const BroadcastPlan& p, int64_t begin, int64_t end, Fn& fn) {
  const size_t rank = p.outer_dims.size();
  std::vector<int64_t> index(rank);
  std::array<int64_t, kMaxBroadcastInputs> base{};
  int64_t row = begin / p.inner, pos = begin % p.inner;
  for (size_t d = rank; d-- > 0;) {
    index[d] = row % p.outer_dims[d];
    row /= p.outer_dims[d];
    for (int k = 0; k < p.inputs; ++k) base[k] += index[d] * p.outer_strides[k][d];
  }
  while (begin < end) {
    int64_t len = std::min(p.inner - pos, end - begin);
    std::array<int64_t, kMaxBroadcastInputs> offsets{};
    for (int k = 0; k < p.inputs; ++k) offsets[k] = base[k] + pos * p.inner_step[k];
    fn(offsets.data(), begin, len);
    begin += len;
    pos = 0;
    for (size_t d = rank; d-- > 0;) {  // next row: an odometer over the outer dims
      for (int k = 0; k < p.inputs; ++k) base[k] += p.outer_strides[k][d];
      if (++index[d] < p.outer_dims[d]) break;
      for (int k = 0; k < p.inputs; ++k) base[k] -= p.outer_strides[k][d] * p.outer_dims[d];
      index[d] = 0;
    }
  }
}

// The whole output, split over threads. fn must not throw.
template <class Fn>
void broadcast_for_each(const BroadcastPlan& p, int threads, int64_t min_chunk, Fn fn) {
  parallel_for(threads, p.total, min_chunk, [&](int64_t begin, int64_t end) { broadcast_walk(p, begin, end, fn); });
}

// o[i] = f(a[i*sa], b[i*sb]) for i < n, sa and sb being 0 or 1: four loops the compiler can
// vectorise (omp simd: the outputs never alias the inputs).
// Kept out of line: one copy per op and type, vectorised once.
template <class A, class B, class O, class F>
[[gnu::noinline]] void binary_run(const A* a, int64_t sa, const B* b, int64_t sb, O* o, int64_t n, const F& f) {
  if (sa && sb) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa) {
    const B y = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], y);
  } else if (sb) {
    const A x = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = f(x, b[i]);
  } else {
    const O v = f(*a, *b);
    std::fill(o, o + n, v);
  }
}

// out = f(a, b) over the broadcast of a and b (the plan made from their shapes); with a sink,
// the extrema of a float output are taken as it is written (engine/extrema.h).
template <class A, class B, class O, class F>
void binary_apply(const BroadcastPlan& p, const A* a, const B* b, O* out, int threads, int64_t min_chunk, const F& f,
                  ExtremaSink* sink = nullptr) {
  auto run = [&](const int64_t* off, int64_t o, int64_t n) {
    binary_run(a + off[0], p.inner_step[0], b + off[1], p.inner_step[1], out + o, n, f);
  };
  parallel_write(threads, out, p.total, min_chunk, sink,
                 [&](int64_t begin, int64_t end) { broadcast_walk(p, begin, end, run); });
}

// Integer arithmetic that wraps instead of overflowing (signed overflow is undefined in C++).
template <class T>
using wrap_unsigned_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T> inline T wrap_add(T x, T y) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_unsigned_t<T>(x) + wrap_unsigned_t<T>(y));
  else return x + y;
}
template <class T> inline T wrap_sub(T x, T y) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_unsigned_t<T>(x) - wrap_unsigned_t<T>(y));
  else return x - y;
}
template <class T> inline T wrap_mul(T x, T y) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(wrap_unsigned_t<T>(x) * wrap_unsigned_t<T>(y));
  else return x * y;
}

// A double stored in an integer type: NaN gives 0, out-of-range values saturate (a plain
// conversion would be undefined).
template <class T>
T saturate_to(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Element types computed natively (ir/data_type.h). Float16 and bfloat16 go through float32
// (as_float32).
using ir::has;
using ir::TypeSet;
using ir::visit_type;

inline bool is_float16_like(DataType t) { return t == DataType::Float16 || t == DataType::BFloat16; }

std::string type_name(DataType t);

// The i-th input, or Error when it is missing.
const Tensor& required_input(std::span<const Tensor* const> in, size_t i, const char* name);

// Error unless every input has the type of the first.
void check_same_type(std::span<const Tensor* const> in, size_t count);

}  // namespace onnxptq::engine::elementwise
