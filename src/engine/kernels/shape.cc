// The shape family: ops that move data (reshape, transpose, slice, gather, pad, resize...). This
// file registers the parts (shape_*.cc) and holds the copy routines they share.
#include "engine/kernels/shape.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/float16.h"

namespace onnxptq::engine {

namespace shape {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

StridedView simplify_view(const StridedView& view) {
  StridedView out;
  out.offset = view.offset;
  for (size_t i = 0; i < view.dims.size(); ++i) {
    if (view.dims[i] == 0) return {{0}, {1}, view.offset};
    if (view.dims[i] == 1) continue;
    // A dimension that steps exactly over the whole of the next one merges with it.
    if (!out.dims.empty() && out.strides.back() == view.strides[i] * view.dims[i]) {
      out.dims.back() *= view.dims[i];
      out.strides.back() = view.strides[i];
    } else {
      out.dims.push_back(view.dims[i]);
      out.strides.push_back(view.strides[i]);
    }
  }
  return out;
}

namespace {

// Source offset of row `row`, a flat index over the first `outer_rank` dims of the view; sets
// the odometer `index` to that row.
int64_t row_offset(const StridedView& v, size_t outer_rank, int64_t row, std::vector<int64_t>& index) {
  int64_t offset = v.offset;
  for (size_t k = outer_rank; k-- > 0;) {
    index[k] = row % v.dims[k];
    row /= v.dims[k];
    offset += index[k] * v.strides[k];
  }
  return offset;
}

// Moves the odometer `index` over the outer dims one step; returns the change of source offset.
int64_t next_row(const StridedView& v, size_t outer_rank, std::vector<int64_t>& index) {
  int64_t delta = 0;
  for (size_t k = outer_rank; k-- > 0;) {
    if (++index[k] < v.dims[k]) return delta + v.strides[k];
    delta -= (v.dims[k] - 1) * v.strides[k];
    index[k] = 0;
  }
  return delta;
}

// copy_transposed_rows for a narrow B known at compile time (an image's 3 or 4 channels going
// channels last): the B source rows are read side by side, with no loop of B steps per output
// row, which costs about four times as much per value.
template <int B, class T>
void copy_transposed_narrow(const T* src, int64_t a_begin, int64_t a_end, int64_t b_stride, T* dst) {
  for (int64_t a = a_begin; a < a_end; ++a)
    for (int b = 0; b < B; ++b) dst[a * B + b] = src[a + b * b_stride];
}

// dst[a * B + b] = src[a + b * s] over one [A, B] tile grid (the innermost two dims transposed).
template <class T>
void copy_transposed_rows(const T* src, int64_t a_begin, int64_t a_end, int64_t b_count, int64_t b_stride, T* dst) {
  switch (b_count) {
    case 2:
      return copy_transposed_narrow<2>(src, a_begin, a_end, b_stride, dst);
    case 3:
      return copy_transposed_narrow<3>(src, a_begin, a_end, b_stride, dst);
    case 4:
      return copy_transposed_narrow<4>(src, a_begin, a_end, b_stride, dst);
    default:
      break;
  }
  constexpr int64_t kTile = 32;
  for (int64_t a0 = a_begin; a0 < a_end; a0 += kTile) {
    int64_t a1 = std::min(a0 + kTile, a_end);
    for (int64_t b0 = 0; b0 < b_count; b0 += kTile) {
      int64_t b1 = std::min(b0 + kTile, b_count);
      for (int64_t a = a0; a < a1; ++a) {
        const T* s = src + a;
        T* d = dst + a * b_count;
        for (int64_t b = b0; b < b1; ++b) d[b] = s[b * b_stride];
      }
    }
  }
}

}  // namespace

template <class T>
void copy_view(const T* src, const StridedView& view, T* dst, int threads) {
  StridedView v = simplify_view(view);
  int64_t total = ir::element_count(v.dims);
  if (total == 0) return;
  if (v.dims.empty()) {
    dst[0] = src[v.offset];
    return;
  }
  size_t rank = v.dims.size();
  int64_t inner = v.dims[rank - 1], inner_stride = v.strides[rank - 1];
  int64_t item_bytes = std::is_same_v<T, std::string> ? 32 : static_cast<int64_t>(sizeof(T));

  // The innermost two dims swapped (NCHW <-> NHWC and the like): tiles keep both sides in cache.
  if (rank >= 2 && inner_stride != 1 && inner_stride != 0 && v.strides[rank - 2] == 1) {
    size_t outer_rank = rank - 2;
    int64_t a_count = v.dims[rank - 2];
    int64_t plane = a_count * inner;
    int64_t planes = total / plane;
    constexpr int64_t kBand = 32;
    int64_t bands = (a_count + kBand - 1) / kBand;
    parallel_for(threads, planes * bands, min_chunk_for(kBand * inner * item_bytes), [&](int64_t begin, int64_t end) {
      std::vector<int64_t> index(outer_rank);
      for (int64_t item = begin; item < end; ++item) {
        int64_t p = item / bands, band = item % bands;
        int64_t offset = row_offset(v, outer_rank, p, index);
        int64_t a0 = band * kBand, a1 = std::min(a0 + kBand, a_count);
        copy_transposed_rows(src + offset, a0, a1, inner, inner_stride, dst + p * plane);
      }
    });
    return;
  }

  size_t outer_rank = rank - 1;
  int64_t rows = total / inner;
  parallel_for(threads, rows, min_chunk_for(inner * item_bytes), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(outer_rank);
    int64_t offset = row_offset(v, outer_rank, begin, index);
    for (int64_t row = begin; row < end; ++row) {
      const T* s = src + offset;
      T* d = dst + row * inner;
      if (inner_stride == 1) copy_elements(s, d, inner);
      else if (inner_stride == 0) std::fill(d, d + inner, *s);
      else for (int64_t j = 0; j < inner; ++j) d[j] = s[j * inner_stride];
      offset += next_row(v, outer_rank, index);
    }
  });
}

template void copy_view<uint8_t>(const uint8_t*, const StridedView&, uint8_t*, int);
template void copy_view<uint16_t>(const uint16_t*, const StridedView&, uint16_t*, int);
template void copy_view<uint32_t>(const uint32_t*, const StridedView&, uint32_t*, int);
template void copy_view<uint64_t>(const uint64_t*, const StridedView&, uint64_t*, int);
template void copy_view<Bytes16>(const Bytes16*, const StridedView&, Bytes16*, int);
template void copy_view<std::string>(const std::string*, const StridedView&, std::string*, int);

void copy_view_tensor(const Tensor& in, const StridedView& view, Tensor& out, int threads, std::string_view op) {
  visit_storage(in.dtype(), op, [&]<class T>(std::type_identity<T>) {
    copy_view(elements<T>(in), view, mutable_elements<T>(out), threads);
  });
}

void copy_blocks(const std::vector<CopyBlock>& blocks, int threads) {
  std::vector<size_t> starts(blocks.size() + 1, 0);  // byte position of each block in the whole
  for (size_t i = 0; i < blocks.size(); ++i) starts[i + 1] = starts[i] + blocks[i].bytes;
  auto total = static_cast<int64_t>(starts.back());
  if (total == 0) return;
  // Small blocks in large numbers: one pass, no splitting.
  if (threads <= 1 || total < 2 * kParallelBytes) {
    for (const CopyBlock& b : blocks)
      if (b.bytes) std::memcpy(b.dst, b.src, b.bytes);
    return;
  }
  parallel_for(threads, total, kParallelBytes, [&](int64_t begin, int64_t end) {
    auto it = std::upper_bound(starts.begin(), starts.end(), static_cast<size_t>(begin));
    for (size_t i = static_cast<size_t>(it - starts.begin()) - 1; i < blocks.size(); ++i) {
      size_t lo = std::max(starts[i], static_cast<size_t>(begin));
      size_t hi = std::min(starts[i + 1], static_cast<size_t>(end));
      if (lo >= hi) {
        if (starts[i] >= static_cast<size_t>(end)) break;
        continue;
      }
      std::memcpy(blocks[i].dst + (lo - starts[i]), blocks[i].src + (lo - starts[i]), hi - lo);
    }
  });
}

double element_as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::Float: return t.values<float>()[i];
    case DataType::Double: return t.values<double>()[i];
    case DataType::Float16: return ir::half_to_float(t.values<uint16_t>()[i]);
    case DataType::BFloat16: return ir::bfloat16_to_float(t.values<uint16_t>()[i]);
    case DataType::Int8: return t.values<int8_t>()[i];
    case DataType::UInt8: return t.values<uint8_t>()[i];
    case DataType::Int16: return t.values<int16_t>()[i];
    case DataType::UInt16: return t.values<uint16_t>()[i];
    case DataType::Int32: return t.values<int32_t>()[i];
    case DataType::UInt32: return t.values<uint32_t>()[i];
    case DataType::Int64: return static_cast<double>(t.values<int64_t>()[i]);
    case DataType::UInt64: return static_cast<double>(t.values<uint64_t>()[i]);
    case DataType::Bool: return t.values<bool>()[i] ? 1.0 : 0.0;
    default: throw Error("cannot read " + std::string(ir::data_type_name(t.dtype())) + " values as numbers");
  }
}

std::vector<int64_t> read_as_int64(const Tensor& t, std::string_view what) {
  if (t.dtype() == DataType::Int64 || t.dtype() == DataType::Int32) {
    std::vector<int64_t> v(static_cast<size_t>(t.size()));
    if (t.dtype() == DataType::Int64) std::copy_n(t.values<int64_t>().data(), v.size(), v.data());
    else std::copy_n(t.values<int32_t>().data(), v.size(), v.data());
    return v;
  }
  if (t.dtype() == DataType::String) throw Error(std::string(what) + " must be numbers, got strings");
  std::vector<int64_t> v(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) {
    double d = element_as_double(t, i);
    if (!std::isfinite(d)) throw Error(std::string(what) + " holds " + std::to_string(d) + ", not an integer");
    v[i] = static_cast<int64_t>(d);
  }
  return v;
}

namespace {

template <class I>
I saturate(double value) {
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  double r = std::nearbyint(value);
  if (std::isnan(r)) return I{0};
  if (r <= lo) return std::numeric_limits<I>::lowest();
  if (r >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

template <class I>
void store_integers(const float* src, Tensor& t) {
  I* dst = t.mutable_values<I>().data();
  for (int64_t i = 0; i < t.size(); ++i) dst[i] = saturate<I>(src[i]);
}

}  // namespace

Tensor float32_as_rounded(const Tensor& f, DataType dtype) {
  switch (dtype) {
    case DataType::Float:
    case DataType::Double:
    case DataType::Float16:
    case DataType::BFloat16: return float32_as(f, dtype);
    default: break;
  }
  Tensor t = Tensor::uninitialized(dtype, f.dims());
  const float* src = f.values<float>().data();
  switch (dtype) {
    case DataType::Int8: store_integers<int8_t>(src, t); break;
    case DataType::UInt8: store_integers<uint8_t>(src, t); break;
    case DataType::Int16: store_integers<int16_t>(src, t); break;
    case DataType::UInt16: store_integers<uint16_t>(src, t); break;
    case DataType::Int32: store_integers<int32_t>(src, t); break;
    case DataType::UInt32: store_integers<uint32_t>(src, t); break;
    case DataType::Int64: store_integers<int64_t>(src, t); break;
    case DataType::UInt64: store_integers<uint64_t>(src, t); break;
    case DataType::Bool: {
      bool* dst = t.mutable_values<bool>().data();
      for (int64_t i = 0; i < t.size(); ++i) dst[i] = src[i] != 0;
      break;
    }
    default: throw Error("cannot store float results as " + std::string(ir::data_type_name(dtype)));
  }
  return t;
}

Tensor filled_tensor(DataType dtype, const std::vector<int64_t>& dims, double value) {
  Tensor t = Tensor::uninitialized(dtype, dims);
  auto fill = [&]<class T>(std::type_identity<T>, T v) { std::fill_n(t.mutable_values<T>().data(), t.size(), v); };
  switch (dtype) {
    case DataType::Float: fill(std::type_identity<float>{}, static_cast<float>(value)); break;
    case DataType::Double: fill(std::type_identity<double>{}, value); break;
    case DataType::Float16: fill(std::type_identity<uint16_t>{}, ir::float_to_half(static_cast<float>(value))); break;
    case DataType::BFloat16:
      fill(std::type_identity<uint16_t>{}, ir::float_to_bfloat16(static_cast<float>(value)));
      break;
    case DataType::Int8: fill(std::type_identity<int8_t>{}, saturate<int8_t>(value)); break;
    case DataType::UInt8: fill(std::type_identity<uint8_t>{}, saturate<uint8_t>(value)); break;
    case DataType::Int16: fill(std::type_identity<int16_t>{}, saturate<int16_t>(value)); break;
    case DataType::UInt16: fill(std::type_identity<uint16_t>{}, saturate<uint16_t>(value)); break;
    case DataType::Int32: fill(std::type_identity<int32_t>{}, saturate<int32_t>(value)); break;
    case DataType::UInt32: fill(std::type_identity<uint32_t>{}, saturate<uint32_t>(value)); break;
    case DataType::Int64: fill(std::type_identity<int64_t>{}, saturate<int64_t>(value)); break;
    case DataType::UInt64: fill(std::type_identity<uint64_t>{}, saturate<uint64_t>(value)); break;
    case DataType::Bool: fill(std::type_identity<bool>{}, value != 0); break;
    default: throw Error("cannot make a " + std::string(ir::data_type_name(dtype)) + " tensor from a number");
  }
  return t;
}

std::string describe(const Tensor& t) {
  return std::string(ir::data_type_name(t.dtype())) + ir::dims_to_string(t.dims());
}

}  // namespace shape

void register_shape_kernels(KernelRegistry& r) {
  shape::register_view_kernels(r);
  shape::register_layout_kernels(r);
  shape::register_pad_kernels(r);
  shape::register_gather_kernels(r);
  shape::register_generate_kernels(r);
  shape::register_resize_kernels(r);
  shape::register_grid_sample_kernels(r);
  shape::register_unique_kernels(r);
}

}  // namespace onnxptq::engine
