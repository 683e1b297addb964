// Softmax, LogSoftmax and Hardmax.
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1): [d0*..*d(axis-1),
// d(axis)*..*d(n-1)], and each row is normalised. From opset 13 the normalisation runs along
// the single axis `axis` (default -1). Both are the layout [outer, n, inner]: inner is 1 for
// the coerced form and for the last axis (the transformer case), which has its own row loop.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/kernels/reduce.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

enum class SoftmaxOp { Softmax, LogSoftmax, Hardmax };

template <class T>
inline T softmax_exp(T x) {
  if constexpr (std::is_same_v<T, float>) return reduce_exp_nonpositive(x);
  else return std::exp(x);
}

// Maximum of n contiguous values, NaN if any is NaN.
template <class T>
T softmax_row_max(const T* x, int64_t n) {
  T lanes[8];
  for (T& l : lanes) l = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] = reduce_max_nan(lanes[j], x[i + j]);
  T m = lanes[0];
  for (int j = 1; j < 8; ++j) m = reduce_max_nan(m, lanes[j]);
  for (; i < n; ++i) m = reduce_max_nan(m, x[i]);
  return m;
}

// One contiguous row (inner == 1).
template <SoftmaxOp Op, class T>
void softmax_row(const T* x, T* y, int64_t n) {
  const T m = softmax_row_max(x, n);
  T sum = 0;
  if constexpr (Op == SoftmaxOp::Softmax) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      T e = softmax_exp(x[i] - m);
      y[i] = e;
      sum += e;
    }
    const T scale = T(1) / sum;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= scale;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += softmax_exp(x[i] - m);
    const T log_sum = std::log(sum);  // kept apart from m: x - (m + log_sum) loses digits for large x
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_sum;
  }
}

// Columns [c0, c0 + cols) of one [n, inner] slice: every step works on a contiguous row.
template <SoftmaxOp Op, class T>
void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t cols, T* m, T* sum) {
  for (int64_t j = 0; j < cols; ++j) {
    m[j] = -std::numeric_limits<T>::infinity();
    sum[j] = 0;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < cols; ++j) m[j] = reduce_max_nan(m[j], x[r * inner + j]);
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    T* yr = y + r * inner;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      T e = softmax_exp(xr[j] - m[j]);
      if constexpr (Op == SoftmaxOp::Softmax) yr[j] = e;
      sum[j] += e;
    }
  }
  if constexpr (Op == SoftmaxOp::Softmax) {
    for (int64_t j = 0; j < cols; ++j) sum[j] = T(1) / sum[j];
    for (int64_t r = 0; r < n; ++r) {
      T* yr = y + r * inner;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) yr[j] *= sum[j];
    }
  } else {
    for (int64_t j = 0; j < cols; ++j) sum[j] = std::log(sum[j]);
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * inner;
      T* yr = y + r * inner;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m[j]) - sum[j];
    }
  }
}

// Hardmax: 1 at the first maximum of each slice (NaN counts as the maximum), 0 elsewhere.
template <class T>
void hardmax_slice(const T* x, T* y, int64_t n, int64_t inner) {
  int64_t best = 0;
  for (int64_t r = 1; r < n; ++r) {
    T v = x[r * inner], b = x[best * inner];
    if (b == b && (v > b || v != v)) best = r;
  }
  for (int64_t r = 0; r < n; ++r) y[r * inner] = T(r == best ? 1 : 0);
}

template <SoftmaxOp Op, class T>
void softmax_compute(const RunContext& ctx, const T* x, T* y, AxisSplit s) {
  if (s.n == 0 || s.outer == 0 || s.inner == 0) return;
  const int64_t slice = s.n * s.inner;
  if constexpr (Op == SoftmaxOp::Hardmax) {
    parallel_for(ctx.threads, s.outer * s.inner, std::max<int64_t>(1, 16384 / s.n), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t o = i / s.inner, j = i % s.inner;
        hardmax_slice(x + o * slice + j, y + o * slice + j, s.n, s.inner);
      }
    });
  } else if (s.inner == 1) {
    parallel_for(ctx.threads, s.outer, std::max<int64_t>(1, 16384 / s.n), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) softmax_row<Op>(x + o * s.n, y + o * s.n, s.n);
    });
  } else {
    constexpr int64_t kBlock = 512;
    const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
    parallel_for(ctx.threads, s.outer * blocks, std::max<int64_t>(1, 16384 / (s.n * std::min(kBlock, s.inner))),
                 [&](int64_t begin, int64_t end) {
      T m[kBlock], sum[kBlock];
      for (int64_t item = begin; item < end; ++item) {
        int64_t o = item / blocks, c0 = (item % blocks) * kBlock;
        softmax_columns<Op>(x + o * slice + c0, y + o * slice + c0, s.n, s.inner, std::min(kBlock, s.inner - c0), m, sum);
      }
    });
  }
}

template <SoftmaxOp Op>
class SoftmaxKernel : public Kernel {
 public:
  explicit SoftmaxKernel(const KernelInfo& info)
      : op_type_(info.node.op_type),
        coerce_2d_(info.opset < 13),
        axis_(info.node.attr_int("axis", info.opset < 13 ? 1 : -1)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const auto& dims = x.dims();
    const int64_t rank = static_cast<int64_t>(dims.size());
    AxisSplit s;
    if (coerce_2d_) {
      // The 2-D view may put the whole tensor in the first dimension (axis == rank).
      if (axis_ < -rank || axis_ > rank)
        throw Error("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(rank));
      const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
      for (int64_t i = 0; i < rank; ++i) (i < axis ? s.outer : s.n) *= dims[i];
    } else {
      s = reduce_split_at_axis(dims, normalize_axis(axis_, rank));
    }
    const DataType type = x.dtype();
    if (reduce_is_half(type)) {
      Tensor xf = as_float32(x);
      Tensor yf = Tensor::uninitialized(DataType::Float, dims);
      softmax_compute<Op>(ctx, xf.values<float>().data(), yf.mutable_values<float>().data(), s);
      out[0] = float32_as(yf, type);
      return;
    }
    Tensor y = Tensor::uninitialized(type, dims);
    bool known = reduce_visit_type<float, double>(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_compute<Op>(ctx, x.values<T>().data(), y.mutable_values<T>().data(), s);
    });
    if (!known) throw Error(op_type_ + " does not take " + reduce_type_name(type) + " tensors");
    out[0] = std::move(y);
  }

 private:
  std::string op_type_;
  bool coerce_2d_;
  int64_t axis_;
};

}  // namespace

void reduce_register_softmax(KernelRegistry& r) {
  // Opsets 1 and 11 (coerced to 2-D) differ only in accepting a negative axis.
  r.add("", "Softmax", 1, kLatestOpset, kernel_factory<SoftmaxKernel<SoftmaxOp::Softmax>>());
  r.add("", "LogSoftmax", 1, kLatestOpset, kernel_factory<SoftmaxKernel<SoftmaxOp::LogSoftmax>>());
  r.add("", "Hardmax", 1, kLatestOpset, kernel_factory<SoftmaxKernel<SoftmaxOp::Hardmax>>());
}

}  // namespace onnxptq::engine
