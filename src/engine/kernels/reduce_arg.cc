// ArgMax, ArgMin, TopK and CumSum: operations along one axis, on the layout [outer, n, inner].
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/kernels/reduce.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

// Whether v replaces the best value so far. NaN counts as the extreme value (as in NumPy):
// the first NaN wins, or the last one with select_last_index.
template <bool Max, bool Last, class T>
inline bool arg_better(T v, T best) {
  if (best != best) return Last && v != v;
  if (v != v) return true;
  if constexpr (Max) return Last ? v >= best : v > best;
  else return Last ? v <= best : v < best;
}

template <bool Max, bool Last, class T>
void arg_compute(const RunContext& ctx, const T* x, int64_t* y, AxisSplit s) {
  const int64_t slice = s.n * s.inner;
  if (s.inner == 1) {
    parallel_for(ctx.threads, s.outer, std::max<int64_t>(1, 16384 / s.n), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* xs = x + o * slice;
        int64_t best = 0;
        for (int64_t r = 1; r < s.n; ++r)
          if (arg_better<Max, Last>(xs[r], xs[best])) best = r;
        y[o] = best;
      }
    });
    return;
  }
  // Another axis (e.g. the channels of N x C x H x W): whole rows of `inner` at a time, for
  // blocks of columns, so that memory is read in order.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
  parallel_for(ctx.threads, s.outer * blocks, std::max<int64_t>(1, 16384 / (s.n * kBlock)), [&](int64_t begin, int64_t end) {
    T best[kBlock];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t o = item / blocks, c0 = (item % blocks) * kBlock, cols = std::min(kBlock, s.inner - c0);
      const T* xs = x + o * slice + c0;
      int64_t* ys = y + o * s.inner + c0;
      for (int64_t j = 0; j < cols; ++j) {
        best[j] = xs[j];
        ys[j] = 0;
      }
      for (int64_t r = 1; r < s.n; ++r) {
        const T* row = xs + r * s.inner;
        for (int64_t j = 0; j < cols; ++j)
          if (arg_better<Max, Last>(row[j], best[j])) {
            best[j] = row[j];
            ys[j] = r;
          }
      }
    }
  });
}

template <bool Max>
class ArgKernel : public Kernel {
 public:
  explicit ArgKernel(const KernelInfo& info)
      : op_type_(info.node.op_type),
        axis_(info.node.attr_int("axis", 0)),
        keepdims_(info.node.attr_int("keepdims", 1) != 0),
        select_last_index_(info.opset >= 12 && info.node.attr_int("select_last_index", 0) != 0) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) throw Error(op_type_ + " needs an input of rank 1 or more, got a scalar");
    const int64_t axis = normalize_axis(axis_, rank);
    const AxisSplit s = reduce_split_at_axis(x.dims(), axis);
    std::vector<int64_t> out_dims = x.dims();
    if (keepdims_) out_dims[axis] = 1;
    else out_dims.erase(out_dims.begin() + axis);
    Tensor y = Tensor::uninitialized(DataType::Int64, out_dims);
    if (y.size() == 0) {
      out[0] = std::move(y);
      return;
    }
    if (s.n == 0) throw Error(op_type_ + " along axis " + std::to_string(axis) + " of size 0 of " + ir::dims_to_string(x.dims()));
    const Tensor xf = reduce_is_half(x.dtype()) ? as_float32(x) : x;  // the conversion keeps order and ties
    int64_t* yp = y.mutable_values<int64_t>().data();
    bool known = reduce_visit_type<float, double, int64_t, int32_t, uint64_t, uint32_t, int16_t, uint16_t, int8_t, uint8_t>(
        xf.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* xp = xf.values<T>().data();
          if (select_last_index_) arg_compute<Max, true>(ctx, xp, yp, s);
          else arg_compute<Max, false>(ctx, xp, yp, s);
        });
    if (!known) throw Error(op_type_ + " does not take " + reduce_type_name(x.dtype()) + " tensors");
    out[0] = std::move(y);
  }

 private:
  std::string op_type_;
  int64_t axis_;
  bool keepdims_;
  bool select_last_index_;
};

// TopK: the k largest (or smallest) values along the axis, in order, ties broken by the lower
// index. NaN sorts above every number, as in NumPy.
template <class T>
inline bool topk_greater(T a, T b) {
  if (a != a) return b == b;
  if (b != b) return false;
  return a > b;
}

template <class T>
void topk_compute(const RunContext& ctx, const T* x, T* values, int64_t* indices, AxisSplit s, int64_t k, bool largest) {
  const int64_t slice = s.n * s.inner, out_slice = k * s.inner;
  parallel_for(ctx.threads, s.outer * s.inner, std::max<int64_t>(1, 4096 / s.n), [&](int64_t begin, int64_t end) {
    std::vector<T> v(static_cast<size_t>(s.n));
    std::vector<int64_t> order(static_cast<size_t>(s.n));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t o = i / s.inner, j = i % s.inner;
      for (int64_t r = 0; r < s.n; ++r) v[r] = x[o * slice + r * s.inner + j];
      std::iota(order.begin(), order.end(), int64_t{0});
      auto before = [&](int64_t a, int64_t b) {
        const T va = v[a], vb = v[b];
        if (largest ? topk_greater(va, vb) : topk_greater(vb, va)) return true;
        if (largest ? topk_greater(vb, va) : topk_greater(va, vb)) return false;
        return a < b;
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t r = 0; r < k; ++r) {
        values[o * out_slice + r * s.inner + j] = v[order[r]];
        indices[o * out_slice + r * s.inner + j] = order[r];
      }
    }
  });
}

class TopKKernel : public Kernel {
 public:
  explicit TopKKernel(const KernelInfo& info)
      : k_from_input_(info.opset >= 10),
        axis_(info.node.attr_int("axis", -1)),
        largest_(info.opset < 11 || info.node.attr_int("largest", 1) != 0) {
    if (!k_from_input_) {
      k_ = info.node.attr_int("k", -1);
      if (k_ < 0) throw Error("TopK needs a k attribute of 0 or more at opset " + std::to_string(info.opset) + ", got " + std::to_string(k_));
    }
    // sorted = 0 leaves the order open: the values come sorted either way.
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) throw Error("TopK needs an input of rank 1 or more, got a scalar");
    const int64_t axis = normalize_axis(axis_, rank);
    int64_t k = k_;
    if (k_from_input_) {
      if (in.size() < 2 || !in[1]) throw Error("TopK needs the K input");
      std::vector<int64_t> kv = read_int64s(*in[1], "K");
      if (kv.size() != 1) throw Error("K must hold one value, got " + std::to_string(kv.size()));
      k = kv[0];
    }
    const AxisSplit s = reduce_split_at_axis(x.dims(), axis);
    if (k < 0 || k > s.n)
      throw Error("K = " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) + " of size " + std::to_string(s.n));
    std::vector<int64_t> out_dims = x.dims();
    out_dims[axis] = k;
    Tensor indices = Tensor::uninitialized(DataType::Int64, out_dims);
    const Tensor xf = reduce_is_half(x.dtype()) ? as_float32(x) : x;  // values survive the round trip
    Tensor values = Tensor::uninitialized(xf.dtype(), out_dims);
    if (values.size() > 0) {
      bool known = reduce_visit_type<float, double, int64_t, int32_t, uint64_t, uint32_t, int16_t, uint16_t, int8_t, uint8_t>(
          xf.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            topk_compute(ctx, xf.values<T>().data(), values.mutable_values<T>().data(),
                         indices.mutable_values<int64_t>().data(), s, k, largest_);
          });
      if (!known) throw Error("TopK does not take " + reduce_type_name(x.dtype()) + " tensors");
    }
    out[0] = reduce_is_half(x.dtype()) ? float32_as(values, x.dtype()) : std::move(values);
    if (out.size() > 1) out[1] = std::move(indices);
  }

 private:
  bool k_from_input_;
  int64_t axis_;
  bool largest_;
  int64_t k_ = 0;
};

// CumSum along the axis; exclusive leaves out the element itself, reverse runs from the end.
template <class T>
void cumsum_compute(const RunContext& ctx, const T* x, T* y, AxisSplit s, bool exclusive, bool reverse) {
  const int64_t slice = s.n * s.inner;
  parallel_for(ctx.threads, s.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(slice, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* xs = x + o * slice;
      T* ys = y + o * slice;
      for (int64_t step = 0; step < s.n; ++step) {
        const int64_t r = reverse ? s.n - 1 - step : step;
        const int64_t prev = reverse ? r + 1 : r - 1;
        T* yr = ys + r * s.inner;
        if (step == 0) {
          for (int64_t j = 0; j < s.inner; ++j) yr[j] = exclusive ? T(0) : xs[r * s.inner + j];
        } else {
          const T* add = xs + (exclusive ? prev : r) * s.inner;
          const T* yp = ys + prev * s.inner;
#pragma omp simd
          for (int64_t j = 0; j < s.inner; ++j) yr[j] = yp[j] + add[j];
        }
      }
    }
  });
}

class CumSumKernel : public Kernel {
 public:
  explicit CumSumKernel(const KernelInfo& info)
      : exclusive_(info.node.attr_int("exclusive", 0) != 0), reverse_(info.node.attr_int("reverse", 0) != 0) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (in.size() < 2 || !in[1]) throw Error("CumSum needs the axis input");
    std::vector<int64_t> axis_values = read_int64s(*in[1], "axis");
    if (axis_values.size() != 1) throw Error("axis must hold one value, got " + std::to_string(axis_values.size()));
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) throw Error("CumSum needs an input of rank 1 or more, got a scalar");
    const AxisSplit s = reduce_split_at_axis(x.dims(), normalize_axis(axis_values[0], rank));
    const DataType type = x.dtype();
    if (reduce_is_half(type)) {
      Tensor xf = as_float32(x);
      Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
      cumsum_compute(ctx, xf.values<float>().data(), yf.mutable_values<float>().data(), s, exclusive_, reverse_);
      out[0] = float32_as(yf, type);
      return;
    }
    Tensor y = Tensor::uninitialized(type, x.dims());
    bool known = reduce_visit_type<float, double, int64_t, int32_t, uint64_t, uint32_t>(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      cumsum_compute(ctx, x.values<T>().data(), y.mutable_values<T>().data(), s, exclusive_, reverse_);
    });
    if (!known) throw Error("CumSum does not take " + reduce_type_name(type) + " tensors");
    out[0] = std::move(y);
  }

 private:
  bool exclusive_;
  bool reverse_;
};

}  // namespace

void reduce_register_arg(KernelRegistry& r) {
  // ArgMax/ArgMin 1 to 10 differ from 11 only in refusing a negative axis; select_last_index
  // (12) is read from opset 12 on.
  r.add("", "ArgMax", 1, kLatestOpset, kernel_factory<ArgKernel<true>>());
  r.add("", "ArgMin", 1, kLatestOpset, kernel_factory<ArgKernel<false>>());
  // TopK: k attribute before 10, K input from 10, largest and sorted from 11.
  r.add("", "TopK", 1, kLatestOpset, kernel_factory<TopKKernel>());
  r.add("", "CumSum", 11, kLatestOpset, kernel_factory<CumSumKernel>());
}

}  // namespace onnxptq::engine
