// Ops that make tensors from a shape or a pattern: ConstantOfShape, Range, EyeLike, Trilu, OneHot.
#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

// Every element of `t` set to `value` (a one-element tensor of the same type).
void fill_with(Tensor& t, const Tensor& value, std::string_view op) {
  visit_storage(t.dtype(), op, [&]<class T>(std::type_identity<T>) {
    T* dst = mutable_elements<T>(t);
    std::fill(dst, dst + t.size(), elements<T>(value)[0]);
  });
}

class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const KernelInfo& info) {
    if (const ir::Attribute* a = info.node.find_attribute("value")) {
      if (a->t.size() != 1) throw Error("value must hold exactly one element, got " + describe(a->t));
      value_ = a->t;
    } else {
      value_ = Tensor(DataType::Float, {1});
    }
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    std::vector<int64_t> dims = read_int64s(*in[0], "shape");
    checked_element_count(dims, "shape");
    Tensor y = Tensor::uninitialized(value_.dtype(), dims);
    fill_with(y, value_, "ConstantOfShape");
    out[0] = std::move(y);
  }

 private:
  Tensor value_;
};

template <class T>
Tensor range_of(const Tensor& start_t, const Tensor& limit_t, const Tensor& delta_t) {
  T start = start_t.values<T>()[0], limit = limit_t.values<T>()[0], delta = delta_t.values<T>()[0];
  if (delta == T{0}) throw Error("delta cannot be 0");
  int64_t n;
  if constexpr (std::is_floating_point_v<T>) {
    double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    if (!(count < 1e15) && count > 0) throw Error("the range holds too many values");
    n = count > 0 ? static_cast<int64_t>(count) : 0;
  } else {
    // Exact in a wider type: no overflow for any int64 operands.
    __int128 span = static_cast<__int128>(limit) - start, step = delta;
    __int128 count = (span > 0) == (step > 0) && span != 0 ? (span + step - (step > 0 ? 1 : -1)) / step : 0;
    if (count > static_cast<__int128>(1e15)) throw Error("the range holds too many values");
    n = static_cast<int64_t>(count);
  }
  std::vector<T> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  return Tensor::from_values<T>({n}, values);
}

class RangeKernel : public Kernel {
 public:
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    for (int i = 0; i < 3; ++i)
      if (in[i]->size() != 1 || in[i]->dtype() != in[0]->dtype())
        throw Error("start, limit and delta must be single values of one type, got " + describe(*in[0]) + ", " +
                    describe(*in[1]) + ", " + describe(*in[2]));
    switch (in[0]->dtype()) {
      case DataType::Float: out[0] = range_of<float>(*in[0], *in[1], *in[2]); break;
      case DataType::Double: out[0] = range_of<double>(*in[0], *in[1], *in[2]); break;
      case DataType::Int16: out[0] = range_of<int16_t>(*in[0], *in[1], *in[2]); break;
      case DataType::Int32: out[0] = range_of<int32_t>(*in[0], *in[1], *in[2]); break;
      case DataType::Int64: out[0] = range_of<int64_t>(*in[0], *in[1], *in[2]); break;
      default: throw unsupported("Range does not support " + std::string(ir::data_type_name(in[0]->dtype())));
    }
  }
};

class EyeLikeKernel : public Kernel {
 public:
  explicit EyeLikeKernel(const KernelInfo& info) : k_(info.node.attr_int("k", 0)) {
    if (info.node.find_attribute("dtype")) {
      int64_t code = info.node.attr_int("dtype", 0);
      if (!ir::data_type_is_known(static_cast<int32_t>(code)) || code == 0)
        throw Error("dtype " + std::to_string(code) + " is not a tensor element type");
      dtype_ = static_cast<DataType>(code);
    }
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() != 2) throw Error("input " + describe(x) + " must be 2-D");
    DataType dtype = dtype_.value_or(x.dtype());
    Tensor y(dtype, x.dims());
    Tensor one = filled_tensor(dtype, {1}, 1.0);
    int64_t rows = x.dims()[0], cols = x.dims()[1];
    visit_storage(dtype, "EyeLike", [&]<class T>(std::type_identity<T>) {
      T* dst = mutable_elements<T>(y);
      for (int64_t i = std::max<int64_t>(0, -k_); i < rows && i + k_ < cols; ++i)
        dst[i * cols + i + k_] = elements<T>(one)[0];
    });
    out[0] = std::move(y);
  }

 private:
  int64_t k_;
  std::optional<DataType> dtype_;
};

class TriluKernel : public Kernel {
 public:
  explicit TriluKernel(const KernelInfo& info) : upper_(info.node.attr_int("upper", 1) != 0) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error("input " + describe(x) + " must have at least 2 dimensions");
    int64_t k = 0;
    if (in.size() > 1 && in[1]) {
      std::vector<int64_t> ks = read_int64s(*in[1], "k");
      if (ks.size() != 1) throw Error("k must be a single value, got " + describe(*in[1]));
      k = ks[0];
    }
    int64_t rows = x.dims()[x.rank() - 2], cols = x.dims()[x.rank() - 1];
    k = std::clamp(k, -(rows + cols), rows + cols);  // beyond this every element is kept or zeroed
    int64_t matrices = x.size() / std::max<int64_t>(rows * cols, 1);
    Tensor y = Tensor::uninitialized(x.dtype(), x.dims());
    visit_storage(x.dtype(), "Trilu", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(x);
      T* dst = mutable_elements<T>(y);
      for (int64_t m = 0; m < matrices; ++m)
        for (int64_t i = 0; i < rows; ++i) {
          int64_t at = (m * rows + i) * cols;
          // Columns [keep_begin, keep_end) of row i are kept: j - i >= k (upper) or j - i <= k (lower).
          int64_t keep_begin = upper_ ? std::clamp(i + k, int64_t{0}, cols) : 0;
          int64_t keep_end = upper_ ? cols : std::clamp(i + k + 1, int64_t{0}, cols);
          std::fill(dst + at, dst + at + keep_begin, T{});
          copy_elements(src + at + keep_begin, dst + at + keep_begin, keep_end - keep_begin);
          std::fill(dst + at + std::max(keep_begin, keep_end), dst + at + cols, T{});
        }
    });
    out[0] = std::move(y);
  }

 private:
  bool upper_;
};

class OneHotKernel : public Kernel {
 public:
  explicit OneHotKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", -1)) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& indices = *in[0];
    const Tensor& values = *in[2];
    if (in[1]->size() != 1) throw Error("depth must be a single value, got " + describe(*in[1]));
    int64_t depth = read_as_int64(*in[1], "depth")[0];
    if (depth < 0) throw Error("depth " + std::to_string(depth) + " is negative");
    if (values.size() != 2) throw Error("values must hold [off, on], got " + describe(values));
    std::vector<int64_t> idx = read_as_int64(indices, "indices");
    int64_t axis = normalize_axis(axis_, static_cast<int64_t>(indices.rank()) + 1);
    std::vector<int64_t> dims = indices.dims();
    dims.insert(dims.begin() + axis, depth);
    checked_element_count(dims, "output shape");
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= indices.dims()[i];
    int64_t inner = indices.size() / std::max<int64_t>(outer, 1);
    Tensor y = Tensor::uninitialized(values.dtype(), dims);
    visit_storage(values.dtype(), "OneHot", [&]<class T>(std::type_identity<T>) {
      const T* v = elements<T>(values);
      T* dst = mutable_elements<T>(y);
      std::fill(dst, dst + y.size(), v[0]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t at = idx[o * inner + i];
          if (at < 0) at += depth;  // indices outside [-depth, depth) give an all-off row
          if (at >= 0 && at < depth) dst[(o * depth + at) * inner + i] = v[1];
        }
    });
    out[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

}  // namespace

void register_generate_kernels(KernelRegistry& r) {
  r.add("", "ConstantOfShape", 9, kLatestOpset, kernel_factory<ConstantOfShapeKernel>());
  r.add("", "Range", 11, kLatestOpset, kernel_factory<RangeKernel>());
  r.add("", "EyeLike", 9, kLatestOpset, kernel_factory<EyeLikeKernel>());
  r.add("", "Trilu", 14, kLatestOpset, kernel_factory<TriluKernel>());
  r.add("", "OneHot", 9, kLatestOpset, kernel_factory<OneHotKernel>());
}

}  // namespace onnxptq::engine::shape
