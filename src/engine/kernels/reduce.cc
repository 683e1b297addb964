// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare,
// ReduceLogSum and ReduceLogSumExp over any set of axes.
//
// The input is seen with its size-1 dimensions dropped and neighbouring dimensions of the same
// kind (kept or reduced) merged. Two layouts cover nearly every model: [kept, reduced] (the
// innermost axes, e.g. ReduceMean over the last axis or over H*W) reduces contiguous rows, and
// [kept, reduced, kept] (e.g. over the channel axis) accumulates whole rows into a vector of
// results. Any other layout is first transposed into [kept, reduced].
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "engine/kernels/reduce.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// What a reduction over T accumulates in: T for floats and bool, 64 bits for integers (sums
// of int32 give the same result modulo 2^32 as accumulating in int32).
template <class T>
using ReduceAcc = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, bool>, T,
                                     std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// A reduction as init, pre (applied to each element), combine and finish (applied to the
// result, given the number of elements). ReduceLogSumExp has its own code (it shifts by the max).
template <ReduceOp Op, class A>
struct Reducer {
  static A init() {
    if constexpr (Op == ReduceOp::Max)
      return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
    else if constexpr (Op == ReduceOp::Min)
      return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
    else if constexpr (Op == ReduceOp::Prod)
      return A(1);
    else
      return A(0);
  }
  static A pre(A x) {
    if constexpr (Op == ReduceOp::L1) {
      if constexpr (std::is_floating_point_v<A>) return std::fabs(x);
      else if constexpr (std::is_signed_v<A>) return x < 0 ? -x : x;
      else return x;
    } else if constexpr (Op == ReduceOp::L2 || Op == ReduceOp::SumSquare) {
      return x * x;
    } else {
      return x;
    }
  }
  static A combine(A a, A b) {
    if constexpr (Op == ReduceOp::Max) return reduce_max_nan(a, b);
    else if constexpr (Op == ReduceOp::Min) return reduce_min_nan(a, b);
    else if constexpr (Op == ReduceOp::Prod) return a * b;
    else return a + b;
  }
  static A finish(A a, int64_t n) {
    if constexpr (Op == ReduceOp::Mean) {
      if constexpr (std::is_floating_point_v<A>) return a / static_cast<A>(n);
      else return n > 0 ? static_cast<A>(a / static_cast<A>(n)) : A(0);
    } else if constexpr (Op == ReduceOp::L2) {
      if constexpr (std::is_floating_point_v<A>) return std::sqrt(a);
      else return static_cast<A>(std::sqrt(static_cast<double>(a)));
    } else if constexpr (Op == ReduceOp::LogSum) {
      if constexpr (std::is_floating_point_v<A>) return std::log(a);
      else return a > 0 ? static_cast<A>(std::log(static_cast<double>(a))) : std::numeric_limits<A>::lowest();
    } else {
      return a;
    }
  }
};

// The result of reducing no element at all (a reduced axis of size 0).
template <ReduceOp Op, class T>
T reduce_empty_value() {
  using A = ReduceAcc<T>;
  if constexpr (Op == ReduceOp::LogSumExp) {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  } else if constexpr (Op == ReduceOp::Mean && std::is_floating_point_v<T>) {
    return std::numeric_limits<T>::quiet_NaN();
  } else {
    return static_cast<T>(Reducer<Op, A>::finish(Reducer<Op, A>::init(), 0));
  }
}

// The floating type ReduceLogSumExp computes in.
template <class T>
using ReduceFloat = std::conditional_t<std::is_floating_point_v<T>, T, double>;

// Combines n contiguous elements. Eight independent lanes let the compiler vectorise without
// reordering a single running sum.
template <ReduceOp Op, class T>
ReduceAcc<T> reduce_contiguous(const T* x, int64_t n) {
  using A = ReduceAcc<T>;
  using R = Reducer<Op, A>;
  A lanes[8];
  for (A& l : lanes) l = R::init();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] = R::combine(lanes[j], R::pre(static_cast<A>(x[i + j])));
  A acc = lanes[0];
  for (int j = 1; j < 8; ++j) acc = R::combine(acc, lanes[j]);
  for (; i < n; ++i) acc = R::combine(acc, R::pre(static_cast<A>(x[i])));
  return acc;
}

// log(sum(exp(x))) of n contiguous elements, shifted by their maximum so that exp cannot
// overflow; infinite or NaN maxima give their own answer through the unshifted sum.
template <class T>
T reduce_log_sum_exp_contiguous(const T* x, int64_t n) {
  using F = ReduceFloat<T>;
  F m = static_cast<F>(reduce_contiguous<ReduceOp::Max>(x, n));
  F shift = std::isfinite(m) ? m : F(0);
  F sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<F>(x[i]) - shift);
  return static_cast<T>(std::log(sum) + shift);
}

// Layout [K, R]: y[k] = reduction of the row x[k*R .. k*R+R).
template <ReduceOp Op, class T>
void reduce_rows(const RunContext& ctx, const T* x, T* y, int64_t K, int64_t R) {
  using A = ReduceAcc<T>;
  using Red = Reducer<Op, A>;
  if constexpr (Op != ReduceOp::LogSumExp) {
    // Few long rows (a reduction to a scalar): split each row over the threads.
    if (K < ctx.threads && R >= (int64_t{1} << 16)) {
      const int64_t parts = ctx.threads;
      std::vector<A> partial(static_cast<size_t>(K * parts));
      parallel_for(ctx.threads, K * parts, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          int64_t k = i / parts, p = i % parts;
          int64_t lo = R * p / parts, hi = R * (p + 1) / parts;
          partial[i] = reduce_contiguous<Op>(x + k * R + lo, hi - lo);
        }
      });
      for (int64_t k = 0; k < K; ++k) {
        A acc = partial[k * parts];
        for (int64_t p = 1; p < parts; ++p) acc = Red::combine(acc, partial[k * parts + p]);
        y[k] = static_cast<T>(Red::finish(acc, R));
      }
      return;
    }
  }
  parallel_for(ctx.threads, K, std::max<int64_t>(1, 32768 / R), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      if constexpr (Op == ReduceOp::LogSumExp) y[k] = reduce_log_sum_exp_contiguous(x + k * R, R);
      else y[k] = static_cast<T>(Red::finish(reduce_contiguous<Op>(x + k * R, R), R));
    }
  });
}

// Layout [K1, R, K2]: y[k1, j] = reduction over r of x[k1, r, j]; whole rows of K2 are
// accumulated at once (contiguous, vectorised), in blocks of columns split over the threads.
template <ReduceOp Op, class T>
void reduce_columns(const RunContext& ctx, const T* x, T* y, int64_t K1, int64_t R, int64_t K2) {
  using A = ReduceAcc<T>;
  using Red = Reducer<Op, A>;
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (K2 + kBlock - 1) / kBlock;
  parallel_for(ctx.threads, K1 * blocks, std::max<int64_t>(1, 32768 / (R * std::min(K2, kBlock))),
               [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t k1 = item / blocks, c0 = (item % blocks) * kBlock, cols = std::min(kBlock, K2 - c0);
      const T* xs = x + k1 * R * K2 + c0;
      T* ys = y + k1 * K2 + c0;
      if constexpr (Op == ReduceOp::LogSumExp) {
        using F = ReduceFloat<T>;
        F shift[kBlock], sum[kBlock];
        for (int64_t j = 0; j < cols; ++j) shift[j] = -std::numeric_limits<F>::infinity();
        for (int64_t r = 0; r < R; ++r)
          for (int64_t j = 0; j < cols; ++j) shift[j] = reduce_max_nan(shift[j], static_cast<F>(xs[r * K2 + j]));
        for (int64_t j = 0; j < cols; ++j) {
          if (!std::isfinite(shift[j])) shift[j] = 0;
          sum[j] = 0;
        }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t j = 0; j < cols; ++j) sum[j] += std::exp(static_cast<F>(xs[r * K2 + j]) - shift[j]);
        for (int64_t j = 0; j < cols; ++j) ys[j] = static_cast<T>(std::log(sum[j]) + shift[j]);
      } else {
        A acc[kBlock];
        for (int64_t j = 0; j < cols; ++j) acc[j] = Red::init();
        for (int64_t r = 0; r < R; ++r) {
          const T* row = xs + r * K2;
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) acc[j] = Red::combine(acc[j], Red::pre(static_cast<A>(row[j])));
        }
        for (int64_t j = 0; j < cols; ++j) ys[j] = static_cast<T>(Red::finish(acc[j], R));
      }
    }
  });
}

// y = x with its axes permuted: y's axis i is x's axis perm[i].
template <class T>
void reduce_transpose(const T* x, T* y, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  const size_t rank = dims.size();
  std::vector<int64_t> in_strides(rank, 1), out_dims(rank), step(rank), index(rank, 0);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * dims[i];
  for (size_t i = 0; i < rank; ++i) {
    out_dims[i] = dims[perm[i]];
    step[i] = in_strides[perm[i]];
  }
  const int64_t total = ir::element_count(dims), inner = out_dims[rank - 1], inner_step = step[rank - 1];
  int64_t offset = 0;
  for (int64_t o = 0; o < total; o += inner) {
    for (int64_t j = 0; j < inner; ++j) y[o + j] = x[offset + j * inner_step];
    for (size_t i = rank - 1; i-- > 0;) {  // odometer over the outer output axes
      offset += step[i];
      if (++index[i] < out_dims[i]) break;
      offset -= step[i] * out_dims[i];
      index[i] = 0;
    }
  }
}

template <ReduceOp Op, class T>
void reduce_compute(const RunContext& ctx, const T* x, T* y, const std::vector<int64_t>& dims,
                    const std::vector<bool>& reduced) {
  int64_t K = 1, R = 1;
  for (size_t i = 0; i < dims.size(); ++i) (reduced[i] ? R : K) *= dims[i];
  if (K == 0) return;
  if (R == 0) {
    std::fill(y, y + K, reduce_empty_value<Op, T>());
    return;
  }
  // Segments of merged dimensions, size-1 dimensions dropped.
  std::vector<int64_t> seg_size;
  std::vector<bool> seg_reduced;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!seg_size.empty() && seg_reduced.back() == reduced[i]) {
      seg_size.back() *= dims[i];
    } else {
      seg_size.push_back(dims[i]);
      seg_reduced.push_back(reduced[i]);
    }
  }
  const size_t n = seg_size.size();
  if (n == 0 || (n <= 2 && seg_reduced.back()) || (n == 1 && !seg_reduced[0])) {
    reduce_rows<Op>(ctx, x, y, K, R);  // [R], [K, R], or nothing to reduce: [K] with R = 1
  } else if (n == 2 && seg_reduced[0]) {
    reduce_columns<Op>(ctx, x, y, 1, R, K);  // [R, K]
  } else if (n == 3 && seg_reduced[1]) {
    reduce_columns<Op>(ctx, x, y, seg_size[0], R, seg_size[2]);  // [K1, R, K2]
  } else {
    std::vector<int64_t> perm;
    for (size_t i = 0; i < n; ++i)
      if (!seg_reduced[i]) perm.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < n; ++i)
      if (seg_reduced[i]) perm.push_back(static_cast<int64_t>(i));
    std::unique_ptr<T[]> moved(new T[static_cast<size_t>(K * R)]);  // not vector: T may be bool
    reduce_transpose(x, moved.get(), seg_size, perm);
    reduce_rows<Op>(ctx, moved.get(), y, K, R);
  }
}

template <ReduceOp Op>
class ReduceKernel : public Kernel {
 public:
  explicit ReduceKernel(const KernelInfo& info) : op_type_(info.node.op_type) {
    const ir::Node& node = info.node;
    keepdims_ = node.attr_int("keepdims", 1) != 0;
    // ReduceSum takes its axes as an input from opset 13, the other reductions from opset 18.
    axes_from_input_ = info.opset >= (Op == ReduceOp::Sum ? 13 : 18);
    if (axes_from_input_) {
      if (node.find_attribute("axes"))
        throw Error("the axes attribute is not allowed at opset " + std::to_string(info.opset) +
                    ": axes are given as the second input");
      noop_with_empty_axes_ = node.attr_int("noop_with_empty_axes", 0) != 0;
    } else {
      axes_ = node.attr_ints("axes", {});
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_ && in.size() > 1 && in[1]) axes = read_int64s(*in[1], "axes");
    if (axes.empty() && noop_with_empty_axes_) {
      out[0] = x;
      return;
    }
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0 && !axes.empty()) throw Error("axes " + ir::dims_to_string(axes) + " given for a scalar input");
    std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
    for (int64_t a : axes) {
      int64_t axis = normalize_axis(a, rank, "axes value");
      if (reduced[axis]) throw Error("axes " + ir::dims_to_string(axes) + " name axis " + std::to_string(axis) + " twice");
      reduced[axis] = true;
    }
    std::vector<int64_t> out_dims;
    for (int64_t i = 0; i < rank; ++i) {
      if (!reduced[i]) out_dims.push_back(x.dims()[i]);
      else if (keepdims_) out_dims.push_back(1);
    }

    const DataType type = x.dtype();
    if (reduce_is_half(type)) {
      Tensor xf = as_float32(x);
      Tensor yf = Tensor::uninitialized(DataType::Float, out_dims);
      reduce_compute<Op>(ctx, xf.values<float>().data(), yf.mutable_values<float>().data(), x.dims(), reduced);
      out[0] = float32_as(yf, type);
      return;
    }
    Tensor y = Tensor::uninitialized(type, out_dims);
    auto compute = [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_compute<Op>(ctx, x.values<T>().data(), y.mutable_values<T>().data(), x.dims(), reduced);
    };
    bool known;
    if constexpr (Op == ReduceOp::Max || Op == ReduceOp::Min)
      known = reduce_visit_type<float, double, int64_t, int32_t, uint64_t, uint32_t, int16_t, uint16_t, int8_t, uint8_t, bool>(type, compute);
    else
      known = reduce_visit_type<float, double, int64_t, int32_t, uint64_t, uint32_t, int16_t, uint16_t, int8_t, uint8_t>(type, compute);
    if (!known) throw Error(op_type_ + " does not take " + reduce_type_name(type) + " tensors");
    out[0] = std::move(y);
  }

 private:
  std::string op_type_;
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_with_empty_axes_ = false;
  std::vector<int64_t> axes_;
};

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  // Opset 1 to 10 differ from 11 only in refusing negative axes, 11 to 12 from 13 only in
  // types; the axes input (13 for ReduceSum, 18 for the others) is handled by the kernel.
  r.add("", "ReduceSum", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::Sum>>());
  r.add("", "ReduceMean", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::Mean>>());
  r.add("", "ReduceMax", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::Max>>());
  r.add("", "ReduceMin", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::Min>>());
  r.add("", "ReduceProd", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::Prod>>());
  r.add("", "ReduceL1", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::L1>>());
  r.add("", "ReduceL2", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::L2>>());
  r.add("", "ReduceSumSquare", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::SumSquare>>());
  r.add("", "ReduceLogSum", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::LogSum>>());
  r.add("", "ReduceLogSumExp", 1, kLatestOpset, kernel_factory<ReduceKernel<ReduceOp::LogSumExp>>());
  reduce_register_softmax(r);
  reduce_register_arg(r);
}

}  // namespace onnxptq::engine
