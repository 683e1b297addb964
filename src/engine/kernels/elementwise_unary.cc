// Unary elementwise ops: maths, activations, Not, Clip. Each op is a small functor; one kernel
// template runs it over the tensor (float16 and bfloat16 through float32).
#include <bit>
#include <cmath>
#include <limits>

#include "engine/kernels/elementwise.h"

namespace onnxptq::engine::elementwise {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// erf in float, vectorisable, within about 2e-7 relative: x P(x^2) below 1, and
// 1 - e^-x^2 Q(1 / (1 + x/2)) above, P and Q least-squares fits (relative error) made for this.
[[gnu::always_inline]] inline float fast_erf(float x) {
  float a = std::fabs(x);
  float u = a * a;
  float p = -5.667873392e-4f;
  p = p * u + 4.927389874e-3f;
  p = p * u - 2.672086719e-2f;
  p = p * u + 1.128057788e-1f;
  p = p * u - 3.761239053e-1f;
  p = p * u + 1.128379147f;
  float t = 1.0f / (1.0f + 0.5f * a);
  float q = -6.089821379e-2f;
  q = q * t - 3.545671909e-2f;
  q = q * t + 3.770280987e-1f;
  q = q * t + 1.185843284e-1f;
  q = q * t + 3.246240626e-1f;
  q = q * t + 2.747942147e-1f;
  q = q * t + 5.148177899e-4f;
  float r = select_bits(a < 1.0f, a * p, 1.0f - fast_exp(-u) * q);
  return std::copysign(r, x);
}

template <class T> inline T clamp01(T v) {
  if constexpr (std::is_same_v<T, float>) {
    v = select_bits(v < 0.0f, 0.0f, v);  // NaN stays NaN
    return select_bits(v > 1.0f, 1.0f, v);
  } else {
    v = v < T(0) ? T(0) : v;
    return v > T(1) ? T(1) : v;
  }
}

// Defaults of the ops below; each op redeclares what differs.
struct UnaryOp {
  static constexpr TypeSet kTypes = TypeSet::Float;
  static constexpr int64_t kChunk = kCostlyChunk;
  static constexpr bool kBoolOutput = false;
};

// One loop for every call site (the serial and the threaded one), kept out of line so that each
// op's float loop is vectorised once rather than per inlined copy; `op` is a local copy whose
// attributes cannot alias the output.
template <class Op, class T, class O>
[[gnu::noinline]] void unary_run(const Op op, const T* src, O* dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = op(src[i]);
}

template <class Op>
class UnaryKernel : public Kernel {
 public:
  explicit UnaryKernel(const KernelInfo& info) : op_(make(info)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    DataType t = x.dtype();
    if (is_float16_like(t) && has(Op::kTypes, TypeSet::Float)) {
      Tensor r = apply(RunContext{ctx.threads}, as_float32(x));  // not the output's extrema
      out[0] = Op::kBoolOutput ? std::move(r) : float32_as(r, t);
    } else {
      out[0] = apply(ctx, x);
    }
  }

 private:
  static Op make(const KernelInfo& info) {
    if constexpr (std::is_constructible_v<Op, const KernelInfo&>) return Op(info);
    else return Op();
  }

  Tensor apply(const RunContext& ctx, const Tensor& x) const {
    return visit_type<Op::kTypes>(x.dtype(), Op::kName, [&](auto tag) {
      using T = decltype(tag);
      using O = std::conditional_t<Op::kBoolOutput, uint8_t, T>;
      Tensor result = Tensor::uninitialized(Op::kBoolOutput ? DataType::Bool : x.dtype(), x.dims());
      const T* src = x.values<T>().data();
      O* dst = result.mutable_values<O>().data();
      parallel_write(ctx.threads, dst, x.size(), Op::kChunk, ctx.output_extrema,
                     [&](int64_t begin, int64_t end) { unary_run(op_, src + begin, dst + begin, end - begin); });
      return result;
    });
  }

  Op op_;
};

// --- maths

struct Abs : UnaryOp {
  static constexpr const char* kName = "Abs";
  static constexpr TypeSet kTypes = TypeSet::Numeric;
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < 0 ? wrap_sub(T(0), x) : x;
    else return x;
  }
};

struct Neg : UnaryOp {
  static constexpr const char* kName = "Neg";
  static constexpr TypeSet kTypes = TypeSet::FloatSigned;
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const { return wrap_sub(T(0), x); }
  float operator()(float x) const { return -x; }
  double operator()(double x) const { return -x; }
};

struct Sign : UnaryOp {
  static constexpr const char* kName = "Sign";
  static constexpr TypeSet kTypes = TypeSet::Numeric;
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x > 0 ? T(1) : x < 0 ? T(-1) : x;  // keeps 0 and NaN
    else if constexpr (std::is_signed_v<T>) return static_cast<T>((x > 0) - (x < 0));
    else return x > 0 ? 1 : 0;
  }
};

struct Reciprocal : UnaryOp {
  static constexpr const char* kName = "Reciprocal";
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const { return T(1) / x; }
};

// Rounds half to even: adding and removing 2^23 rounds in the default rounding mode.
struct Round : UnaryOp {
  static constexpr const char* kName = "Round";
  static constexpr int64_t kChunk = kCheapChunk;
  double operator()(double x) const { return std::nearbyint(x); }
  float operator()(float x) const {
    float a = std::fabs(x);
    float r = select_bits(a < 8388608.0f, (a + 8388608.0f) - 8388608.0f, a);
    return std::copysign(r, x);
  }
};

#define ONNXPTQ_STD_UNARY(Name, fn)                           \
  struct Name : UnaryOp {                                     \
    static constexpr const char* kName = #Name;               \
    template <class T> T operator()(T x) const { return fn(x); } \
  };
ONNXPTQ_STD_UNARY(Sqrt, std::sqrt)
ONNXPTQ_STD_UNARY(Log, std::log)
ONNXPTQ_STD_UNARY(Floor, std::floor)
ONNXPTQ_STD_UNARY(Ceil, std::ceil)
ONNXPTQ_STD_UNARY(Sin, std::sin)
ONNXPTQ_STD_UNARY(Cos, std::cos)
ONNXPTQ_STD_UNARY(Tan, std::tan)
ONNXPTQ_STD_UNARY(Asin, std::asin)
ONNXPTQ_STD_UNARY(Acos, std::acos)
ONNXPTQ_STD_UNARY(Atan, std::atan)
ONNXPTQ_STD_UNARY(Sinh, std::sinh)
ONNXPTQ_STD_UNARY(Cosh, std::cosh)
ONNXPTQ_STD_UNARY(Asinh, std::asinh)
ONNXPTQ_STD_UNARY(Acosh, std::acosh)
ONNXPTQ_STD_UNARY(Atanh, std::atanh)
#undef ONNXPTQ_STD_UNARY

struct Erf : UnaryOp {
  static constexpr const char* kName = "Erf";
  double operator()(double x) const { return std::erf(x); }
  float operator()(float x) const { return fast_erf(x); }
};

struct Exp : UnaryOp {
  static constexpr const char* kName = "Exp";
  double operator()(double x) const { return std::exp(x); }
  float operator()(float x) const { return fast_exp(x); }
};

struct Tanh : UnaryOp {
  static constexpr const char* kName = "Tanh";
  double operator()(double x) const { return std::tanh(x); }
  float operator()(float x) const { return fast_tanh(x); }
};

struct Sigmoid : UnaryOp {
  static constexpr const char* kName = "Sigmoid";
  double operator()(double x) const { return 1.0 / (1.0 + std::exp(-x)); }
  float operator()(float x) const { return fast_sigmoid(x); }
};

// Float through the array function (the same values as the functor, in 512-bit registers).
template <>
[[gnu::noinline]] void unary_run(const Sigmoid, const float* src, float* dst, int64_t n) {
  sigmoid_values(src, dst, n);
}

struct IsNaN : UnaryOp {
  static constexpr const char* kName = "IsNaN";
  static constexpr int64_t kChunk = kCheapChunk;
  static constexpr bool kBoolOutput = true;
  template <class T> uint8_t operator()(T x) const { return x != x; }
};

struct IsInf : UnaryOp {
  static constexpr const char* kName = "IsInf";
  static constexpr int64_t kChunk = kCheapChunk;
  static constexpr bool kBoolOutput = true;
  bool negative, positive;
  explicit IsInf(const KernelInfo& info)
      : negative(info.node.attr_int("detect_negative", 1) != 0), positive(info.node.attr_int("detect_positive", 1) != 0) {}
  template <class T> uint8_t operator()(T x) const {
    constexpr T inf = std::numeric_limits<T>::infinity();
    return (positive && x == inf) || (negative && x == -inf);
  }
};

// --- activations

struct Relu : UnaryOp {
  static constexpr const char* kName = "Relu";
  static constexpr TypeSet kTypes = TypeSet::FloatSigned;
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const { return x < 0 ? T(0) : x; }  // NaN stays NaN
};

struct LeakyRelu : UnaryOp {
  static constexpr const char* kName = "LeakyRelu";
  static constexpr int64_t kChunk = kCheapChunk;
  float alpha;
  explicit LeakyRelu(const KernelInfo& info) : alpha(info.node.attr_float("alpha", 0.01f)) {}
  double operator()(double x) const { return x < 0 ? alpha * x : x; }
  float operator()(float x) const { return select_bits(x < 0.0f, alpha * x, x); }
};

struct ThresholdedRelu : UnaryOp {
  static constexpr const char* kName = "ThresholdedRelu";
  static constexpr int64_t kChunk = kCheapChunk;
  float alpha;
  explicit ThresholdedRelu(const KernelInfo& info) : alpha(info.node.attr_float("alpha", 1.0f)) {}
  template <class T> T operator()(T x) const { return x > T(alpha) ? x : T(0); }
};

struct Elu : UnaryOp {
  static constexpr const char* kName = "Elu";
  float alpha;
  explicit Elu(const KernelInfo& info) : alpha(info.node.attr_float("alpha", 1.0f)) {}
  template <class T> T operator()(T x) const { return x < 0 ? T(alpha) * std::expm1(x) : x; }
};

struct Selu : UnaryOp {
  static constexpr const char* kName = "Selu";
  float alpha, gamma;
  explicit Selu(const KernelInfo& info)
      : alpha(info.node.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(info.node.attr_float("gamma", 1.05070102214813232421875f)) {}
  template <class T> T operator()(T x) const { return x > 0 ? T(gamma) * x : T(gamma) * T(alpha) * std::expm1(x); }
};

struct Celu : UnaryOp {
  static constexpr const char* kName = "Celu";
  float alpha;
  explicit Celu(const KernelInfo& info) : alpha(info.node.attr_float("alpha", 1.0f)) {
    if (alpha == 0) throw Error("attribute alpha of Celu must not be 0");
  }
  template <class T> T operator()(T x) const { return x > 0 ? x : T(alpha) * std::expm1(x / T(alpha)); }
};

struct HardSigmoid : UnaryOp {
  static constexpr const char* kName = "HardSigmoid";
  static constexpr int64_t kChunk = kCheapChunk;
  float alpha, beta;
  explicit HardSigmoid(const KernelInfo& info)
      : alpha(info.node.attr_float("alpha", 0.2f)), beta(info.node.attr_float("beta", 0.5f)) {}
  template <class T> T operator()(T x) const { return clamp01(T(alpha) * x + T(beta)); }
};

struct HardSwish : UnaryOp {
  static constexpr const char* kName = "HardSwish";
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const { return x * clamp01(x * T(1.0 / 6.0) + T(0.5)); }
};

struct Softsign : UnaryOp {
  static constexpr const char* kName = "Softsign";
  static constexpr int64_t kChunk = kCheapChunk;
  template <class T> T operator()(T x) const { return x / (T(1) + std::fabs(x)); }
};

// log(1 + e^x) without overflow for large x.
template <class T> T softplus(T x) { return std::fmax(x, T(0)) + std::log1p(std::exp(-std::fabs(x))); }

// ln(1 + u) for u in [0, 1], vectorisable: ln(w) u / (w - 1) with w = 1 + u rounded, whose factor
// cancels w's rounding error (Goldberg, "What every computer scientist should know about
// floating-point arithmetic", 1991, theorem 4), and u itself where w rounds to 1. A NaN u gives NaN.
[[gnu::always_inline]] inline float log1p_unit(float u) {
  const float w = 1.0f + u;
  return select_bits(w == 1.0f, u, fast_log(w) * (u / (w - 1.0f)));
}

// softplus in float through fast_exp and fast_log: within about 4e-7 relative (libm per value took
// 12 ms for a million values, 50 times the Exp op).
template <> [[gnu::always_inline]] inline float softplus(float x) {
  return select_bits(x > 0.0f, x, 0.0f) + log1p_unit(fast_exp(-std::fabs(x)));
}

struct Softplus : UnaryOp {
  static constexpr const char* kName = "Softplus";
  template <class T> T operator()(T x) const { return softplus(x); }
};

struct Mish : UnaryOp {
  static constexpr const char* kName = "Mish";
  double operator()(double x) const { return x * std::tanh(softplus(x)); }
  float operator()(float x) const { return x * fast_tanh(softplus(x)); }
};

// Gelu, exact (erf) or with the tanh approximation: two ops, chosen when the kernel is built.
struct GeluErf : UnaryOp {
  static constexpr const char* kName = "Gelu";
  double operator()(double x) const { return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440)); }
  float operator()(float x) const { return 0.5f * x * (1.0f + fast_erf(x * 0.70710678118654752440f)); }
};

struct GeluTanh : UnaryOp {
  static constexpr const char* kName = "Gelu";
  static constexpr double kScale = 0.79788456080286535588;  // sqrt(2 / pi)
  double operator()(double x) const { return 0.5 * x * (1.0 + std::tanh(kScale * (x + 0.044715 * x * x * x))); }
  float operator()(float x) const {
    return 0.5f * x * (1.0f + fast_tanh(float(kScale) * (x + 0.044715f * x * x * x)));
  }
};

struct Shrink : UnaryOp {
  static constexpr const char* kName = "Shrink";
  static constexpr TypeSet kTypes = TypeSet::Numeric;
  static constexpr int64_t kChunk = kCheapChunk;
  float bias, lambd;
  explicit Shrink(const KernelInfo& info)
      : bias(info.node.attr_float("bias", 0.0f)), lambd(info.node.attr_float("lambd", 0.5f)) {}
  template <class T> T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      return select_bits(x < -lambd, x + bias, select_bits(x > lambd, x - bias, 0.0f));
    } else if constexpr (std::is_floating_point_v<T>) {
      return x < -T(lambd) ? x + T(bias) : x > T(lambd) ? x - T(bias) : T(0);
    } else {
      double v = static_cast<double>(x);
      return saturate_to<T>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
    }
  }
};

class NotKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    if (x.dtype() != DataType::Bool) throw Error("Not needs bool input, got " + type_name(x.dtype()));
    Tensor result = Tensor::uninitialized(DataType::Bool, x.dims());
    const uint8_t* src = x.values<uint8_t>().data();
    uint8_t* dst = result.mutable_values<uint8_t>().data();
    parallel_for(ctx.threads, x.size(), kCheapChunk, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) dst[i] = src[i] == 0;
    });
    out[0] = std::move(result);
  }
};

template <class T>
struct ClipOp {
  T low, high;
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      x = select_bits(x < low, low, x);  // NaN stays NaN
      return select_bits(x > high, high, x);
    } else {
      x = x < low ? low : x;
      return x > high ? high : x;
    }
  }
};

// Clip: bounds are attributes up to opset 10, optional scalar inputs from 11 (integers from 12).
// min > max gives max everywhere, as the spec says.
class ClipKernel : public Kernel {
 public:
  explicit ClipKernel(const KernelInfo& info) : attributes_(info.opset < 11) {
    if (attributes_) {
      min_ = info.node.attr_float("min", std::numeric_limits<float>::lowest());
      max_ = info.node.attr_float("max", std::numeric_limits<float>::max());
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "input");
    const Tensor* lo = !attributes_ && in.size() > 1 ? in[1] : nullptr;
    const Tensor* hi = !attributes_ && in.size() > 2 ? in[2] : nullptr;
    for (const Tensor* bound : {lo, hi}) {
      if (!bound) continue;
      if (bound->dtype() != x.dtype())
        throw Error("min and max must have the input's type " + type_name(x.dtype()) + ", got " + type_name(bound->dtype()));
      if (bound->size() != 1)
        throw Error("min and max must be scalars, got shape " + ir::dims_to_string(bound->dims()));
    }
    if (is_float16_like(x.dtype())) {
      Tensor flo = lo ? as_float32(*lo) : Tensor(), fhi = hi ? as_float32(*hi) : Tensor();
      out[0] = float32_as(apply(RunContext{ctx.threads}, as_float32(x), lo ? &flo : nullptr, hi ? &fhi : nullptr),
                          x.dtype());
    } else {
      out[0] = apply(ctx, x, lo, hi);
    }
  }

 private:
  Tensor apply(const RunContext& ctx, const Tensor& x, const Tensor* lo, const Tensor* hi) const {
    return visit_type<TypeSet::Numeric>(x.dtype(), "Clip", [&](auto tag) {
      using T = decltype(tag);
      T low, high;
      if constexpr (std::is_floating_point_v<T>) {
        low = attributes_ ? T(min_) : -std::numeric_limits<T>::infinity();
        high = attributes_ ? T(max_) : std::numeric_limits<T>::infinity();
      } else {
        low = std::numeric_limits<T>::lowest();
        high = std::numeric_limits<T>::max();
      }
      if (lo) low = lo->values<T>()[0];
      if (hi) high = hi->values<T>()[0];
      Tensor result = Tensor::uninitialized(x.dtype(), x.dims());
      const T* src = x.values<T>().data();
      T* dst = result.mutable_values<T>().data();
      parallel_write(ctx.threads, dst, x.size(), kCheapChunk, ctx.output_extrema, [&](int64_t begin, int64_t end) {
        unary_run(ClipOp<T>{low, high}, src + begin, dst + begin, end - begin);
      });
      return result;
    });
  }

  bool attributes_;
  float min_ = 0, max_ = 0;
};

std::unique_ptr<Kernel> make_gelu(const KernelInfo& info) {
  std::string a = info.node.attr_string("approximate", "none");
  if (a == "none") return std::make_unique<UnaryKernel<GeluErf>>(info);
  if (a == "tanh") return std::make_unique<UnaryKernel<GeluTanh>>(info);
  throw Error("attribute approximate must be 'none' or 'tanh', got '" + a + "'");
}

template <class Op>
void add(KernelRegistry& r, const char* name, int since) {
  r.add("", name, since, kLatestOpset, kernel_factory<UnaryKernel<Op>>());
}

}  // namespace

void register_unary(KernelRegistry& r) {
  // Opset 6 differs from opset 1 only by dropping the legacy consumed_inputs attribute.
  add<Abs>(r, "Abs", 6);
  add<Neg>(r, "Neg", 6);
  add<Sqrt>(r, "Sqrt", 6);
  add<Reciprocal>(r, "Reciprocal", 6);
  add<Exp>(r, "Exp", 6);
  add<Log>(r, "Log", 6);
  add<Floor>(r, "Floor", 6);
  add<Ceil>(r, "Ceil", 6);
  add<Tanh>(r, "Tanh", 6);
  add<Sigmoid>(r, "Sigmoid", 6);
  add<Relu>(r, "Relu", 6);
  add<LeakyRelu>(r, "LeakyRelu", 6);
  add<Elu>(r, "Elu", 6);
  add<Selu>(r, "Selu", 6);
  add<HardSigmoid>(r, "HardSigmoid", 6);
  add<Sin>(r, "Sin", 7);
  add<Cos>(r, "Cos", 7);
  add<Tan>(r, "Tan", 7);
  add<Asin>(r, "Asin", 7);
  add<Acos>(r, "Acos", 7);
  add<Atan>(r, "Atan", 7);
  add<Sinh>(r, "Sinh", 9);
  add<Cosh>(r, "Cosh", 9);
  add<Asinh>(r, "Asinh", 9);
  add<Acosh>(r, "Acosh", 9);
  add<Atanh>(r, "Atanh", 9);
  add<Erf>(r, "Erf", 9);
  add<Sign>(r, "Sign", 9);
  add<IsNaN>(r, "IsNaN", 9);
  add<Shrink>(r, "Shrink", 9);
  add<IsInf>(r, "IsInf", 10);
  add<ThresholdedRelu>(r, "ThresholdedRelu", 10);
  add<Round>(r, "Round", 11);
  add<Celu>(r, "Celu", 12);
  add<HardSwish>(r, "HardSwish", 14);
  add<Mish>(r, "Mish", 18);
  r.add("", "Gelu", 20, kLatestOpset, make_gelu);
  add<Softsign>(r, "Softsign", 1);
  add<Softplus>(r, "Softplus", 1);
  r.add("", "Not", 1, kLatestOpset, kernel_factory<NotKernel>());
  r.add("", "Clip", 6, kLatestOpset, kernel_factory<ClipKernel>());
}

}  // namespace onnxptq::engine::elementwise
