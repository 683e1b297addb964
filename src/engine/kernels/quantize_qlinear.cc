// The com.microsoft QLinear ops of ONNX Runtime's QOperator format: QLinearAdd, QLinearMul,
// QLinearConcat, QLinearSigmoid, QLinearLeakyRelu (the pools are in quantize_pool.cc).
// ONNX Runtime is their only definition, so each follows its CPU kernel's arithmetic to the bit
// (the order of float operations, fused multiply-adds where it has them); see the comments.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "engine/kernels/quantize.h"
#include "engine/parallel.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace onnxptq::engine {
namespace {

constexpr int64_t kMinChunk = 16384;

// A 256-entry table y[q] = quantize(f(dequantize(q))), indexed by the byte of q (as ORT's
// QLinearLookupBase builds it: dequantize as x_scale * (q - x_zp), quantize with MLAS).
template <class T, class F>
std::array<uint8_t, 256> build_table(QParams x, QParams y, F&& f) {
  std::array<float, 256> values;
  for (int i = 0; i < 256; ++i) values[i] = x.scale * static_cast<float>(static_cast<int32_t>(static_cast<T>(i)) - x.zp);
  f(values.data());
  std::array<uint8_t, 256> table;
  for (int i = 0; i < 256; ++i) {
    T q = quantize_value<T>(values[i], y.scale, y.zp);
    std::memcpy(&table[i], &q, 1);
  }
  return table;
}

void apply_table(const std::array<uint8_t, 256>& table, const uint8_t* x, int64_t n, uint8_t* y, int threads) {
  parallel_for(threads, n, kMinChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = table[x[i]];
  });
}

// ---------------------------------------------------------------------------------------------
// QLinearSigmoid, QLinearLeakyRelu: lookup tables, built once when the parameters are constant.

// MLAS's logistic function as its FMA3 kernel computes it (a rational approximation on
// [-18, 18]), so the tables match ONNX Runtime's on x86-64.
void mlas_logistic(float* v) {
  for (int i = 0; i < 256; ++i) {
    float x = v[i];
    x = -18.0f > x ? -18.0f : x;  // vmaxps(lower, x)
    x = 18.0f < x ? 18.0f : x;    // vminps(upper, x)
    float x2 = x * x;
    float p = std::fma(x2, 4.37031012579801e-11f, 1.15627324459942e-07f);
    p = std::fma(x2, p, 6.08574864600143e-05f);
    p = std::fma(x2, p, 8.51377133304701e-03f);
    p = std::fma(x2, p, 2.48287947061529e-01f);
    float q = std::fma(x2, 6.10247389755681e-13f, 5.76102136993427e-09f);
    q = std::fma(x2, q, 6.29106785017040e-06f);
    q = std::fma(x2, q, 1.70198817374094e-03f);
    q = std::fma(x2, q, 1.16817656904453e-01f);
    q = std::fma(x2, q, 9.93151921023180e-01f);
    p = x * p;
    float r = p / q + 0.5f;
    v[i] = 0.0f > r ? 0.0f : r;  // vmaxps(0, r)
  }
}

class QLinearLookupKernel : public Kernel {
 public:
  enum class Fn { Sigmoid, LeakyRelu };

  QLinearLookupKernel(const KernelInfo& info, Fn fn) : fn_(fn) {
    if (fn == Fn::LeakyRelu) alpha_ = info.node.attr_float("alpha", 0.01f);
    DataType type = info.input_types.empty() ? DataType::Undefined : info.input_types[0].elem_type;
    bool fixed = info.constant(1) && info.constant(3) && (!info.has_input(2) || info.constant(2)) &&
                 (!info.has_input(4) || info.constant(4)) && (type == DataType::UInt8 || type == DataType::Int8);
    if (fixed) {
      std::vector<const Tensor*> in(info.constant_inputs.begin(), info.constant_inputs.end());
      table_type_ = type;
      table_ = make_table(type, in);
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    std::array<uint8_t, 256> table = table_ && table_type_ == x.dtype() ? *table_ : make_table(x.dtype(), in);
    Tensor y = Tensor::uninitialized(x.dtype(), x.dims());
    apply_table(table, reinterpret_cast<const uint8_t*>(x.bytes().data()), x.size(),
                reinterpret_cast<uint8_t*>(y.mutable_bytes()), ctx.threads);
    out[0] = std::move(y);
  }

 private:
  std::array<uint8_t, 256> make_table(DataType type, std::span<const Tensor* const> in) const {
    return visit_8bit_type(type, "X", [&](auto tag) {
      using T = decltype(tag);
      QParams xq = read_qparams(in, 1, 2, type, "X");
      QParams yq = read_qparams(in, 3, 4, type, "Y");
      if (fn_ == Fn::Sigmoid) return build_table<T>(xq, yq, mlas_logistic);
      float alpha = alpha_;
      return build_table<T>(xq, yq, [alpha](float* v) {
        for (int i = 0; i < 256; ++i) v[i] = v[i] >= 0.0f ? v[i] : alpha * v[i];
      });
    });
  }

  Fn fn_;
  float alpha_ = 0.01f;
  std::optional<std::array<uint8_t, 256>> table_;
  DataType table_type_ = DataType::Undefined;
};

struct QLinearSigmoidKernel : QLinearLookupKernel {
  explicit QLinearSigmoidKernel(const KernelInfo& info) : QLinearLookupKernel(info, Fn::Sigmoid) {}
};
struct QLinearLeakyReluKernel : QLinearLookupKernel {
  explicit QLinearLeakyReluKernel(const KernelInfo& info) : QLinearLookupKernel(info, Fn::LeakyRelu) {}
};

// ---------------------------------------------------------------------------------------------
// QLinearAdd, QLinearMul: numpy broadcasting, walked the way ORT's broadcaster splits the output
// into spans (both inputs varying, or one of them constant over the span), because ORT's add
// kernel computes those cases in different orders.

enum class SpanKind { Both, ScalarA, ScalarB };

struct BroadcastWalk {
  std::vector<int64_t> out_dims;
  // The output as [outer..., span] after dropping dims of size 1 and merging neighbouring dims
  // that both inputs broadcast alike; the span is the innermost merged dim.
  std::vector<int64_t> outer;
  std::vector<int64_t> a_strides, b_strides;  // per outer dim (0 where broadcast)
  int64_t span = 1;
  SpanKind kind = SpanKind::Both;
};

BroadcastWalk plan_broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  BroadcastWalk w;
  w.out_dims = broadcast_shapes(a, b);
  size_t rank = w.out_dims.size();
  struct Merged {
    int64_t size;
    bool a_broadcast, b_broadcast;
  };
  std::vector<Merged> dims;
  for (size_t d = 0; d < rank; ++d) {
    if (w.out_dims[d] == 1) continue;
    size_t ka = d + a.size() - rank, kb = d + b.size() - rank;  // wraps (huge) when the input lacks the dim
    bool ab = d < rank - a.size() || a[ka] == 1, bb = d < rank - b.size() || b[kb] == 1;
    if (!dims.empty() && dims.back().a_broadcast == ab && dims.back().b_broadcast == bb) dims.back().size *= w.out_dims[d];
    else dims.push_back({w.out_dims[d], ab, bb});
  }
  // ORT's order of tests: a one-element input first, then the innermost span.
  if (ir::element_count(a) == 1) w.kind = SpanKind::ScalarA;
  else if (ir::element_count(b) == 1) w.kind = SpanKind::ScalarB;
  else if (!dims.empty() && dims.back().a_broadcast) w.kind = SpanKind::ScalarA;
  else if (!dims.empty() && dims.back().b_broadcast) w.kind = SpanKind::ScalarB;
  if (dims.empty()) return w;  // one element
  w.span = dims.back().size;
  int64_t ka = dims.back().a_broadcast ? 1 : w.span, kb = dims.back().b_broadcast ? 1 : w.span;
  for (size_t i = dims.size() - 1; i-- > 0;) {
    w.outer.insert(w.outer.begin(), dims[i].size);
    w.a_strides.insert(w.a_strides.begin(), dims[i].a_broadcast ? 0 : ka);
    w.b_strides.insert(w.b_strides.begin(), dims[i].b_broadcast ? 0 : kb);
    if (!dims[i].a_broadcast) ka *= dims[i].size;
    if (!dims[i].b_broadcast) kb *= dims[i].size;
  }
  return w;
}

// Calls fn(a_offset, b_offset, out_offset) for each span of rows [begin, end).
template <class F>
void walk_spans(const BroadcastWalk& w, int64_t begin, int64_t end, F&& fn) {
  for (int64_t row = begin; row < end; ++row) {
    int64_t ao = 0, bo = 0;
    for (int64_t r = row, d = static_cast<int64_t>(w.outer.size()) - 1; d >= 0; --d) {
      int64_t c = r % w.outer[d];
      r /= w.outer[d];
      ao += c * w.a_strides[d];
      bo += c * w.b_strides[d];
    }
    fn(ao, bo, row * w.span);
  }
}

// MLAS QLinearAdd (its AVX2 kernel, which ORT uses on any x86-64 with AVX2): with v the varying
// operand and s the other one,
//   fixed = zp_c - fma(s_v/s_c, zp_v, s_s/s_c * zp_s)
//   c = fma(v, s_v/s_c, fma(s, s_s/s_c, fixed))
// and for an s constant over the span the inner fma is computed once. The values c are then
// rounded half to even and saturated. The AVX2 path and the plain one give the same bits.
float add_fixed(QParams v, QParams s, QParams c) {
  float rv = v.scale / c.scale, rs = s.scale / c.scale;
  return static_cast<float>(c.zp) - std::fma(rv, static_cast<float>(v.zp), rs * static_cast<float>(s.zp));
}

template <class T>
void add_floats_plain(const T* v, const T* s, bool s_constant, int64_t n, float rv, float rs, float fixed, float* c) {
  if (s_constant) {
    float f = std::fma(static_cast<float>(s[0]), rs, fixed);
    for (int64_t i = 0; i < n; ++i) c[i] = std::fma(static_cast<float>(v[i]), rv, f);
  } else {
    for (int64_t i = 0; i < n; ++i) c[i] = std::fma(static_cast<float>(v[i]), rv, std::fma(static_cast<float>(s[i]), rs, fixed));
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
template <class T>
__attribute__((target("avx2,fma"))) inline __m256 load8_as_float(const T* p) {
  __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(std::is_signed_v<T> ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
}

template <class T>
__attribute__((target("avx2,fma"))) void add_floats_fma(const T* v, const T* s, bool s_constant, int64_t n, float rv,
                                                         float rs, float fixed, float* c) {
  const __m256 vrv = _mm256_set1_ps(rv), vrs = _mm256_set1_ps(rs), vfixed = _mm256_set1_ps(fixed);
  int64_t i = 0;
  if (s_constant) {
    const __m256 f = _mm256_set1_ps(std::fma(static_cast<float>(s[0]), rs, fixed));
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(c + i, _mm256_fmadd_ps(load8_as_float(v + i), vrv, f));
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(c + i, _mm256_fmadd_ps(load8_as_float(v + i), vrv,
                                              _mm256_fmadd_ps(load8_as_float(s + i), vrs, vfixed)));
  }
  add_floats_plain(v + i, s_constant ? s : s + i, s_constant, n - i, rv, rs, fixed, c + i);
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

template <class T>
void add_floats(const T* v, const T* s, bool s_constant, int64_t n, float rv, float rs, float fixed, float* c) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_avx2_fma()) return add_floats_fma(v, s, s_constant, n, rv, rs, fixed, c);
#endif
  add_floats_plain(v, s, s_constant, n, rv, rs, fixed, c);
}

// MLAS QLinearMul: c = float((v - zp_v) * (s - zp_s)) * (s_v * s_s / s_c) + zp_c, a multiply and
// an add (no FMA), then rounded half to even and saturated.
template <class T>
void mul_floats(const T* v, const T* s, bool s_constant, int64_t n, QParams qv, QParams qs, float ratio, float zc,
                float* c) {
  if (s_constant) {
    int32_t sd = static_cast<int32_t>(s[0]) - qs.zp;
    for (int64_t i = 0; i < n; ++i) c[i] = static_cast<float>((static_cast<int32_t>(v[i]) - qv.zp) * sd) * ratio + zc;
  } else {
    for (int64_t i = 0; i < n; ++i)
      c[i] = static_cast<float>((static_cast<int32_t>(v[i]) - qv.zp) * (static_cast<int32_t>(s[i]) - qs.zp)) * ratio + zc;
  }
}

class QLinearBinaryKernel : public Kernel {
 public:
  explicit QLinearBinaryKernel(bool is_add) : is_add_(is_add) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "A");
    const Tensor& b = required_input(in, 3, "B");
    if (a.dtype() != b.dtype())
      throw Error("A is " + std::string(ir::data_type_name(a.dtype())) + " and B is " +
                  std::string(ir::data_type_name(b.dtype())) + ": they must have the same type");
    BroadcastWalk w = plan_broadcast(a.dims(), b.dims());
    Tensor y = Tensor::uninitialized(a.dtype(), w.out_dims);
    visit_8bit_type(a.dtype(), "A", [&](auto tag) {
      using T = decltype(tag);
      QParams qa = read_qparams(in, 1, 2, a.dtype(), "A");
      QParams qb = read_qparams(in, 4, 5, a.dtype(), "B");
      QParams qc = read_qparams(in, 6, 7, a.dtype(), "C");
      // ORT computes a span with A constant as B + A (its kernels take the constant second).
      bool swap = w.kind == SpanKind::ScalarA;
      bool s_constant = w.kind != SpanKind::Both;
      const T* vv = (swap ? b : a).template values<T>().data();
      const T* sv = (swap ? a : b).template values<T>().data();
      QParams qv = swap ? qb : qa, qs = swap ? qa : qb;
      T* yv = y.mutable_values<T>().data();
      float rv = qv.scale / qc.scale, rs = qs.scale / qc.scale, fixed = add_fixed(qv, qs, qc);
      float ratio = qv.scale * qs.scale / qc.scale, zc = static_cast<float>(qc.zp);
      int64_t rows = w.span > 0 ? ir::element_count(w.out_dims) / w.span : 0;
      parallel_for(ctx.threads, rows, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(w.span, 1)),
                   [&](int64_t begin, int64_t end) {
                     constexpr int64_t kChunk = 256;
                     float c[kChunk];
                     walk_spans(w, begin, end, [&](int64_t ao, int64_t bo, int64_t yo) {
                       const T* vp = vv + (swap ? bo : ao);
                       const T* sp = sv + (swap ? ao : bo);
                       for (int64_t i = 0; i < w.span; i += kChunk) {
                         int64_t n = std::min(kChunk, w.span - i);
                         const T* si = s_constant ? sp : sp + i;
                         if (is_add_) add_floats(vp + i, si, s_constant, n, rv, rs, fixed, c);
                         else mul_floats(vp + i, si, s_constant, n, qv, qs, ratio, zc, c);
                         quantize_values<T>(c, n, 1.0f, 0, yv + yo + i);
                       }
                     });
                   });
    });
    out[0] = std::move(y);
  }

 private:
  bool is_add_;
};

struct QLinearAddKernel : QLinearBinaryKernel {
  QLinearAddKernel() : QLinearBinaryKernel(true) {}
};
struct QLinearMulKernel : QLinearBinaryKernel {
  QLinearMulKernel() : QLinearBinaryKernel(false) {}
};

// ---------------------------------------------------------------------------------------------
// QLinearConcat: inputs (y_scale, y_zero_point, then x, x_scale, x_zero_point for each x). Each
// input is copied when its parameters equal the output's, else mapped through a table
// requantizing it (dequantize, then MLAS QuantizeLinear), as ORT does.

class QLinearConcatKernel : public Kernel {
 public:
  explicit QLinearConcatKernel(const KernelInfo& info) {
    const ir::Attribute* a = info.node.find_attribute("axis");
    if (!a) throw Error("the axis attribute is required");
    axis_ = info.node.attr_int("axis", 0);
    size_t n = info.input_count();
    if (n < 5 || (n - 2) % 3 != 0)
      throw Error("inputs must be y_scale, y_zero_point and (x, x_scale, x_zero_point) triples, got " +
                  std::to_string(n) + " inputs");
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    if (!optional_input(in, 1)) throw Error("y_zero_point is required (it gives the output type)");
    DataType type = in[1]->dtype();
    size_t count = (in.size() - 2) / 3;
    std::vector<const Tensor*> xs(count);
    for (size_t i = 0; i < count; ++i) {
      xs[i] = in[2 + 3 * i];
      if (!xs[i]) throw Error("input " + std::to_string(i) + " is missing");
      if (xs[i]->dtype() != type)
        throw Error("input " + std::to_string(i) + " has type " + std::string(ir::data_type_name(xs[i]->dtype())) +
                    ", the output " + std::string(ir::data_type_name(type)));
    }
    const std::vector<int64_t>& d0 = xs[0]->dims();
    int64_t rank = static_cast<int64_t>(d0.size());
    if (rank == 0) throw Error("cannot concatenate scalars");
    int64_t axis = normalize_axis(axis_, rank);
    std::vector<int64_t> out_dims = d0;
    out_dims[axis] = 0;
    for (const Tensor* x : xs) {
      const auto& d = x->dims();
      bool ok = static_cast<int64_t>(d.size()) == rank;
      for (int64_t k = 0; ok && k < rank; ++k) ok = k == axis || d[k] == d0[k];
      if (!ok)
        throw Error("inputs " + ir::dims_to_string(d0) + " and " + ir::dims_to_string(d) + " differ off axis " +
                    std::to_string(axis));
      out_dims[axis] += d[axis];
    }
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= out_dims[k];
    for (int64_t k = axis + 1; k < rank; ++k) inner *= out_dims[k];
    int64_t out_pitch = out_dims[axis] * inner;
    Tensor y = Tensor::uninitialized(type, out_dims);
    uint8_t* dst = reinterpret_cast<uint8_t*>(y.mutable_bytes());
    visit_8bit_type(type, "y_zero_point", [&](auto tag) {
      using T = decltype(tag);
      QParams yq = read_qparams(in, 0, 1, type, "y");
      int64_t offset = 0;
      for (size_t i = 0; i < count; ++i) {
        QParams xq = read_qparams(in, 3 + 3 * i, 4 + 3 * i, type, "x");
        int64_t pitch = xs[i]->dims()[axis] * inner;
        const uint8_t* src = reinterpret_cast<const uint8_t*>(xs[i]->bytes().data());
        bool copy = xq.scale == yq.scale && xq.zp == yq.zp;
        std::array<uint8_t, 256> table{};
        if (!copy) table = build_table<T>(xq, yq, [](float*) {});
        parallel_for(ctx.threads, outer, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(pitch, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t o = b; o < e; ++o) {
                         const uint8_t* s = src + o * pitch;
                         uint8_t* d = dst + o * out_pitch + offset;
                         if (copy) std::memcpy(d, s, pitch);
                         else
                           for (int64_t k = 0; k < pitch; ++k) d[k] = table[s[k]];
                       }
                     });
        offset += pitch;
      }
    });
    out[0] = std::move(y);
  }

 private:
  int64_t axis_ = 0;
};

}  // namespace

void register_quantize_qlinear_kernels(KernelRegistry& r) {
  const std::string ms = "com.microsoft";
  r.add(ms, "QLinearAdd", 1, 1, kernel_factory<QLinearAddKernel>());
  r.add(ms, "QLinearMul", 1, 1, kernel_factory<QLinearMulKernel>());
  r.add(ms, "QLinearConcat", 1, 1, kernel_factory<QLinearConcatKernel>());
  r.add(ms, "QLinearSigmoid", 1, 1, kernel_factory<QLinearSigmoidKernel>());
  r.add(ms, "QLinearLeakyRelu", 1, 1, kernel_factory<QLinearLeakyReluKernel>());
}

}  // namespace onnxptq::engine
