// MaxPool, AveragePool, LpPool, GlobalAveragePool and GlobalMaxPool over N x C x D1 x ... x Dk.
//
// The sliding pools take 1 to 3 spatial axes, handled as 3 (missing leading axes have size 1).
// The window of each output position is clipped to the input once per axis before the loops,
// so the inner loops read only valid elements and never test bounds.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "engine/fusion.h"
#include "engine/kernels/norm_pool.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

enum class PoolOp { Max, Average, Lp };

int64_t pool_ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// One spatial axis: sizes, and per output position the range of kernel taps inside the input.
struct PoolAxis {
  int64_t in = 1, out = 1, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0;
  std::vector<int64_t> first, last;  // taps [first[o], last[o]) fall inside the input
  std::vector<int64_t> padded_taps;  // taps inside the input with its pads (count_include_pad)
  int64_t interior_lo = 0, interior_hi = 0;  // outputs [lo, hi) have every tap inside the input

  void prepare_taps() {
    first.resize(out);
    last.resize(out);
    padded_taps.resize(out);
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * stride - pad_begin;
      first[o] = start >= 0 ? 0 : std::min(kernel, pool_ceil_div(-start, dilation));
      last[o] = std::max(first[o], std::min(kernel, pool_ceil_div(in - start, dilation)));
      padded_taps[o] = std::max<int64_t>(0, std::min(kernel, pool_ceil_div(in + pad_end - start, dilation)));
    }
    const int64_t extent = (kernel - 1) * dilation + 1;
    interior_lo = std::min(out, pool_ceil_div(pad_begin, stride));
    interior_hi = in + pad_begin >= extent ? std::min(out, (in + pad_begin - extent) / stride + 1) : 0;
    interior_hi = std::max(interior_hi, interior_lo);
  }
  int64_t start(int64_t o) const { return o * stride - pad_begin; }
};

struct PoolAttributes {
  std::string op_type;
  std::vector<int64_t> kernel, strides, pads, dilations;
  std::string auto_pad;
  bool ceil_mode = false;

  explicit PoolAttributes(const ir::Node& node) : op_type(node.op_type) {
    kernel = node.attr_ints("kernel_shape", {});
    const size_t k = kernel.size();
    if (k == 0) throw Error(op_type + " needs the kernel_shape attribute");
    if (k > 3) throw unsupported(op_type + " over " + std::to_string(k) + " spatial axes is not supported (at most 3)");
    strides = node.attr_ints("strides", std::vector<int64_t>(k, 1));
    pads = node.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
    dilations = node.attr_ints("dilations", std::vector<int64_t>(k, 1));
    auto_pad = node.attr_string("auto_pad", "NOTSET");
    ceil_mode = node.attr_int("ceil_mode", 0) != 0;
    if (strides.size() != k || dilations.size() != k || pads.size() != 2 * k)
      throw Error("kernel_shape " + ir::dims_to_string(kernel) + " needs " + std::to_string(k) + " strides and dilations and " +
                  std::to_string(2 * k) + " pads, got strides " + ir::dims_to_string(strides) + ", dilations " +
                  ir::dims_to_string(dilations) + ", pads " + ir::dims_to_string(pads));
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
      throw Error("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    for (size_t i = 0; i < k; ++i) {
      if (kernel[i] < 1) throw Error("kernel_shape " + ir::dims_to_string(kernel) + " must be positive");
      if (strides[i] < 1) throw Error("strides " + ir::dims_to_string(strides) + " must be positive");
      if (dilations[i] < 1) throw Error("dilations " + ir::dims_to_string(dilations) + " must be positive");
      if (pads[i] < 0 || pads[i + k] < 0) throw Error("pads " + ir::dims_to_string(pads) + " must not be negative");
      // A window wholly in the padding would have nothing to pool.
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      if (pads[i] >= extent || pads[i + k] >= extent)
        throw Error("pads " + ir::dims_to_string(pads) + " must be smaller than the kernel " + ir::dims_to_string(kernel));
    }
  }

  // The three axes for an input of shape `dims` (N, C, spatial...), leading axes of size 1 added.
  std::array<PoolAxis, 3> axes_for(const std::vector<int64_t>& dims) const {
    const size_t k = kernel.size();
    if (dims.size() != k + 2)
      throw Error("input " + ir::dims_to_string(dims) + " does not match kernel_shape " + ir::dims_to_string(kernel) +
                  ": expected rank " + std::to_string(k + 2));
    std::array<PoolAxis, 3> axes;
    for (size_t i = 0; i < k; ++i) {
      PoolAxis& a = axes[3 - k + i];
      a.in = dims[2 + i];
      a.kernel = kernel[i];
      a.stride = strides[i];
      a.dilation = dilations[i];
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        a.out = pool_ceil_div(a.in, a.stride);
        const int64_t total = std::max<int64_t>(0, (a.out - 1) * a.stride + extent - a.in);
        a.pad_begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        a.pad_end = total - a.pad_begin;
      } else {
        if (auto_pad == "NOTSET") {
          a.pad_begin = pads[i];
          a.pad_end = pads[i + k];
        }
        const int64_t span = a.in + a.pad_begin + a.pad_end - extent;
        if (span < 0)
          throw Error("kernel extent " + std::to_string(extent) + " is larger than the padded input axis of size " +
                      std::to_string(a.in + a.pad_begin + a.pad_end) + " (input " + ir::dims_to_string(dims) + ")");
        a.out = (ceil_mode ? pool_ceil_div(span, a.stride) : span / a.stride) + 1;
        // A window that would start in the end padding is dropped.
        if (ceil_mode && (a.out - 1) * a.stride >= a.in + a.pad_begin) --a.out;
      }
      a.prepare_taps();
    }
    for (size_t i = 0; i < 3 - k; ++i) axes[i].prepare_taps();
    return axes;
  }
};

struct PoolOptions {
  bool count_include_pad = false;  // AveragePool
  // AveragePool: each column of a window summed over the window's rows first, then the columns
  // (the order of ONNX Runtime's vectorised float kernel, so that both round alike); otherwise
  // row by row. Either way the sum is then divided by the count.
  bool columns_first = false;
  bool column_major = false;       // MaxPool storage_order 1, for the Indices
  int64_t p = 2;                   // LpPool
};

// Max pools start from -infinity (the lowest value for integers) and keep the larger value: a
// NaN is skipped as by fmax (a window of NaN only gives -inf). The plain comparison compiles to
// one maxps; NaN propagation would cost four more instructions per element.
template <class T>
constexpr T pool_max_init() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
inline T pool_max(T acc, T v) {
  return v > acc ? v : acc;
}

// y[j] = combine(y[j], x[j * stride]) for j in [0, n); Stride 0: the runtime `stride`.
template <PoolOp Op, int64_t Stride, class T>
void pool_row_tap(T* y, const T* x, int64_t n, int64_t stride) {
  const int64_t step = Stride ? Stride : stride;
  if constexpr (Op == PoolOp::Max) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = pool_max(y[j], x[j * step]);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] += x[j * step];
  }
}

// The same for the K adjacent taps of a window row in one pass.
template <PoolOp Op, int64_t Stride, int64_t K, class T>
void pool_row_taps(T* y, const T* x, int64_t n) {
  static_assert(K == 2 || K == 3);
  auto combine = [](T acc, T v) {
    if constexpr (Op == PoolOp::Max) return pool_max(acc, v);
    else return acc + v;
  };
  // The taps are written out: -O2 does not unroll an inner loop before vectorising.
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    T acc = combine(combine(y[j], x[j * Stride]), x[j * Stride + 1]);
    if constexpr (K == 3) acc = combine(acc, x[j * Stride + 2]);
    y[j] = acc;
  }
}

// One output row (fixed o0, o1) at a time. The columns whose window lies wholly inside the
// input (the interior, nearly all of them) are accumulated tap by tap over the whole row, in
// vectorised loops; the border columns and the Indices and LpPool cases go one output at a
// time over their clipped windows.
template <PoolOp Op, class T>
void pool_compute(const RunContext& ctx, const T* x, T* y, int64_t* indices, int64_t planes,
                  const std::array<PoolAxis, 3>& ax, const PoolOptions& opt) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;  // Average and Lp sums
  const PoolAxis &a0 = ax[0], &a1 = ax[1], &a2 = ax[2];
  const int64_t in_plane = a0.in * a1.in * a2.in, out_plane = a0.out * a1.out * a2.out;
  const bool row_path = Op != PoolOp::Lp && indices == nullptr;
  parallel_for(ctx.threads, planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1)), [&](int64_t begin, int64_t end) {
    std::vector<T> columns(Op == PoolOp::Average && opt.columns_first ? a2.in : 0);
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * in_plane;
      for (int64_t o0 = 0; o0 < a0.out; ++o0)
        for (int64_t o1 = 0; o1 < a1.out; ++o1) {
          const int64_t s0 = a0.start(o0), s1 = a1.start(o1);
          const int64_t f0 = a0.first[o0], l0 = a0.last[o0], f1 = a1.first[o1], l1 = a1.last[o1];
          const int64_t row_out = (plane * a0.out + o0) * a1.out + o1;
          T* yrow = y + row_out * a2.out;
          // Offset of input row (t0, t1) in the plane.
          auto row_at = [&](int64_t t0, int64_t t1) { return ((s0 + t0 * a0.dilation) * a1.in + s1 + t1 * a1.dilation) * a2.in; };

          auto one_output = [&](int64_t o2) {
            const int64_t s2 = a2.start(o2), f2 = a2.first[o2], l2 = a2.last[o2];
            if constexpr (Op == PoolOp::Max) {
              T best = pool_max_init<T>();
              int64_t best_at = f0 < l0 && f1 < l1 && f2 < l2 ? row_at(f0, f1) + s2 + f2 * a2.dilation : 0;
              for (int64_t t0 = f0; t0 < l0; ++t0)
                for (int64_t t1 = f1; t1 < l1; ++t1) {
                  const int64_t row = row_at(t0, t1) + s2;
                  if (!indices) {
                    for (int64_t t2 = f2; t2 < l2; ++t2) best = pool_max(best, xp[row + t2 * a2.dilation]);
                    continue;
                  }
                  for (int64_t t2 = f2; t2 < l2; ++t2) {
                    const T v = xp[row + t2 * a2.dilation];
                    if (v > best) {
                      best = v;
                      best_at = row + t2 * a2.dilation;
                    }
                  }
                }
              yrow[o2] = best;
              if (indices) {
                int64_t at = best_at;
                if (opt.column_major) {  // the same element, counted with the first axis fastest
                  const int64_t i2 = at % a2.in, i1 = at / a2.in % a1.in, i0 = at / (a2.in * a1.in);
                  at = i0 + a0.in * (i1 + a1.in * i2);
                }
                indices[row_out * a2.out + o2] = plane * in_plane + at;
              }
            } else {
              A sum = 0;
              if (Op == PoolOp::Average && opt.columns_first) {
                for (int64_t t2 = f2; t2 < l2; ++t2) {
                  A column = 0;
                  for (int64_t t0 = f0; t0 < l0; ++t0)
                    for (int64_t t1 = f1; t1 < l1; ++t1) column += static_cast<A>(xp[row_at(t0, t1) + s2 + t2 * a2.dilation]);
                  sum += column;
                }
              } else {
                for (int64_t t0 = f0; t0 < l0; ++t0)
                  for (int64_t t1 = f1; t1 < l1; ++t1) {
                    const T* row = xp + row_at(t0, t1) + s2;
                    for (int64_t t2 = f2; t2 < l2; ++t2) {
                      const A v = static_cast<A>(row[t2 * a2.dilation]);
                      if constexpr (Op == PoolOp::Average) sum += v;
                      else sum += opt.p == 2 ? v * v : opt.p == 1 ? std::fabs(v) : std::pow(std::fabs(v), static_cast<A>(opt.p));
                    }
                  }
              }
              if constexpr (Op == PoolOp::Average) {
                const int64_t count = opt.count_include_pad ? a0.padded_taps[o0] * a1.padded_taps[o1] * a2.padded_taps[o2]
                                                            : (l0 - f0) * (l1 - f1) * (l2 - f2);
                yrow[o2] = static_cast<T>(count > 0 ? sum / static_cast<A>(count) : A(0));
              } else {
                yrow[o2] = static_cast<T>(opt.p == 2 ? std::sqrt(sum) : opt.p == 1 ? sum : std::pow(sum, A(1) / static_cast<A>(opt.p)));
              }
            }
          };

          const int64_t lo = row_path ? a2.interior_lo : a2.out, hi = row_path ? a2.interior_hi : a2.out;
          for (int64_t o2 = 0; o2 < lo; ++o2) one_output(o2);
          for (int64_t o2 = hi; o2 < a2.out; ++o2) one_output(o2);
          if constexpr (Op != PoolOp::Lp) {
            if (lo >= hi) continue;
            const T init = Op == PoolOp::Max ? pool_max_init<T>() : T(0);
            for (int64_t j = lo; j < hi; ++j) yrow[j] = init;
            const int64_t stride = a2.stride;
            // Every tap of one input row (or of the column sums) added to the row of outputs.
            auto add_taps = [&](const T* xrow) {
              // Strides 1 and 2 and widths 2 and 3 as constants: the compiler turns the loads
              // into whole-vector loads and shuffles, and the taps of a row go in one pass.
              const T* first = xrow + lo * stride - a2.pad_begin;  // xrow[j * stride + tap] is inside
              const int64_t n = hi - lo, k = a2.kernel;
              if (a2.dilation == 1 && stride == 1 && k == 3) pool_row_taps<Op, 1, 3>(yrow + lo, first, n);
              else if (a2.dilation == 1 && stride == 2 && k == 3) pool_row_taps<Op, 2, 3>(yrow + lo, first, n);
              else if (a2.dilation == 1 && stride == 2 && k == 2) pool_row_taps<Op, 2, 2>(yrow + lo, first, n);
              else if (a2.dilation == 1 && stride == 1 && k == 2) pool_row_taps<Op, 1, 2>(yrow + lo, first, n);
              else
                for (int64_t t2 = 0; t2 < k; ++t2) {
                  if (stride == 1) pool_row_tap<Op, 1>(yrow + lo, first + t2 * a2.dilation, n, 1);
                  else if (stride == 2) pool_row_tap<Op, 2>(yrow + lo, first + t2 * a2.dilation, n, 2);
                  else pool_row_tap<Op, 0>(yrow + lo, first + t2 * a2.dilation, n, stride);
                }
            };
            if (Op == PoolOp::Average && opt.columns_first) {
              // The input columns the interior windows cover, each summed over the window's rows.
              const int64_t c0 = lo * stride - a2.pad_begin, c1 = (hi - 1) * stride - a2.pad_begin + (a2.kernel - 1) * a2.dilation + 1;
              bool first_row = true;
              for (int64_t t0 = f0; t0 < l0; ++t0)
                for (int64_t t1 = f1; t1 < l1; ++t1) {
                  const T* xrow = xp + row_at(t0, t1);
                  if (first_row) std::copy(xrow + c0, xrow + c1, columns.data() + c0);
                  else {
#pragma omp simd
                    for (int64_t c = c0; c < c1; ++c) columns[c] += xrow[c];
                  }
                  first_row = false;
                }
              add_taps(columns.data());
            } else {
              for (int64_t t0 = f0; t0 < l0; ++t0)
                for (int64_t t1 = f1; t1 < l1; ++t1) add_taps(xp + row_at(t0, t1));
            }
            if constexpr (Op == PoolOp::Average) {
              const int64_t count = opt.count_include_pad ? a0.padded_taps[o0] * a1.padded_taps[o1] * a2.kernel
                                                          : (l0 - f0) * (l1 - f1) * a2.kernel;
              const T divisor = count > 0 ? static_cast<T>(count) : T(1);
#pragma omp simd
              for (int64_t j = lo; j < hi; ++j) yrow[j] /= divisor;
            }
          }
        }
    }
  });
}

// Global pools keep 4 running values, element i going to value i % 4, then combine them as
// (v0 + v2) + (v1 + v3) and take the tail in order: ONNX Runtime's float order (MLAS), so that
// both round alike.
constexpr int kGlobalLanes = 4;
template <bool Max, class T>
inline T global_fold(T acc, T v) {
  if constexpr (Max) return (v > acc || v != v) ? v : acc;  // NaN propagates
  else return acc + v;
}
template <bool Max, class T>
inline T global_lanes_total(T v0, T v1, T v2, T v3) {
  return global_fold<Max>(global_fold<Max>(v0, v2), global_fold<Max>(v1, v3));
}

// GlobalAveragePool and GlobalMaxPool: one value per (n, c) plane, from contiguous data.
template <class T, bool Max>
void global_pool_compute(const RunContext& ctx, const T* x, T* y, int64_t planes, int64_t size) {
  parallel_for(ctx.threads, planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(size, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * size;
      T lanes[kGlobalLanes];
      for (T& l : lanes) l = Max ? -std::numeric_limits<T>::infinity() : T(0);
      int64_t i = 0;
      for (; i + kGlobalLanes <= size; i += kGlobalLanes)
        for (int j = 0; j < kGlobalLanes; ++j) lanes[j] = global_fold<Max>(lanes[j], xp[i + j]);
      T acc = global_lanes_total<Max>(lanes[0], lanes[1], lanes[2], lanes[3]);
      for (; i < size; ++i) acc = global_fold<Max>(acc, xp[i]);
      y[plane] = Max ? acc : acc / static_cast<T>(size);
    }
  });
}

template <PoolOp Op>
class PoolKernel : public Kernel {
 public:
  explicit PoolKernel(const KernelInfo& info) : attrs_(info.node) {
    const ir::Node& node = info.node;
    if constexpr (Op == PoolOp::Max) {
      const int64_t order = node.attr_int("storage_order", 0);
      if (order != 0 && order != 1) throw Error("storage_order " + std::to_string(order) + " is not 0 or 1");
      opt_.column_major = order == 1;
      want_indices_ = node.outputs().size() > 1 && node.output(1) != nullptr;
    } else if constexpr (Op == PoolOp::Average) {
      opt_.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
    } else {
      // LpPool-1 has p as a float; later versions as an int.
      const ir::Attribute* p = node.find_attribute("p");
      opt_.p = p == nullptr ? 2 : p->type == ir::AttrType::Float ? static_cast<int64_t>(p->f) : p->i;
      if (p && p->type == ir::AttrType::Float && static_cast<float>(opt_.p) != p->f)
        throw Error("p " + std::to_string(p->f) + " is not a whole number");
      if (opt_.p < 1) throw Error("p " + std::to_string(opt_.p) + " must be 1 or more");
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const std::array<PoolAxis, 3> ax = attrs_.axes_for(x.dims());
    std::vector<int64_t> out_dims = {x.dims()[0], x.dims()[1]};
    for (size_t i = 3 - attrs_.kernel.size(); i < 3; ++i) out_dims.push_back(ax[i].out);
    const int64_t planes = x.dims()[0] * x.dims()[1];
    Tensor indices;
    if (want_indices_) indices = Tensor::uninitialized(DataType::Int64, out_dims);
    int64_t* ip = want_indices_ ? indices.mutable_values<int64_t>().data() : nullptr;

    PoolOptions opt = opt_;
    bool whole_plane = false;
    if (Op == PoolOp::Average && x.dtype() == DataType::Float) {
      // ONNX Runtime's float AveragePool (MLAS) sums a window covering the whole input as
      // GlobalAveragePool does, and in columns-first order where its vectorised kernel applies:
      // 2 or 3 spatial axes, no dilation, the last stride at most 2, kernels of at most 32, and
      // a padded last axis of at most 2045.
      const size_t k = attrs_.kernel.size();
      const PoolAxis& last = ax[2];
      bool plain = true, small = true;
      for (size_t i = 3 - k; i < 3; ++i) {
        plain = plain && ax[i].kernel == ax[i].in && ax[i].stride == 1 && ax[i].pad_begin == 0 && ax[i].pad_end == 0;
        small = small && ax[i].kernel <= 32 && ax[i].dilation == 1;
      }
      whole_plane = plain;
      opt.columns_first = k >= 2 && small && last.stride <= 2 && last.in + last.pad_begin + last.pad_end <= 2045;
    }
    auto compute = [&]<class T>(const T* xp, T* yp) {
      if (whole_plane) global_pool_compute<T, false>(ctx, xp, yp, planes, x.size() / std::max<int64_t>(planes, 1));
      else pool_compute<Op>(ctx, xp, yp, ip, planes, ax, opt);
    };
    out[0] = Op == PoolOp::Max
                 ? norm_pool_compute_typed<float, double, int8_t, uint8_t>(x, out_dims, attrs_.op_type, compute)
                 : norm_pool_compute_typed<float, double>(x, out_dims, attrs_.op_type, compute);
    if (want_indices_ && out.size() > 1) out[1] = std::move(indices);
  }

 private:
  PoolAttributes attrs_;
  PoolOptions opt_;
  bool want_indices_ = false;
};

// MaxPool over channels-last data (N x H x W x C): each window tap is a whole row of channels,
// so the inner loop runs over contiguous channels whatever the window.
template <class T>
void max_pool_channels_last(const RunContext& ctx, const T* x, T* y, int64_t batch, int64_t channels,
                            const PoolAxis& ah, const PoolAxis& aw) {
  const int64_t rows = batch * ah.out;
  parallel_for(ctx.threads, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(aw.out * channels, 1)),
               [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / ah.out, oh = row % ah.out;
      const T* xn = x + n * ah.in * aw.in * channels;
      for (int64_t ow = 0; ow < aw.out; ++ow) {
        T* d = y + (row * aw.out + ow) * channels;
        std::fill(d, d + channels, pool_max_init<T>());
        for (int64_t kh = ah.first[oh]; kh < ah.last[oh]; ++kh) {
          const int64_t ih = ah.start(oh) + kh * ah.dilation;
          for (int64_t kw = aw.first[ow]; kw < aw.last[ow]; ++kw) {
            const T* s = xn + (ih * aw.in + aw.start(ow) + kw * aw.dilation) * channels;
#pragma omp simd
            for (int64_t c = 0; c < channels; ++c) d[c] = pool_max(d[c], s[c]);
          }
        }
      }
    }
  });
}

// NhwcMaxPool of the channels-last pass (engine/layout.h): MaxPool over 2 spatial axes with X
// [N, H, W, C], attributes as MaxPool's, and no Indices output.
class NhwcMaxPoolKernel : public Kernel {
 public:
  explicit NhwcMaxPoolKernel(const KernelInfo& info) : attrs_(info.node) {
    if (attrs_.kernel.size() != 2) throw Error("NhwcMaxPool takes 2 spatial axes, got kernel_shape " + ir::dims_to_string(attrs_.kernel));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() != 4) throw Error("NhwcMaxPool takes an [N, H, W, C] input, got " + ir::dims_to_string(x.dims()));
    const std::vector<int64_t>& d = x.dims();
    const std::array<PoolAxis, 3> ax = attrs_.axes_for({d[0], d[3], d[1], d[2]});
    const std::vector<int64_t> out_dims = {d[0], ax[1].out, ax[2].out, d[3]};
    auto compute = [&]<class T>(const T* xp, T* yp) { max_pool_channels_last<T>(ctx, xp, yp, d[0], d[3], ax[1], ax[2]); };
    out[0] = norm_pool_compute_typed<float, double, int8_t, uint8_t>(x, out_dims, "NhwcMaxPool", compute);
  }

 private:
  PoolAttributes attrs_;
};

// The same over channels-last data (N x spatial... x C): each channel's values are `channels`
// apart, so a row of channels is folded into a row of accumulators at a time. The sums take
// the values in the order global_pool_compute does (4 lanes, then their sum, then the tail),
// so both layouts give the same result to the bit.
template <class T, bool Max>
void global_pool_channels_last(const RunContext& ctx, const T* x, T* y, int64_t batch, int64_t size, int64_t channels) {
  constexpr int64_t kBlock = 64;  // channels per work item: 4 lanes of 64 stay in L1
  int64_t blocks = (channels + kBlock - 1) / kBlock;
  parallel_for(ctx.threads, batch * blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(size * kBlock, 1)),
               [&](int64_t begin, int64_t end) {
    T lanes[kGlobalLanes][kBlock];
    for (int64_t item = begin; item < end; ++item) {
      int64_t n = item / blocks, c0 = item % blocks * kBlock, width = std::min(kBlock, channels - c0);
      const T* xn = x + n * size * channels + c0;
      for (auto& lane : lanes)
        for (int64_t c = 0; c < width; ++c) lane[c] = Max ? -std::numeric_limits<T>::infinity() : T(0);
      int64_t i = 0;
      for (; i + kGlobalLanes <= size; i += kGlobalLanes)
        for (int j = 0; j < kGlobalLanes; ++j) {
          const T* row = xn + (i + j) * channels;
#pragma omp simd
          for (int64_t c = 0; c < width; ++c) lanes[j][c] = global_fold<Max>(lanes[j][c], row[c]);
        }
      for (int64_t c = 0; c < width; ++c) {
        T acc = global_lanes_total<Max>(lanes[0][c], lanes[1][c], lanes[2][c], lanes[3][c]);
        for (int64_t k = i; k < size; ++k) acc = global_fold<Max>(acc, xn[k * channels + c]);
        y[n * channels + c0 + c] = Max ? acc : acc / static_cast<T>(size);
      }
    }
  });
}

// GlobalAveragePool / GlobalMaxPool, and with `ChannelsLast` their NhwcGlobal*Pool twins of
// the channels-last pass (engine/layout.h): X [N, spatial..., C] gives [N, 1..., C].
template <bool Max, bool ChannelsLast = false>
class GlobalPoolKernel : public Kernel {
 public:
  explicit GlobalPoolKernel(const KernelInfo& info) : op_type_(info.node.op_type) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error(op_type_ + " needs an input of shape N x C x ..., got " + ir::dims_to_string(x.dims()));
    std::vector<int64_t> out_dims(x.rank(), 1);
    const int64_t channel_axis = ChannelsLast ? static_cast<int64_t>(x.rank()) - 1 : 1;
    out_dims[0] = x.dims()[0];
    out_dims[channel_axis] = x.dims()[channel_axis];
    const int64_t planes = out_dims[0] * out_dims[channel_axis];
    const int64_t size = planes > 0 ? x.size() / planes : 0;
    auto compute = [&]<class T>(const T* xp, T* yp) {
      if (ChannelsLast) global_pool_channels_last<T, Max>(ctx, xp, yp, out_dims[0], size, out_dims[channel_axis]);
      else global_pool_compute<T, Max>(ctx, xp, yp, planes, size);
    };
    out[0] = norm_pool_compute_typed<float, double>(x, out_dims, op_type_, compute);
  }

 private:
  std::string op_type_;
};

}  // namespace

void norm_pool_register_pooling(KernelRegistry& r) {
  // One kernel per pool reads every attribute with its default, so the versions (MaxPool 8:
  // storage_order and Indices, 10: dilations and ceil_mode, 12: int8/uint8; AveragePool 7:
  // count_include_pad, 10: ceil_mode, 19: dilations; LpPool 2: integer p, 18: ceil_mode and
  // dilations) need no separate handling.
  r.add("", "MaxPool", 1, kLatestOpset, kernel_factory<PoolKernel<PoolOp::Max>>());
  r.add("", "AveragePool", 1, kLatestOpset, kernel_factory<PoolKernel<PoolOp::Average>>());
  r.add("", "LpPool", 1, kLatestOpset, kernel_factory<PoolKernel<PoolOp::Lp>>());
  r.add("", "GlobalAveragePool", 1, kLatestOpset, kernel_factory<GlobalPoolKernel<false>>());
  r.add("", "GlobalMaxPool", 1, kLatestOpset, kernel_factory<GlobalPoolKernel<true>>());
  r.add(kEngineDomain, "NhwcMaxPool", 1, 1, kernel_factory<NhwcMaxPoolKernel>());
  r.add(kEngineDomain, "NhwcGlobalAveragePool", 1, 1, kernel_factory<GlobalPoolKernel<false, true>>());
  r.add(kEngineDomain, "NhwcGlobalMaxPool", 1, 1, kernel_factory<GlobalPoolKernel<true, true>>());
}

}  // namespace onnxptq::engine
