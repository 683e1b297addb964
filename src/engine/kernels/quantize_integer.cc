// Integer convolutions and matrix products: ConvInteger and MatMulInteger (int32 results), and
// QLinearConv and QLinearMatMul (requantized results). All of them accumulate exactly in int32:
// the zero points are subtracted first (values fit in int16), then an int16 x int16 -> int32
// product. Requantization is ONNX Runtime's: multiplier = (x_scale * w_scale) / y_scale in
// float32, y = saturate(round_half_even(float(acc + bias) * multiplier) + y_zero_point).
#include <algorithm>
#include <optional>

#include "engine/kernels/quantize.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

// Values minus their zero point, as int16 (8-bit values give [-255, 255]).
template <class T>
void subtract_zero_point(const T* in, int64_t n, int32_t zp, int16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(static_cast<int32_t>(in[i]) - zp);
}

// Zero points of a weight: one (a scalar or 1-element tensor) or `count` (one per output channel
// or column), of the weight's type.
std::vector<int32_t> weight_zero_points(const Tensor* zp, DataType type, int64_t count, const std::string& what) {
  if (!zp) return std::vector<int32_t>(count, 0);
  if (zp->dtype() != type)
    throw Error(what + " has type " + std::string(ir::data_type_name(zp->dtype())) + ", expected " +
                std::string(ir::data_type_name(type)));
  std::vector<int32_t> v = int32_values(*zp);
  if (v.size() == 1) return std::vector<int32_t>(count, v[0]);
  if (static_cast<int64_t>(v.size()) != count)
    throw Error(what + " has " + std::to_string(v.size()) + " values, expected 1 or " + std::to_string(count));
  return v;
}

std::vector<float> per_channel_scales(const Tensor& t, int64_t count, const std::string& what) {
  std::vector<float> v = scale_values(t);
  if (v.size() == 1) return std::vector<float>(count, v[0]);
  if (static_cast<int64_t>(v.size()) != count)
    throw Error(what + " has " + std::to_string(v.size()) + " values, expected 1 or " + std::to_string(count));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Convolutions

// Lays the windows of one group's input (C channels, zero points already subtracted) out as
// columns: col[(c * kernel_size + kernel offset) * P + output position], 0 in the padding.
void im2col(const int16_t* x, int64_t C, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
            const WindowGeometry& g, const std::vector<int64_t>& pads, int16_t* col) {
  size_t rank = in.size();
  int64_t in_size = ir::element_count(in), out_size = ir::element_count(out);
  int64_t kernel_size = ir::element_count(g.kernel);
  int64_t last_out = out[rank - 1], last_in = in[rank - 1];
  int64_t rows = out_size / std::max<int64_t>(last_out, 1);
  std::vector<int64_t> kk(rank), op(rank);
  for (int64_t c = 0; c < C; ++c) {
    const int16_t* xc = x + c * in_size;
    for (int64_t ki = 0; ki < kernel_size; ++ki) {
      for (int64_t r = ki, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
        kk[d] = r % g.kernel[d];
        r /= g.kernel[d];
      }
      int16_t* dst = col + (c * kernel_size + ki) * out_size;
      for (int64_t row = 0; row < rows; ++row) {
        // Input offset of the row's leading spatial dims; a row there in the padding is all zeros.
        int64_t offset = 0;
        bool inside = true;
        for (int64_t r = row, d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
          op[d] = r % out[d];
          r /= out[d];
        }
        for (size_t d = 0; d + 1 < rank; ++d) {
          int64_t i = op[d] * g.strides[d] - pads[d] + kk[d] * g.dilations[d];
          if (i < 0 || i >= in[d]) inside = false;
          offset = offset * in[d] + i;
        }
        int16_t* drow = dst + row * last_out;
        if (!inside) {
          std::fill(drow, drow + last_out, int16_t{0});
          continue;
        }
        const int16_t* src = xc + offset * last_in;
        int64_t s = g.strides[rank - 1], start = kk[rank - 1] * g.dilations[rank - 1] - pads[rank - 1];
        // Outputs [o_begin, o_end) read inside the row; the others are padding.
        int64_t o_begin = start >= 0 ? 0 : std::min(last_out, (-start + s - 1) / s);
        int64_t o_end = start >= last_in ? 0 : std::min(last_out, (last_in - start + s - 1) / s);
        o_end = std::max(o_end, o_begin);
        std::fill(drow, drow + o_begin, int16_t{0});
        if (s == 1) std::copy(src + o_begin + start, src + o_end + start, drow + o_begin);
        else
          for (int64_t o = o_begin; o < o_end; ++o) drow[o] = src[o * s + start];
        std::fill(drow + o_end, drow + last_out, int16_t{0});
      }
    }
  }
}

// What QLinearConv and ConvInteger share: attributes, shapes, the weights minus their zero
// points (prepared once when constant), and the int32 accumulation.
class IntegerConvBase : public Kernel {
 protected:
  IntegerConvBase(const KernelInfo& info, size_t w_index, size_t w_zp_index) : w_index_(w_index), w_zp_index_(w_zp_index) {
    geometry_.read(info.node, true, false);
    group_ = info.node.attr_int("group", 1);
    if (group_ <= 0) throw Error("group must be positive, got " + std::to_string(group_));
    const Tensor* w = info.constant(w_index);
    bool zp_constant = !info.has_input(w_zp_index) || info.constant(w_zp_index);
    if (w && zp_constant) weights_ = prepare_weights(*w, info.has_input(w_zp_index) ? info.constant(w_zp_index) : nullptr);
  }

  struct Weights {
    std::vector<int64_t> dims;    // [M, C/group, k...]
    std::vector<int16_t> values;  // minus their zero point
  };

  Weights prepare_weights(const Tensor& w, const Tensor* zp) const {
    if (w.rank() < 3) throw Error("the weights must have rank >= 3, got shape " + ir::dims_to_string(w.dims()));
    Weights p{w.dims(), std::vector<int16_t>(w.size())};
    int64_t M = w.dims()[0], per = w.size() / std::max<int64_t>(M, 1);
    std::vector<int32_t> zps = weight_zero_points(zp, w.dtype(), M, "the weight zero point");
    visit_8bit_type(w.dtype(), "the weights", [&](auto tag) {
      using T = decltype(tag);
      const T* src = w.values<T>().data();
      for (int64_t m = 0; m < M; ++m) subtract_zero_point(src + m * per, per, zps[m], p.values.data() + m * per);
    });
    return p;
  }

  // Runs the convolution into int32 accumulators [N, M, out...]; returns the output dims.
  std::vector<int64_t> accumulate(const RunContext& ctx, std::span<const Tensor* const> in, int32_t x_zp,
                                  std::vector<int32_t>& acc) const {
    const Tensor& x = required_input(in, 0, "x");
    Weights local;
    const Weights* w = weights_ ? &*weights_ : nullptr;
    if (!w) {
      local = prepare_weights(required_input(in, w_index_, "w"), optional_input(in, w_zp_index_));
      w = &local;
    }
    if (x.rank() != w->dims.size())
      throw Error("the input has shape " + ir::dims_to_string(x.dims()) + " and the weights " +
                  ir::dims_to_string(w->dims) + ": ranks differ");
    size_t rank = x.rank() - 2;
    int64_t N = x.dims()[0], C = x.dims()[1], M = w->dims[0], Cg = w->dims[1];
    if (C != Cg * group_ || M % group_ != 0)
      throw Error("the input has " + std::to_string(C) + " channels and the weights " + ir::dims_to_string(w->dims) +
                  " with group " + std::to_string(group_) + ": they do not match");
    WindowGeometry g = geometry_;
    std::vector<int64_t> wk(w->dims.begin() + 2, w->dims.end());
    if (g.kernel.empty()) g.kernel = wk;
    if (g.kernel != wk)
      throw Error("kernel_shape " + ir::dims_to_string(g.kernel) + " differs from the weights' " + ir::dims_to_string(wk));
    g.complete(rank);
    std::vector<int64_t> in_sp(x.dims().begin() + 2, x.dims().end()), pads;
    std::vector<int64_t> out_sp = g.output_dims(in_sp, pads);
    int64_t in_size = ir::element_count(in_sp), P = ir::element_count(out_sp);
    int64_t Mg = M / group_, Kg = Cg * ir::element_count(g.kernel);
    std::vector<int64_t> out_dims{N, M};
    out_dims.insert(out_dims.end(), out_sp.begin(), out_sp.end());
    acc.assign(N * M * P, 0);
    if (acc.empty()) return out_dims;

    std::vector<int16_t> xs(C * in_size);
    bool direct = std::all_of(g.kernel.begin(), g.kernel.end(), [](int64_t k) { return k == 1; }) &&
                  std::all_of(g.strides.begin(), g.strides.end(), [](int64_t s) { return s == 1; }) &&
                  std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
    std::vector<int16_t> col(direct ? 0 : Kg * P);
    for (int64_t n = 0; n < N; ++n) {
      visit_8bit_type(x.dtype(), "the input", [&](auto tag) {
        using T = decltype(tag);
        subtract_zero_point(x.values<T>().data() + n * C * in_size, C * in_size, x_zp, xs.data());
      });
      for (int64_t gi = 0; gi < group_; ++gi) {
        const int16_t* xg = xs.data() + gi * Cg * in_size;
        if (!direct) im2col(xg, Cg, in_sp, out_sp, g, pads, col.data());
        gemm_s16(ctx.threads, Mg, P, Kg, w->values.data() + gi * Mg * Kg, direct ? xg : col.data(),
                 acc.data() + (n * M + gi * Mg) * P);
      }
    }
    return out_dims;
  }

  WindowGeometry geometry_;
  int64_t group_ = 1;
  size_t w_index_, w_zp_index_;
  std::optional<Weights> weights_;
};

class ConvIntegerKernel : public IntegerConvBase {
 public:
  explicit ConvIntegerKernel(const KernelInfo& info) : IntegerConvBase(info, 1, 3) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    int32_t x_zp = scalar_zero_point(optional_input(in, 2), required_input(in, 0, "x").dtype(), "the input zero point");
    std::vector<int32_t> acc;
    std::vector<int64_t> dims = accumulate(ctx, in, x_zp, acc);
    out[0] = Tensor::from_values<int32_t>(dims, acc);
  }
};

class QLinearConvKernel : public IntegerConvBase {
 public:
  explicit QLinearConvKernel(const KernelInfo& info) : IntegerConvBase(info, 3, 5) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    int32_t x_zp = scalar_zero_point(optional_input(in, 2), x.dtype(), "x_zero_point");
    float x_scale = scalar_scale(required_input(in, 1, "x_scale"), "x_scale");
    float y_scale = scalar_scale(required_input(in, 6, "y_scale"), "y_scale");
    const Tensor* y_zp_t = optional_input(in, 7);
    DataType y_type = y_zp_t ? y_zp_t->dtype() : DataType::UInt8;
    int32_t y_zp = scalar_zero_point(y_zp_t, y_type, "y_zero_point");
    std::vector<int32_t> acc;
    std::vector<int64_t> dims = accumulate(ctx, in, x_zp, acc);
    int64_t N = dims[0], M = dims[1], P = ir::element_count(dims) / std::max<int64_t>(N * M, 1);
    std::vector<float> w_scale = per_channel_scales(required_input(in, 4, "w_scale"), M, "w_scale");
    std::vector<float> multiplier(M);
    for (int64_t m = 0; m < M; ++m) multiplier[m] = x_scale * w_scale[m] / y_scale;
    std::vector<int32_t> bias(M, 0);
    if (optional_input(in, 8)) {
      if (in[8]->dtype() != DataType::Int32 || in[8]->size() != M)
        throw Error("the bias must be int32 with " + std::to_string(M) + " values, got " +
                    std::string(ir::data_type_name(in[8]->dtype())) + ir::dims_to_string(in[8]->dims()));
      auto b = in[8]->values<int32_t>();
      bias.assign(b.begin(), b.end());
    }
    Tensor y = Tensor::uninitialized(y_type, dims);
    visit_8bit_type(y_type, "y_zero_point", [&](auto tag) {
      using T = decltype(tag);
      T* ys = y.mutable_values<T>().data();
      parallel_for(ctx.threads, N * M, std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          int64_t m = r % M;
          const int32_t* a = acc.data() + r * P;
          T* yr = ys + r * P;
          requantize_values<T>(a, P, bias[m], multiplier[m], y_zp, yr);
        }
      });
    });
    out[0] = std::move(y);
  }
};

// ---------------------------------------------------------------------------------------------
// Matrix products (numpy matmul broadcasting)

struct MatMulPlan {
  int64_t M = 1, N = 1, K = 1;
  std::vector<int64_t> out_dims;
  std::vector<int64_t> a_batch, b_batch;  // per output matrix: the matrix index in A and in B
  int64_t b_batches = 1;
};

MatMulPlan plan_matmul(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims) {
  if (a_dims.empty() || b_dims.empty()) throw Error("MatMul inputs must have rank >= 1");
  std::vector<int64_t> a = a_dims, b = b_dims;
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  MatMulPlan p;
  p.M = a[a.size() - 2];
  p.K = a.back();
  p.N = b.back();
  if (b[b.size() - 2] != p.K)
    throw Error("inputs " + ir::dims_to_string(a_dims) + " and " + ir::dims_to_string(b_dims) + " cannot be multiplied");
  std::vector<int64_t> ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  std::vector<int64_t> batch = broadcast_shapes(ab, bb);
  int64_t count = ir::element_count(batch);
  p.b_batches = ir::element_count(bb);
  // Matrix index of each output batch in A and B (dims of size 1 are broadcast).
  auto index_in = [&](const std::vector<int64_t>& dims, int64_t flat) {
    int64_t idx = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1, k = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d, --k) {
      int64_t coord = flat % batch[d];
      flat /= batch[d];
      if (k < 0) continue;
      if (dims[k] != 1) idx += coord * stride;
      stride *= dims[k];
    }
    return idx;
  };
  for (int64_t i = 0; i < count; ++i) {
    p.a_batch.push_back(index_in(ab, i));
    p.b_batch.push_back(index_in(bb, i));
  }
  p.out_dims = batch;
  if (!a_vec) p.out_dims.push_back(p.M);
  if (!b_vec) p.out_dims.push_back(p.N);
  return p;
}

// Per-column quantization parameters of B: one value, one per column [N], or one per column of
// each matrix of B ([..., 1, N]). Returns the values and whether they vary with B's matrix.
std::vector<int64_t> b_param_layout(const Tensor& t, const MatMulPlan& p, const std::vector<int64_t>& b_dims,
                                    const std::string& what) {
  if (t.size() == 1) return {0, 0};  // {column stride, matrix stride}
  if (t.rank() == 1 && t.dims()[0] == p.N) return {1, 0};
  if (t.rank() == b_dims.size() && t.rank() >= 2 && t.dims()[t.rank() - 2] == 1 && t.dims().back() == p.N &&
      t.size() == p.N * p.b_batches)
    return {1, p.N};
  throw Error(what + " has shape " + ir::dims_to_string(t.dims()) + ": expected a scalar, [" + std::to_string(p.N) +
              "] or B's shape with 1 rows");
}

// A - a_zp (scalar or one per row) and B - b_zp (per column) as int16, then the int32 products:
// acc [batches][M][N].
void integer_matmul(const RunContext& ctx, const Tensor& a, const Tensor& b, const std::vector<int32_t>& a_zp,
                    const std::vector<int32_t>& b_zp, const std::vector<int64_t>& b_zp_layout, const MatMulPlan& p,
                    std::vector<int32_t>& acc) {
  int64_t MK = p.M * p.K, KN = p.K * p.N;
  std::vector<int16_t> as(a.size()), bs(b.size());
  visit_8bit_type(a.dtype(), "A", [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.values<T>().data();
    for (int64_t r = 0; r < a.size() / std::max<int64_t>(p.K, 1); ++r)
      subtract_zero_point(src + r * p.K, p.K, a_zp.size() == 1 ? a_zp[0] : a_zp[r % p.M], as.data() + r * p.K);
  });
  visit_8bit_type(b.dtype(), "B", [&](auto tag) {
    using T = decltype(tag);
    const T* src = b.values<T>().data();
    for (int64_t i = 0; i < b.size(); ++i) {
      int64_t n = i % p.N, mat = i / std::max<int64_t>(KN, 1);
      int32_t zp = b_zp[n * b_zp_layout[0] + mat * b_zp_layout[1]];
      bs[i] = static_cast<int16_t>(static_cast<int32_t>(src[i]) - zp);
    }
  });
  acc.assign(p.a_batch.size() * p.M * p.N, 0);
  for (size_t i = 0; i < p.a_batch.size(); ++i)
    gemm_s16(ctx.threads, p.M, p.N, p.K, as.data() + p.a_batch[i] * MK, bs.data() + p.b_batch[i] * KN,
             acc.data() + i * p.M * p.N);
}

std::vector<int32_t> a_zero_points(const Tensor* zp, DataType type, int64_t M) {
  if (!zp) return {0};
  if (zp->dtype() != type)
    throw Error("the zero point of A has type " + std::string(ir::data_type_name(zp->dtype())) + ", expected " +
                std::string(ir::data_type_name(type)));
  std::vector<int32_t> v = int32_values(*zp);
  if (v.size() != 1 && static_cast<int64_t>(v.size()) != M)
    throw Error("the zero point of A has " + std::to_string(v.size()) + " values, expected 1 or " + std::to_string(M));
  return v;
}

class MatMulIntegerKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "A");
    const Tensor& b = required_input(in, 1, "B");
    MatMulPlan p = plan_matmul(a.dims(), b.dims());
    std::vector<int32_t> a_zp = a_zero_points(optional_input(in, 2), a.dtype(), p.M);
    const Tensor* bz = optional_input(in, 3);
    std::vector<int64_t> layout{0, 0};
    std::vector<int32_t> b_zp{0};
    if (bz) {
      if (bz->dtype() != b.dtype())
        throw Error("the zero point of B has type " + std::string(ir::data_type_name(bz->dtype())) + ", expected " +
                    std::string(ir::data_type_name(b.dtype())));
      layout = b_param_layout(*bz, p, b.dims(), "the zero point of B");
      b_zp = int32_values(*bz);
    }
    std::vector<int32_t> acc;
    integer_matmul(ctx, a, b, a_zp, b_zp, layout, p, acc);
    out[0] = Tensor::from_values<int32_t>(p.out_dims, acc);
  }
};

class QLinearMatMulKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "a");
    const Tensor& b = required_input(in, 3, "b");
    MatMulPlan p = plan_matmul(a.dims(), b.dims());
    float a_scale = scalar_scale(required_input(in, 1, "a_scale"), "a_scale");
    std::vector<int32_t> a_zp{scalar_zero_point(optional_input(in, 2), a.dtype(), "a_zero_point")};
    std::vector<int64_t> zp_layout{0, 0};
    std::vector<int32_t> b_zp{0};
    if (const Tensor* bz = optional_input(in, 5)) {
      if (bz->dtype() != b.dtype())
        throw Error("b_zero_point has type " + std::string(ir::data_type_name(bz->dtype())) + ", expected " +
                    std::string(ir::data_type_name(b.dtype())));
      zp_layout = b_param_layout(*bz, p, b.dims(), "b_zero_point");
      b_zp = int32_values(*bz);
    }
    const Tensor& b_scale_t = required_input(in, 4, "b_scale");
    std::vector<int64_t> scale_layout = b_param_layout(b_scale_t, p, b.dims(), "b_scale");
    std::vector<float> b_scale = scale_values(b_scale_t);
    float y_scale = scalar_scale(required_input(in, 6, "y_scale"), "y_scale");
    const Tensor* y_zp_t = optional_input(in, 7);
    DataType y_type = y_zp_t ? y_zp_t->dtype() : DataType::UInt8;
    int32_t y_zp = scalar_zero_point(y_zp_t, y_type, "y_zero_point");
    std::vector<float> multiplier(b_scale.size());
    for (size_t i = 0; i < b_scale.size(); ++i) multiplier[i] = a_scale * b_scale[i] / y_scale;

    std::vector<int32_t> acc;
    integer_matmul(ctx, a, b, a_zp, b_zp, zp_layout, p, acc);
    Tensor y = Tensor::uninitialized(y_type, p.out_dims);
    visit_8bit_type(y_type, "y_zero_point", [&](auto tag) {
      using T = decltype(tag);
      T* ys = y.mutable_values<T>().data();
      for (size_t i = 0; i < p.b_batch.size(); ++i) {
        for (int64_t m = 0; m < p.M; ++m) {
          const int32_t* row = acc.data() + (i * p.M + m) * p.N;
          T* yr = ys + (i * p.M + m) * p.N;
          if (scale_layout[0] == 0) {
            requantize_values<T>(row, p.N, 0, multiplier[p.b_batch[i] * scale_layout[1]], y_zp, yr);
            continue;
          }
          const float* mult = multiplier.data() + p.b_batch[i] * scale_layout[1];
          for (int64_t n = 0; n < p.N; ++n) yr[n] = requantize_value<T>(row[n], mult[n], y_zp);
        }
      }
    });
    out[0] = std::move(y);
  }
};

}  // namespace

void register_quantize_integer_kernels(KernelRegistry& r) {
  r.add("", "ConvInteger", 10, kLatestOpset, kernel_factory<ConvIntegerKernel>());
  r.add("", "QLinearConv", 10, kLatestOpset, kernel_factory<QLinearConvKernel>());
  r.add("", "MatMulInteger", 10, kLatestOpset, kernel_factory<MatMulIntegerKernel>());
  // Opset 21 adds float8 types (not supported) and float16 / bfloat16 scales (computed in float32).
  r.add("", "QLinearMatMul", 10, 22, kernel_factory<QLinearMatMulKernel>());
}

}  // namespace onnxptq::engine
