// Private to the shape family (shape*.cc): element storage by width, strided copies, and the
// registration functions of each part. These ops move data without looking at it, so one copy
// routine per element width serves every type (strings move as std::string).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/kernel.h"
#include "engine/parallel.h"

namespace onnxptq::engine::shape {

void register_view_kernels(KernelRegistry& r);      // Reshape, Squeeze, Unsqueeze, Flatten, Shape, Size
void register_layout_kernels(KernelRegistry& r);    // Transpose, Concat, Split, Slice, Expand, Tile, ...
void register_pad_kernels(KernelRegistry& r);       // Pad
void register_gather_kernels(KernelRegistry& r);    // Gather*, Scatter*, Compress, NonZero, ReverseSequence
void register_generate_kernels(KernelRegistry& r);  // ConstantOfShape, Range, EyeLike, Trilu, OneHot
void register_resize_kernels(KernelRegistry& r);    // Resize, Upsample
void register_grid_sample_kernels(KernelRegistry& r);  // GridSample
void register_unique_kernels(KernelRegistry& r);       // Unique

// Storage of 16-byte elements (complex128).
struct Bytes16 {
  uint64_t lo, hi;
};

// Calls fn(std::type_identity<T>{}) with the type that stores elements of `dtype`: uint8_t,
// uint16_t, uint32_t, uint64_t or Bytes16 by width, std::string for strings. 4-bit types pack two
// elements per byte and are refused (Error naming `op`).
template <class F>
decltype(auto) visit_storage(DataType dtype, std::string_view op, F&& fn) {
  if (dtype == DataType::String) return fn(std::type_identity<std::string>{});
  switch (ir::data_type_bits(dtype)) {
    case 8: return fn(std::type_identity<uint8_t>{});
    case 16: return fn(std::type_identity<uint16_t>{});
    case 32: return fn(std::type_identity<uint32_t>{});
    case 64: return fn(std::type_identity<uint64_t>{});
    case 128: return fn(std::type_identity<Bytes16>{});
    default: break;
  }
  throw Error(std::string(op) + " does not support " + std::string(ir::data_type_name(dtype)) + " tensors");
}

template <class T>
const T* elements(const Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) return t.string_values().data();
  else return reinterpret_cast<const T*>(t.bytes().data());
}

template <class T>
T* mutable_elements(Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) return t.mutable_string_values().data();
  else return reinterpret_cast<T*>(t.mutable_bytes());
}

template <class T>
inline void copy_elements(const T* src, T* dst, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// Rows of at least this many bytes are worth a thread of their own.
inline constexpr int64_t kParallelBytes = 64 * 1024;

inline int64_t min_chunk_for(int64_t bytes_per_item) {
  return std::max<int64_t>(1, kParallelBytes / std::max<int64_t>(bytes_per_item, 1));
}

// Output dimensions computed from user data (repeats, pads, sizes...) are checked where they are
// computed, so that the error names what they came from.
using ir::checked_element_count;

// Row-major strides (in elements) of `dims`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

// A strided view of a source tensor: element (i_0, ..., i_n-1) of the view is the source element
// at offset + sum(i_k * strides[k]) (strides in elements; 0 repeats, negative walks backwards).
struct StridedView {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// The same view with size-1 dimensions dropped and neighbours that step as one merged, so the
// copy loops run over as few and as long rows as possible.
StridedView simplify_view(const StridedView& view);

// Writes the view of `src` to `dst` in row-major order: contiguous rows are copied whole, a
// transposition of the two innermost dimensions is copied in tiles.
template <class T>
void copy_view(const T* src, const StridedView& view, T* dst, int threads);

// copy_view for any element type; `out` must have the view's element count and `in`'s type.
void copy_view_tensor(const Tensor& in, const StridedView& view, Tensor& out, int threads, std::string_view op);

// Copies of trivially copyable blocks, split over threads by bytes.
struct CopyBlock {
  const std::byte* src;
  std::byte* dst;
  size_t bytes;
};
void copy_blocks(const std::vector<CopyBlock>& blocks, int threads);

// Values of a numeric tensor of any type as int64 (floats truncated), for indices and depths.
std::vector<int64_t> read_as_int64(const Tensor& t, std::string_view what);

// One element of `t` (any type but string) as double.
double element_as_double(const Tensor& t, int64_t i);

// A tensor of `dtype` and `dims` whose every element is `value` (converted, rounded and
// saturated for integers; nonzero is true for bool).
Tensor filled_tensor(DataType dtype, const std::vector<int64_t>& dims, double value);

// A float32 tensor as `dtype`: float types through float32_as, integers rounded to nearest and
// saturated, bool as nonzero.
Tensor float32_as_rounded(const Tensor& f, DataType dtype);

// The shape of a tensor as "[2,3] float" for messages.
std::string describe(const Tensor& t);

}  // namespace onnxptq::engine::shape
