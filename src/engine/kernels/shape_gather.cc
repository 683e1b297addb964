// Ops that read or write elements through index tensors: Gather, GatherElements, GatherND,
// ScatterND, ScatterElements (and Scatter, its older name), Compress, NonZero, ReverseSequence.
// Indices are checked (and negative ones resolved) before any data moves.
#include <algorithm>
#include <optional>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

// The values of an int32 or int64 index tensor of any rank.
std::vector<int64_t> index_values(const Tensor& t, std::string_view what) {
  std::vector<int64_t> v(static_cast<size_t>(t.size()));
  if (t.dtype() == DataType::Int64) std::copy_n(t.values<int64_t>().data(), v.size(), v.data());
  else if (t.dtype() == DataType::Int32) std::copy_n(t.values<int32_t>().data(), v.size(), v.data());
  else throw Error(std::string(what) + " must be int32 or int64, got " + std::string(ir::data_type_name(t.dtype())));
  return v;
}

// An index into an axis of size `dim`, negative counting from the end; Error when out of range.
int64_t resolve_index(int64_t i, int64_t dim, std::string_view what) {
  if (i < -dim || i >= dim)
    throw Error(std::string(what) + " " + std::to_string(i) + " is out of range for a dimension of size " +
                std::to_string(dim));
  return i < 0 ? i + dim : i;
}

class GatherKernel : public Kernel {
 public:
  explicit GatherKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 0)) {}
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& data = *in[0];
    if (data.rank() == 0) throw Error("cannot gather from a scalar");
    int64_t axis = normalize_axis(axis_, static_cast<int64_t>(data.rank()));
    int64_t dim = data.dims()[axis];
    std::vector<int64_t> idx = index_values(*in[1], "indices");
    for (int64_t& i : idx) i = resolve_index(i, dim, "index");
    std::vector<int64_t> dims(data.dims().begin(), data.dims().begin() + axis);
    dims.insert(dims.end(), in[1]->dims().begin(), in[1]->dims().end());
    dims.insert(dims.end(), data.dims().begin() + axis + 1, data.dims().end());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= data.dims()[i];
    for (size_t i = axis + 1; i < data.rank(); ++i) inner *= data.dims()[i];
    auto n = static_cast<int64_t>(idx.size());
    Tensor y = Tensor::uninitialized(data.dtype(), dims);
    visit_storage(data.dtype(), "Gather", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(data);
      T* dst = mutable_elements<T>(y);
      parallel_for(ctx.threads, outer * n, min_chunk_for(inner * static_cast<int64_t>(sizeof(T))),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t item = begin; item < end; ++item) {
                       int64_t o = item / n, i = item % n;
                       copy_elements(src + (o * dim + idx[i]) * inner, dst + item * inner, inner);
                     }
                   });
    });
    out[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

// Checks that `indices` has the rank of `data` and fits inside it off `axis`.
void check_element_indices(const Tensor& data, const Tensor& indices, int64_t axis) {
  bool fits = indices.rank() == data.rank();
  for (size_t k = 0; fits && k < data.rank(); ++k)
    fits = static_cast<int64_t>(k) == axis || indices.dims()[k] <= data.dims()[k];
  if (!fits)
    throw Error("indices " + describe(indices) + " do not fit data " + describe(data) + " off axis " +
                std::to_string(axis));
}

// Data offset of every element of `indices` (same rank as data) with its value on `axis`.
std::vector<int64_t> element_offsets(const Tensor& data, const Tensor& indices, int64_t axis) {
  std::vector<int64_t> idx = index_values(indices, "indices");
  std::vector<int64_t> strides = contiguous_strides(data.dims());
  std::vector<int64_t> at(indices.rank(), 0);
  int64_t dim = data.dims()[axis];
  for (int64_t& i : idx) {
    int64_t offset = resolve_index(i, dim, "index") * strides[axis];
    for (size_t k = 0; k < at.size(); ++k)
      if (static_cast<int64_t>(k) != axis) offset += at[k] * strides[k];
    i = offset;
    for (size_t k = at.size(); k-- > 0;) {
      if (++at[k] < indices.dims()[k]) break;
      at[k] = 0;
    }
  }
  return idx;
}

class GatherElementsKernel : public Kernel {
 public:
  explicit GatherElementsKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 0)) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& data = *in[0];
    const Tensor& indices = *in[1];
    if (data.rank() == 0) throw Error("cannot gather from a scalar");
    int64_t axis = normalize_axis(axis_, static_cast<int64_t>(data.rank()));
    check_element_indices(data, indices, axis);
    std::vector<int64_t> offsets = element_offsets(data, indices, axis);
    Tensor y = Tensor::uninitialized(data.dtype(), indices.dims());
    visit_storage(data.dtype(), "GatherElements", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(data);
      T* dst = mutable_elements<T>(y);
      for (size_t i = 0; i < offsets.size(); ++i) dst[i] = src[offsets[i]];
    });
    out[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

// GatherND and ScatterND address slices of `data` by index tuples (the last axis of `indices`).
struct NdAddressing {
  int64_t slice = 1;               // elements per addressed slice
  std::vector<int64_t> offsets;    // element offset of each tuple's slice in data
  std::vector<int64_t> out_dims;   // indices.dims[:-1] + data.dims[batch + k:]
};

NdAddressing nd_addressing(const Tensor& data, const Tensor& indices, int64_t batch_dims) {
  auto r = static_cast<int64_t>(data.rank()), q = static_cast<int64_t>(indices.rank());
  if (q < 1) throw Error("indices must have at least one dimension");
  int64_t k = indices.dims().back();
  if (batch_dims < 0 || batch_dims >= std::min(q, r) || k < 1 || k > r - batch_dims)
    throw Error("indices " + describe(indices) + " do not address data " + describe(data) + " with batch_dims " +
                std::to_string(batch_dims));
  for (int64_t i = 0; i < batch_dims; ++i)
    if (indices.dims()[i] != data.dims()[i])
      throw Error("the batch dimensions of indices " + describe(indices) + " and data " + describe(data) + " differ");
  NdAddressing a;
  a.out_dims.assign(indices.dims().begin(), indices.dims().end() - 1);
  for (int64_t i = batch_dims + k; i < r; ++i) {
    a.slice *= data.dims()[i];
    a.out_dims.push_back(data.dims()[i]);
  }
  std::vector<int64_t> strides = contiguous_strides(data.dims());
  int64_t batch_block = batch_dims > 0 ? strides[batch_dims - 1] : ir::element_count(data.dims());
  std::vector<int64_t> idx = index_values(indices, "indices");
  auto tuples = static_cast<int64_t>(idx.size()) / k;
  int64_t per_batch = 1;
  for (int64_t i = batch_dims; i < q - 1; ++i) per_batch *= indices.dims()[i];
  a.offsets.resize(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = (t / std::max<int64_t>(per_batch, 1)) * batch_block;
    for (int64_t j = 0; j < k; ++j)
      offset += resolve_index(idx[t * k + j], data.dims()[batch_dims + j], "index") * strides[batch_dims + j];
    a.offsets[t] = offset;
  }
  return a;
}

class GatherNDKernel : public Kernel {
 public:
  explicit GatherNDKernel(const KernelInfo& info) : batch_dims_(info.node.attr_int("batch_dims", 0)) {}
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& data = *in[0];
    NdAddressing a = nd_addressing(data, *in[1], batch_dims_);
    Tensor y = Tensor::uninitialized(data.dtype(), a.out_dims);
    visit_storage(data.dtype(), "GatherND", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(data);
      T* dst = mutable_elements<T>(y);
      auto n = static_cast<int64_t>(a.offsets.size());
      parallel_for(ctx.threads, n, min_chunk_for(a.slice * static_cast<int64_t>(sizeof(T))),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t t = begin; t < end; ++t)
                       copy_elements(src + a.offsets[t], dst + t * a.slice, a.slice);
                   });
    });
    out[0] = std::move(y);
  }

 private:
  int64_t batch_dims_;
};

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reduction_of(const KernelInfo& info) {
  if (info.opset < 16) return Reduction::None;
  std::string r = info.node.attr_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max" && info.opset >= 18) return Reduction::Max;
  if (r == "min" && info.opset >= 18) return Reduction::Min;
  throw Error("reduction '" + r + "' is not one of none, add, mul" + (info.opset >= 18 ? ", max, min" : ""));
}

template <class T>
void reduce_into(T& dst, const T& v, Reduction r) {
  switch (r) {
    case Reduction::None: dst = v; break;
    case Reduction::Add: dst = static_cast<T>(dst + v); break;
    case Reduction::Mul: dst = static_cast<T>(dst * v); break;
    case Reduction::Max: dst = std::max(dst, v); break;
    case Reduction::Min: dst = std::min(dst, v); break;
  }
}

// out[offsets[i] + j] (reduced with) updates[i * block + j] for every i and j < block.
// Without reduction elements move by width; with one they are computed in their own type
// (float16 and bfloat16 through float).
Tensor scatter(const Tensor& data, const Tensor& updates, const std::vector<int64_t>& offsets, int64_t block,
               Reduction reduction, std::string_view op) {
  if (updates.dtype() != data.dtype())
    throw Error("updates " + describe(updates) + " are not of the data's type " + describe(data));
  Tensor y = data;
  auto apply = [&]<class T>(std::type_identity<T>, Tensor& target, const Tensor& upd) {
    T* dst = mutable_elements<T>(target);
    const T* src = elements<T>(upd);
    for (size_t i = 0; i < offsets.size(); ++i)
      for (int64_t j = 0; j < block; ++j) {
        if constexpr (std::is_arithmetic_v<T>) reduce_into(dst[offsets[i] + j], src[i * block + j], reduction);
        else dst[offsets[i] + j] = src[i * block + j];
      }
  };
  if (reduction == Reduction::None) {
    visit_storage(data.dtype(), op, [&]<class T>(std::type_identity<T> t) { apply(t, y, updates); });
    return y;
  }
  switch (data.dtype()) {
    case DataType::Float: apply(std::type_identity<float>{}, y, updates); return y;
    case DataType::Double: apply(std::type_identity<double>{}, y, updates); return y;
    case DataType::Int8: apply(std::type_identity<int8_t>{}, y, updates); return y;
    case DataType::UInt8: apply(std::type_identity<uint8_t>{}, y, updates); return y;
    case DataType::Int16: apply(std::type_identity<int16_t>{}, y, updates); return y;
    case DataType::UInt16: apply(std::type_identity<uint16_t>{}, y, updates); return y;
    case DataType::Int32: apply(std::type_identity<int32_t>{}, y, updates); return y;
    case DataType::UInt32: apply(std::type_identity<uint32_t>{}, y, updates); return y;
    case DataType::Int64: apply(std::type_identity<int64_t>{}, y, updates); return y;
    case DataType::UInt64: apply(std::type_identity<uint64_t>{}, y, updates); return y;
    case DataType::Float16:
    case DataType::BFloat16: {
      Tensor f = as_float32(data);
      apply(std::type_identity<float>{}, f, as_float32(updates));
      return float32_as(f, data.dtype());
    }
    default:
      throw Error(std::string(op) + " cannot reduce " + std::string(ir::data_type_name(data.dtype())) + " values");
  }
}

class ScatterNDKernel : public Kernel {
 public:
  explicit ScatterNDKernel(const KernelInfo& info) : reduction_(reduction_of(info)) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& data = *in[0];
    const Tensor& updates = *in[2];
    NdAddressing a = nd_addressing(data, *in[1], 0);
    if (updates.dims() != a.out_dims)
      throw Error("updates " + describe(updates) + " should have shape " + ir::dims_to_string(a.out_dims));
    out[0] = scatter(data, updates, a.offsets, a.slice, reduction_, "ScatterND");
  }

 private:
  Reduction reduction_;
};

class ScatterElementsKernel : public Kernel {
 public:
  explicit ScatterElementsKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)), reduction_(reduction_of(info)) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& data = *in[0];
    const Tensor& indices = *in[1];
    const Tensor& updates = *in[2];
    if (data.rank() == 0) throw Error("cannot scatter into a scalar");
    int64_t axis = normalize_axis(axis_, static_cast<int64_t>(data.rank()));
    check_element_indices(data, indices, axis);
    if (updates.dims() != indices.dims())
      throw Error("updates " + describe(updates) + " and indices " + describe(indices) + " differ in shape");
    out[0] = scatter(data, updates, element_offsets(data, indices, axis), 1, reduction_, "ScatterElements");
  }

 private:
  int64_t axis_;
  Reduction reduction_;
};

class CompressKernel : public Kernel {
 public:
  explicit CompressKernel(const KernelInfo& info) {
    if (info.node.find_attribute("axis")) axis_ = info.node.attr_int("axis", 0);
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& data = *in[0];
    const Tensor& condition = *in[1];
    if (condition.dtype() != DataType::Bool || condition.rank() != 1)
      throw Error("condition must be a 1-D bool tensor, got " + describe(condition));
    std::vector<int64_t> dims = axis_ ? data.dims() : std::vector<int64_t>{data.size()};
    int64_t axis = axis_ ? normalize_axis(*axis_, static_cast<int64_t>(data.rank())) : 0;
    if (dims.empty()) throw Error("cannot compress a scalar along an axis");
    int64_t dim = dims[axis];
    auto cond = condition.values<bool>();
    std::vector<int64_t> kept;
    for (size_t i = 0; i < cond.size(); ++i) {
      if (!cond[i]) continue;
      if (static_cast<int64_t>(i) >= dim)
        throw Error("condition " + describe(condition) + " selects index " + std::to_string(i) +
                    " past the axis size " + std::to_string(dim));
      kept.push_back(static_cast<int64_t>(i));
    }
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= dims[i];
    for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
    dims[axis] = static_cast<int64_t>(kept.size());
    Tensor y = Tensor::uninitialized(data.dtype(), dims);
    visit_storage(data.dtype(), "Compress", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(data);
      T* dst = mutable_elements<T>(y);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k : kept) {
          copy_elements(src + (o * dim + k) * inner, dst, inner);
          dst += inner;
        }
    });
    out[0] = std::move(y);
  }

 private:
  std::optional<int64_t> axis_;
};

// Which bits of an element make it nonzero: all but the sign bits of floating-point zeros.
template <class T>
T nonzero_mask(DataType dtype) {
  switch (dtype) {
    case DataType::Float: return static_cast<T>(0x7FFFFFFFu);
    case DataType::Double: return static_cast<T>(0x7FFFFFFFFFFFFFFFull);
    case DataType::Complex64: return static_cast<T>(0x7FFFFFFF7FFFFFFFull);
    case DataType::Float16:
    case DataType::BFloat16: return static_cast<T>(0x7FFF);
    case DataType::Float8E4M3FN:
    case DataType::Float8E5M2: return static_cast<T>(0x7F);
    default: return static_cast<T>(~T{0});
  }
}

class NonZeroKernel : public Kernel {
 public:
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> dims = x.rank() == 0 ? std::vector<int64_t>{1} : x.dims();  // a scalar counts as [1]
    std::vector<int64_t> found;
    visit_storage(x.dtype(), "NonZero", [&]<class T>(std::type_identity<T>) {
      const T* v = elements<T>(x);
      if constexpr (std::is_same_v<T, Bytes16>) {
        constexpr uint64_t kMask = 0x7FFFFFFFFFFFFFFFull;  // complex128: two doubles
        for (int64_t i = 0; i < x.size(); ++i)
          if ((v[i].lo & kMask) || (v[i].hi & kMask)) found.push_back(i);
      } else if constexpr (std::is_same_v<T, std::string>) {
        for (int64_t i = 0; i < x.size(); ++i)
          if (!v[i].empty()) found.push_back(i);
      } else {
        T mask = nonzero_mask<T>(x.dtype());
        for (int64_t i = 0; i < x.size(); ++i)
          if (v[i] & mask) found.push_back(i);
      }
    });
    auto n = static_cast<int64_t>(found.size());
    auto rank = static_cast<int64_t>(dims.size());
    Tensor y = Tensor::uninitialized(DataType::Int64, {rank, n});
    int64_t* dst = y.mutable_values<int64_t>().data();
    std::vector<int64_t> strides = contiguous_strides(dims);
    for (int64_t j = 0; j < n; ++j) {
      int64_t rest = found[j];
      for (int64_t k = 0; k < rank; ++k) {
        dst[k * n + j] = rest / strides[k];
        rest %= strides[k];
      }
    }
    out[0] = std::move(y);
  }
};

class ReverseSequenceKernel : public Kernel {
 public:
  explicit ReverseSequenceKernel(const KernelInfo& info)
      : batch_axis_(info.node.attr_int("batch_axis", 1)), time_axis_(info.node.attr_int("time_axis", 0)) {
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0)))
      throw Error("batch_axis " + std::to_string(batch_axis_) + " and time_axis " + std::to_string(time_axis_) +
                  " must be 0 and 1 in some order");
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error("input " + describe(x) + " must have at least 2 dimensions");
    int64_t batch = x.dims()[batch_axis_], time = x.dims()[time_axis_];
    std::vector<int64_t> lens = read_int64s(*in[1], "sequence_lens");
    if (static_cast<int64_t>(lens.size()) != batch)
      throw Error("sequence_lens has " + std::to_string(lens.size()) + " values for a batch of " +
                  std::to_string(batch));
    for (int64_t len : lens)
      if (len < 0 || len > time)
        throw Error("sequence length " + std::to_string(len) + " is outside [0, " + std::to_string(time) + "]");
    int64_t inner = x.size() / std::max<int64_t>(batch * time, 1);
    Tensor y = Tensor::uninitialized(x.dtype(), x.dims());
    visit_storage(x.dtype(), "ReverseSequence", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(x);
      T* dst = mutable_elements<T>(y);
      auto row = [&](int64_t b, int64_t t) { return (batch_axis_ == 0 ? b * time + t : t * batch + b) * inner; };
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < time; ++t)
          copy_elements(src + row(b, t < lens[b] ? lens[b] - 1 - t : t), dst + row(b, t), inner);
    });
    out[0] = std::move(y);
  }

 private:
  int64_t batch_axis_, time_axis_;
};

}  // namespace

void register_gather_kernels(KernelRegistry& r) {
  r.add("", "Gather", 1, kLatestOpset, kernel_factory<GatherKernel>());
  r.add("", "GatherElements", 11, kLatestOpset, kernel_factory<GatherElementsKernel>());
  r.add("", "GatherND", 11, kLatestOpset, kernel_factory<GatherNDKernel>());
  r.add("", "ScatterND", 11, kLatestOpset, kernel_factory<ScatterNDKernel>());
  r.add("", "ScatterElements", 11, kLatestOpset, kernel_factory<ScatterElementsKernel>());
  r.add("", "Scatter", 9, 10, kernel_factory<ScatterElementsKernel>());
  r.add("", "Compress", 9, kLatestOpset, kernel_factory<CompressKernel>());
  r.add("", "NonZero", 9, kLatestOpset, kernel_factory<NonZeroKernel>());
  r.add("", "ReverseSequence", 10, kLatestOpset, kernel_factory<ReverseSequenceKernel>());
}

}  // namespace onnxptq::engine::shape
