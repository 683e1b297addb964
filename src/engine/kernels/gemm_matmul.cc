// Gemm and MatMul. Float goes through oneDNN's matmul: a constant right-hand side (the weights
// of a fully connected layer, [768, 3072] in a transformer) is packed once into the layout the
// primitive prefers, and MatMul folds the batch axes of A into its rows when B has none. Double
// and integer types go through the reference loop.
#include <optional>

#include "engine/kernels/linear.h"
#include "engine/parallel.h"

namespace onnxptq::engine::linear {
namespace {

std::string type_name(DataType t) { return std::string(ir::data_type_name(t)); }

// A matmul primitive for one shape, the right-hand side packed when constant.
struct MatMulPlan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::shared_ptr<const dnnl::memory> packed_b;
  bool bias = false;       // C (times beta) added by the primitive
  bool reference = false;  // oneDNN declined the shape
};

// Builds the primitive for a (src, weights, dst) and optional bias; the weights packed from
// `constant_b` (dense in `user_b`) unless `previous` holds them in the same layout.
std::shared_ptr<MatMulPlan> make_matmul_plan(const dnnl::memory::desc& src, const dnnl::memory::desc& user_b,
                                             const dnnl::memory::desc& dst, const dnnl::memory::desc* bias, float alpha,
                                             const float* constant_b, const MatMulPlan* previous) {
  const dnnl::engine& eng = dnnl_cpu_engine();
  auto plan = std::make_shared<MatMulPlan>();
  try {
    dnnl::memory::dims b_dims = user_b.dims();
    dnnl::memory::desc weights =
        constant_b ? dnnl::memory::desc(b_dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any) : user_b;
    dnnl::primitive_attr attr = dnnl_attr();
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    dnnl::matmul::desc d = bias ? dnnl::matmul::desc(src, weights, *bias, dst) : dnnl::matmul::desc(src, weights, dst);
    plan->pd = dnnl::matmul::primitive_desc(d, attr, eng);
    plan->prim = dnnl::matmul(plan->pd);
    plan->bias = bias != nullptr;
    if (constant_b) {
      dnnl::memory::desc packed_md = plan->pd.weights_desc();
      if (previous && previous->packed_b && previous->packed_b->get_desc() == packed_md) {
        plan->packed_b = previous->packed_b;
      } else {
        auto packed = std::make_shared<dnnl::memory>(packed_md, eng);
        dnnl::memory user(user_b, eng, const_cast<float*>(constant_b));
        dnnl::stream stream(eng);
        dnnl::reorder::primitive_desc pack_pd = dnnl_reorder_pd(user_b, packed_md);
        dnnl_reorder(stream, dnnl::reorder(pack_pd), pack_pd, user, *packed);
        stream.wait();
        plan->packed_b = std::move(packed);
      }
    }
  } catch (const dnnl::error&) {
    plan->reference = true;
  }
  return plan;
}

void run_matmul_plan(const MatMulPlan& plan, const float* a, const dnnl::memory::desc& user_b, const float* b,
                     const float* bias, float* y) {
  const dnnl::engine& eng = dnnl_cpu_engine();
  dnnl::stream stream(eng);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(plan.pd.src_desc(), eng, const_cast<float*>(a))},
      {DNNL_ARG_WEIGHTS, plan.packed_b ? *plan.packed_b : dnnl::memory(user_b, eng, const_cast<float*>(b))},
      {DNNL_ARG_DST, dnnl::memory(plan.pd.dst_desc(), eng, y)}};
  if (plan.bias) args[DNNL_ARG_BIAS] = dnnl::memory(plan.pd.bias_desc(), eng, const_cast<float*>(bias));
  dnnl_execute(stream, plan.prim, plan.pd, std::move(args));
  stream.wait();
}

// Calls f(T{}) for the non-float element types MatMul and Gemm take; false for other types.
template <class F>
bool dispatch_exact(DataType t, F&& f) {
  switch (t) {
    case DataType::Double: f(double{}); return true;
    case DataType::Int32: f(int32_t{}); return true;
    case DataType::Int64: f(int64_t{}); return true;
    case DataType::UInt32: f(uint32_t{}); return true;
    case DataType::UInt64: f(uint64_t{}); return true;
    default: return false;
  }
}

// ---- MatMul

struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> a_batch, b_batch, batch;  // batch axes, b's and a's padded to batch's rank
  std::vector<int64_t> out;
  int64_t batch_count() const { return ir::element_count(batch); }
};

MatMulShape matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty())
    throw Error("MatMul needs inputs of rank 1 or more, got " + ir::dims_to_string(a) + " and " + ir::dims_to_string(b));
  MatMulShape s;
  std::vector<int64_t> a2 = a, b2 = b;
  if (a.size() == 1) a2.insert(a2.begin(), 1);
  if (b.size() == 1) b2.push_back(1);
  s.m = a2[a2.size() - 2];
  s.k = a2.back();
  s.n = b2.back();
  if (b2[b2.size() - 2] != s.k)
    throw Error("inputs " + ir::dims_to_string(a) + " and " + ir::dims_to_string(b) + " do not agree on the inner size (" +
                std::to_string(s.k) + " vs " + std::to_string(b2[b2.size() - 2]) + ")");
  s.a_batch.assign(a2.begin(), a2.end() - 2);
  s.b_batch.assign(b2.begin(), b2.end() - 2);
  s.batch = broadcast_shapes(s.a_batch, s.b_batch);
  s.a_batch.insert(s.a_batch.begin(), s.batch.size() - s.a_batch.size(), 1);
  s.b_batch.insert(s.b_batch.begin(), s.batch.size() - s.b_batch.size(), 1);
  s.out = s.batch;
  if (a.size() > 1) s.out.push_back(s.m);
  if (b.size() > 1) s.out.push_back(s.n);
  return s;
}

// For each output batch index, the index of the A and B matrices it reads (broadcasting).
void batch_offsets(const MatMulShape& s, std::vector<int64_t>& a_index, std::vector<int64_t>& b_index) {
  size_t r = s.batch.size();
  int64_t count = s.batch_count();
  a_index.assign(count, 0);
  b_index.assign(count, 0);
  std::vector<int64_t> a_stride(r), b_stride(r), pos(r, 0);
  for (int64_t i = static_cast<int64_t>(r) - 1, sa = 1, sb = 1; i >= 0; --i) {
    a_stride[i] = s.a_batch[i] == 1 ? 0 : sa;
    b_stride[i] = s.b_batch[i] == 1 ? 0 : sb;
    sa *= s.a_batch[i];
    sb *= s.b_batch[i];
  }
  for (int64_t c = 0; c < count; ++c) {
    int64_t ai = 0, bi = 0;
    for (size_t d = 0; d < r; ++d) {
      ai += pos[d] * a_stride[d];
      bi += pos[d] * b_stride[d];
    }
    a_index[c] = ai;
    b_index[c] = bi;
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < s.batch[d]) break;
      pos[d] = 0;
    }
  }
}

template <class T>
void matmul_exact(const MatMulShape& s, const T* a, const T* b, T* y) {
  std::vector<int64_t> ai, bi;
  batch_offsets(s, ai, bi);
  for (size_t c = 0; c < ai.size(); ++c)
    matmul_reference(a + ai[c] * s.m * s.k, s.k, 1, b + bi[c] * s.k * s.n, s.n, 1, y + c * s.m * s.n, s.m, s.n, s.k);
}

class MatMulKernel : public Kernel {
 public:
  explicit MatMulKernel(const KernelInfo& info) {
    if (const Tensor* b = info.constant(1); b && is_float_like(b->dtype()) && b->rank() >= 2) {
      bool flat = true;  // no batch axis beyond size 1: the weights of a linear layer
      for (size_t i = 0; i + 2 < b->rank(); ++i) flat = flat && b->dims()[i] == 1;
      if (flat) weights_ = as_float32(*b);
    }
    if (weights_ && !info.input_types.empty() && is_float_like(info.input_types[0].elem_type)) {
      if (auto a = info.input_types[0].static_shape()) {
        try {
          MatMulShape s = matmul_shape(*a, weights_->dims());
          const int64_t rows = s.batch_count() * s.m;
          if (rows * s.k * s.n > 0) folded_plan(rows, s.k, s.n, matmul_threads(info.prepared_threads(), rows * s.n));
        } catch (const std::exception&) {
          // reported by run with the actual input
        }
      }
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    if (a.dtype() != b.dtype())
      throw Error("A and B must have one element type, got " + type_name(a.dtype()) + " and " + type_name(b.dtype()));
    MatMulShape s = matmul_shape(a.dims(), b.dims());
    if (!is_float_like(a.dtype())) {
      Tensor y = Tensor::uninitialized(a.dtype(), s.out);
      bool known = dispatch_exact(a.dtype(), [&](auto zero) {
        using T = decltype(zero);
        matmul_exact<T>(s, a.values<T>().data(), b.values<T>().data(), y.mutable_values<T>().data());
      });
      if (!known) throw Error("MatMul does not take " + type_name(a.dtype()));
      out[0] = std::move(y);
      return;
    }
    Tensor a32 = as_float32(a);
    Tensor b32 = weights_ ? *weights_ : as_float32(b);
    Tensor y = Tensor::uninitialized(DataType::Float, s.out);
    run_float(ctx, s, a32.values<float>().data(), b32.values<float>().data(), y.mutable_values<float>().data());
    out[0] = float32_as(y, a.dtype());
  }

 private:
  void run_float(const RunContext& ctx, const MatMulShape& s, const float* a, const float* b, float* y) const {
    int64_t count = s.batch_count();
    if (count == 0 || s.m == 0 || s.n == 0) return;
    if (s.k == 0) {
      std::fill(y, y + count * s.m * s.n, 0.f);
      return;
    }
    const int threads = matmul_threads(ctx.threads, count * s.m * s.n);
    dnnl_use_threads(threads);
    bool b_flat = ir::element_count(s.b_batch) == 1;
    if (b_flat) {  // [..., M, K] x [K, N]: one product of (batch * M) rows
      int64_t rows = count * s.m;
      std::shared_ptr<const MatMulPlan> plan = folded_plan(rows, s.k, s.n, threads);
      if (!plan->reference) {
        run_matmul_plan(*plan, a, f32_desc({s.k, s.n}), b, nullptr, y);
        return;
      }
    } else if (s.batch.size() + 2 <= DNNL_MAX_NDIMS) {
      std::vector<int64_t> key = s.a_batch;
      key.insert(key.end(), s.b_batch.begin(), s.b_batch.end());
      key.insert(key.end(), {s.m, s.k, s.n, threads, -1});
      std::shared_ptr<const MatMulPlan> plan = cache_.get(key, [&](const MatMulPlan*) {
        auto dims = [&](const std::vector<int64_t>& batch, int64_t r, int64_t c) {
          std::vector<int64_t> d = batch;
          d.insert(d.end(), {r, c});
          return f32_desc(d);
        };
        return make_matmul_plan(dims(s.a_batch, s.m, s.k), dims(s.b_batch, s.k, s.n), dims(s.batch, s.m, s.n), nullptr,
                                1.f, nullptr, nullptr);
      });
      if (!plan->reference) {
        std::vector<int64_t> bd = s.b_batch;
        bd.insert(bd.end(), {s.k, s.n});
        run_matmul_plan(*plan, a, f32_desc(bd), b, nullptr, y);
        return;
      }
    }
    matmul_exact<float>(s, a, b, y);
  }

  // The plan of a [rows, K] x [K, N] product (B packed when constant).
  std::shared_ptr<const MatMulPlan> folded_plan(int64_t rows, int64_t k, int64_t n, int threads) const {
    std::vector<int64_t> key{rows, k, n, threads};
    return cache_.get(key, [&](const MatMulPlan* previous) {
      dnnl_use_threads(threads);
      return make_matmul_plan(f32_desc({rows, k}), f32_desc({k, n}), f32_desc({rows, n}), nullptr, 1.f,
                              weights_ ? weights_->values<float>().data() : nullptr, previous);
    });
  }

  std::optional<Tensor> weights_;  // constant B as float, when it has no batch axis beyond 1
  PlanCache<MatMulPlan> cache_;
};

// ---- Gemm

class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const KernelInfo& info)
      : alpha_(info.node.attr_float("alpha", 1.f)),
        beta_(info.node.attr_float("beta", 1.f)),
        trans_a_(info.node.attr_int("transA", 0) != 0),
        trans_b_(info.node.attr_int("transB", 0) != 0),
        strict_c_(info.opset < 7 && info.node.attr_int("broadcast", 0) == 0) {
    for (const char* name : {"transA", "transB"})
      if (int64_t v = info.node.attr_int(name, 0); v != 0 && v != 1)
        throw Error(std::string(name) + " " + std::to_string(v) + " must be 0 or 1");
    if (info.opset >= 7 && info.node.find_attribute("broadcast"))
      throw Error("broadcast is an attribute of Gemm before opset 7 only");
    if (const Tensor* b = info.constant(1); b && is_float_like(b->dtype()) && b->rank() == 2) weights_ = as_float32(*b);
    if (const Tensor* c = info.constant(2); c && is_float_like(c->dtype())) {
      bias_ = as_float32(*c);
      if (beta_ != 1.f)
        for (float& v : bias_->mutable_values<float>()) v *= beta_;
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    const Tensor* c = in.size() > 2 ? in[2] : nullptr;
    if (a.dtype() != b.dtype() || (c && c->dtype() != a.dtype()))
      throw Error("A, B and C must have one element type, got " + type_name(a.dtype()) + ", " + type_name(b.dtype()) +
                  (c ? ", " + type_name(c->dtype()) : ""));
    if (a.rank() != 2 || b.rank() != 2)
      throw Error("A and B must be matrices, got shapes " + ir::dims_to_string(a.dims()) + " and " + ir::dims_to_string(b.dims()));
    int64_t m = trans_a_ ? a.dims()[1] : a.dims()[0], k = trans_a_ ? a.dims()[0] : a.dims()[1];
    int64_t kb = trans_b_ ? b.dims()[1] : b.dims()[0], n = trans_b_ ? b.dims()[0] : b.dims()[1];
    if (k != kb)
      throw Error("A " + ir::dims_to_string(a.dims()) + (trans_a_ ? " (transposed)" : "") + " and B " +
                  ir::dims_to_string(b.dims()) + (trans_b_ ? " (transposed)" : "") + " do not agree on the inner size");
    std::vector<int64_t> c_dims;  // C as [rows, cols] with rows in {1, M}, cols in {1, N}
    if (c) c_dims = bias_dims(c->dims(), m, n);
    bool use_c = c && beta_ != 0.f;
    if (!is_float_like(a.dtype())) {
      Tensor y = Tensor::uninitialized(a.dtype(), {m, n});
      bool known = dispatch_exact(a.dtype(), [&](auto zero) {
        using T = decltype(zero);
        run_exact<T>(a.values<T>().data(), b.values<T>().data(), use_c ? c->values<T>().data() : nullptr, c_dims,
                     y.mutable_values<T>().data(), m, k, n);
      });
      if (!known) throw Error("Gemm does not take " + type_name(a.dtype()));
      out[0] = std::move(y);
      return;
    }
    Tensor a32 = as_float32(a);
    Tensor b32 = weights_ ? *weights_ : as_float32(b);
    Tensor c32;  // beta * C
    if (use_c) {
      c32 = bias_ ? *bias_ : as_float32(*c);
      if (!bias_ && beta_ != 1.f)  // copy-on-write: the input stays as it was
        for (float& v : c32.mutable_values<float>()) v *= beta_;
    }
    Tensor y = Tensor::uninitialized(DataType::Float, {m, n});
    run_float(ctx, a32.values<float>().data(), b32.values<float>().data(), use_c ? c32.values<float>().data() : nullptr,
              c_dims, y.mutable_values<float>().data(), m, k, n);
    out[0] = float32_as(y, a.dtype());
  }

 private:
  std::vector<int64_t> bias_dims(const std::vector<int64_t>& c, int64_t m, int64_t n) const {
    auto bad = [&] {
      return Error("C of shape " + ir::dims_to_string(c) + " does not broadcast to [" + std::to_string(m) + "," +
                   std::to_string(n) + "]");
    };
    if (c.size() > 2) throw bad();
    std::vector<int64_t> d = c;
    d.insert(d.begin(), 2 - d.size(), 1);
    if ((d[0] != 1 && d[0] != m) || (d[1] != 1 && d[1] != n)) throw bad();
    if (strict_c_ && (c.size() != 2 || d[0] != m || d[1] != n))
      throw Error("C of shape " + ir::dims_to_string(c) + " must be [" + std::to_string(m) + "," + std::to_string(n) +
                  "] when broadcast is 0");
    return d;
  }

  std::vector<int64_t> a_strides(int64_t m, int64_t k) const { return trans_a_ ? std::vector<int64_t>{1, m} : std::vector<int64_t>{k, 1}; }
  std::vector<int64_t> b_strides(int64_t k, int64_t n) const { return trans_b_ ? std::vector<int64_t>{1, k} : std::vector<int64_t>{n, 1}; }

  // y = alpha * a' b' + c (c already times beta, broadcast from c_dims), in T.
  template <class T>
  void run_exact(const T* a, const T* b, const T* c, const std::vector<int64_t>& c_dims, T* y, int64_t m, int64_t k,
                 int64_t n) const {
    std::vector<int64_t> as = a_strides(m, k), bs = b_strides(k, n);
    matmul_reference(a, as[0], as[1], b, bs[0], bs[1], y, m, n, k);
    bool scale = alpha_ != 1.f || beta_ != 1.f;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T& v = y[i * n + j];
        if (!c && !scale) continue;
        T cv = c ? c[(c_dims[0] == 1 ? 0 : i) * c_dims[1] + (c_dims[1] == 1 ? 0 : j)] : T{};
        if (scale) v = static_cast<T>(static_cast<double>(alpha_) * static_cast<double>(v) +
                                      static_cast<double>(beta_) * static_cast<double>(cv));
        else v = static_cast<T>(static_cast<Accumulator<T>>(v) + static_cast<Accumulator<T>>(cv));
      }
  }

  // `c` is beta * C, or null.
  void run_float(const RunContext& ctx, const float* a, const float* b, const float* c, const std::vector<int64_t>& c_dims,
                 float* y, int64_t m, int64_t k, int64_t n) const {
    if (m == 0 || n == 0) return;
    bool c_done = false;
    if (k == 0) {
      std::fill(y, y + m * n, 0.f);
    } else {
      const int threads = matmul_threads(ctx.threads, m * n);
      dnnl_use_threads(threads);
      // C rides along as the primitive's bias when nothing scales the product.
      bool fuse_c = c && alpha_ == 1.f;
      std::vector<int64_t> key{m, k, n, threads, fuse_c};
      if (fuse_c) key.insert(key.end(), c_dims.begin(), c_dims.end());
      dnnl::memory::desc user_b = f32_desc({k, n}, b_strides(k, n));
      std::shared_ptr<const MatMulPlan> plan = cache_.get(key, [&](const MatMulPlan* previous) {
        dnnl::memory::desc bias_md = fuse_c ? f32_desc(c_dims) : dnnl::memory::desc();
        auto make = [&](const dnnl::memory::desc* bias) {
          return make_matmul_plan(f32_desc({m, k}, a_strides(m, k)), user_b, f32_desc({m, n}), bias, alpha_,
                                  weights_ ? weights_->values<float>().data() : nullptr, previous);
        };
        std::shared_ptr<MatMulPlan> made = make(fuse_c ? &bias_md : nullptr);
        if (made->reference && fuse_c) made = make(nullptr);  // C added below instead
        return made;
      });
      if (!plan->reference) {
        run_matmul_plan(*plan, a, user_b, b, c, y);
        c_done = plan->bias;
      } else {
        std::vector<int64_t> as = a_strides(m, k), bs = b_strides(k, n);
        matmul_reference(a, as[0], as[1], b, bs[0], bs[1], y, m, n, k);
        if (alpha_ != 1.f)
          for (int64_t i = 0; i < m * n; ++i) y[i] *= alpha_;
      }
    }
    if (c && !c_done) {
      for (int64_t i = 0; i < m; ++i) {
        const float* crow = c + (c_dims[0] == 1 ? 0 : i) * c_dims[1];
        float* yrow = y + i * n;
        if (c_dims[1] == 1)
          for (int64_t j = 0; j < n; ++j) yrow[j] += crow[0];
        else
          for (int64_t j = 0; j < n; ++j) yrow[j] += crow[j];
      }
    }
  }

  float alpha_, beta_;
  bool trans_a_, trans_b_;
  bool strict_c_;                  // Gemm before opset 7 with broadcast = 0: C must be [M, N]
  std::optional<Tensor> weights_;  // constant B as float
  std::optional<Tensor> bias_;     // constant C as float, times beta
  PlanCache<MatMulPlan> cache_;
};

}  // namespace

void register_gemm_matmul_kernels(KernelRegistry& r) {
  // MatMul 1, 9 and 13 differ in types only. Gemm: 1-6 have the broadcast attribute (C
  // required), 7-10 broadcast C always, 11 makes C optional, 13 adds bfloat16; C is taken as
  // optional in every version.
  r.add("", "MatMul", 1, kLatestOpset, kernel_factory<MatMulKernel>());
  r.add("", "Gemm", 1, kLatestOpset, kernel_factory<GemmKernel>());
}

}  // namespace onnxptq::engine::linear
