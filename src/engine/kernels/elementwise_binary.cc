// Binary elementwise ops with NumPy broadcasting: Add, Sub, Mul, Div, Pow, Mod, BitShift,
// And, Or, Xor, the comparisons and PRelu. Float16 and bfloat16 are computed through float32.
#include <cmath>
#include <limits>

#include "engine/kernels/elementwise.h"

namespace onnxptq::engine::elementwise {
namespace {

// Opsets 1 to 6 broadcast only B, and only with broadcast=1: B's shape lines up with A's from
// `axis` (suffix matching by default). Returns B's shape padded to A's rank.
struct LegacyBroadcast {
  bool enabled = false;
  int64_t broadcast = 0;
  bool has_axis = false;
  int64_t axis = 0;

  LegacyBroadcast(const KernelInfo& info, int64_t first_numpy_opset) {
    if (info.opset >= first_numpy_opset) return;
    enabled = true;
    broadcast = info.node.attr_int("broadcast", 0);
    has_axis = info.node.find_attribute("axis") != nullptr;
    axis = info.node.attr_int("axis", 0);
  }

  std::vector<int64_t> rhs_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) const {
    if (!enabled) return b;
    if (!broadcast) {
      if (a != b)
        throw Error("shapes " + ir::dims_to_string(a) + " and " + ir::dims_to_string(b) +
                    " differ and the attribute broadcast is 0");
      return b;
    }
    if (b.size() > a.size())
      throw Error("B " + ir::dims_to_string(b) + " has a higher rank than A " + ir::dims_to_string(a));
    int64_t rank = static_cast<int64_t>(a.size()), brank = static_cast<int64_t>(b.size());
    int64_t start = has_axis ? normalize_axis(axis, rank) : rank - brank;
    if (start + brank > rank)
      throw Error("B " + ir::dims_to_string(b) + " does not fit in A " + ir::dims_to_string(a) + " from axis " +
                  std::to_string(axis));
    std::vector<int64_t> padded(a.size(), 1);
    std::copy(b.begin(), b.end(), padded.begin() + start);
    return padded;
  }
};

// The plan for A and B (B's shape possibly rewritten); with `b_follows_a` the output must have
// A's shape (legacy and unidirectional broadcasting).
BroadcastPlan plan_for(const Tensor& a, const std::vector<int64_t>& b_dims, bool b_follows_a) {
  BroadcastPlan p = broadcast_plan({&a.dims(), &b_dims});
  if (b_follows_a && p.out_dims != a.dims())
    throw Error("the second input " + ir::dims_to_string(b_dims) + " cannot be broadcast to the first " +
                ir::dims_to_string(a.dims()));
  return p;
}

// Computes out = f(a, b) for inputs of one element type, float16 and bfloat16 through float32.
// `compute(T{})` returns the functor for element type T. A float32 output's extrema are taken as
// it is written when the run asks for them.
template <TypeSet kTypes, class Compute>
Tensor same_type_binary(const Tensor& a, const Tensor& b, const BroadcastPlan& p, const std::string& what,
                        const RunContext& ctx, int64_t chunk, const Compute& compute) {
  if (is_float16_like(a.dtype()) && has(kTypes, TypeSet::Float)) {
    Tensor fa = as_float32(a), fb = as_float32(b);
    const RunContext float32_ctx{ctx.threads};  // the extrema of the output are not those of this
    return float32_as(same_type_binary<kTypes>(fa, fb, p, what, float32_ctx, chunk, compute), a.dtype());
  }
  return visit_type<kTypes>(a.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::uninitialized(a.dtype(), p.out_dims);
    binary_apply(p, a.values<T>().data(), b.values<T>().data(), out.mutable_values<T>().data(), ctx.threads, chunk,
                 compute(tag), ctx.output_extrema);
    return out;
  });
}

// Integer division and remainder by zero would trap: refuse them before starting.
template <class T>
void check_no_zero_divisor(const Tensor& b) {
  if constexpr (std::is_integral_v<T>)
    for (T v : b.values<T>())
      if (v == 0) throw Error("integer division by zero");
}

enum class Arith { Add, Sub, Mul, Div };

template <Arith kOp>
class ArithKernel : public Kernel {
 public:
  explicit ArithKernel(const KernelInfo& info) : legacy_(info, 7), op_(info.node.op_type) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "A");
    const Tensor& b = required_input(in, 1, "B");
    check_same_type(in, 2);
    BroadcastPlan p = plan_for(a, legacy_.rhs_shape(a.dims(), b.dims()), legacy_.enabled);
    out[0] = same_type_binary<TypeSet::Numeric>(a, b, p, op_, ctx, kCheapChunk, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kOp == Arith::Add)
        return [](T x, T y) { return wrap_add(x, y); };
      else if constexpr (kOp == Arith::Sub)
        return [](T x, T y) { return wrap_sub(x, y); };
      else if constexpr (kOp == Arith::Mul)
        return [](T x, T y) { return wrap_mul(x, y); };
      else {
        check_no_zero_divisor<T>(b);
        return [](T x, T y) -> T {
          // Integers truncate toward zero as in C; the one overflow, MIN / -1, wraps.
          if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
            if (y == -1) return wrap_sub(T(0), x);
          return static_cast<T>(x / y);
        };
      }
    });
  }

 private:
  LegacyBroadcast legacy_;
  std::string op_;
};

// x^y for an integer x and integer y by squaring (wrapping like the other integer ops); a
// negative y gives the truncated 1/x^|y|.
template <class T, class E>
T int_pow(T x, E y) {
  if constexpr (std::is_signed_v<E>) {
    if (y < 0) {
      if (x == 1) return 1;
      if constexpr (std::is_signed_v<T>)
        if (x == -1) return (y & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  auto e = static_cast<std::make_unsigned_t<E>>(y);
  while (e) {
    if (e & 1) result = wrap_mul(result, x);
    x = wrap_mul(x, x);
    e >>= 1;
  }
  return result;
}

template <class T, class E>
T pow_value(T x, E y) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) return std::pow(x, y);
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(std::pow(double(x), double(y)));
  else if constexpr (std::is_integral_v<E>) return int_pow(x, y);
  else return saturate_to<T>(std::pow(double(x), double(y)));
}

// Pow: the base's type is the output's; from opset 12 the exponent may be of another type.
class PowKernel : public Kernel {
 public:
  explicit PowKernel(const KernelInfo& info) : legacy_(info, 7) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    const Tensor& y = required_input(in, 1, "Y");
    BroadcastPlan p = plan_for(x, legacy_.rhs_shape(x.dims(), y.dims()), legacy_.enabled);
    if (is_float16_like(x.dtype())) {
      Tensor fx = as_float32(x);
      Tensor fy = is_float16_like(y.dtype()) ? as_float32(y) : y;
      out[0] = float32_as(compute(fx, fy, p, ctx.threads), x.dtype());
    } else {
      out[0] = compute(x, is_float16_like(y.dtype()) ? as_float32(y) : y, p, ctx.threads);
    }
  }

 private:
  static Tensor compute(const Tensor& x, const Tensor& y, const BroadcastPlan& p, int threads) {
    return visit_type<TypeSet::Numeric>(x.dtype(), "Pow base", [&](auto xt) {
      using T = decltype(xt);
      return visit_type<TypeSet::Numeric>(y.dtype(), "Pow exponent", [&](auto yt) {
        using E = decltype(yt);
        Tensor out = Tensor::uninitialized(x.dtype(), p.out_dims);
        const T* xs = x.values<T>().data();
        const E* ys = y.values<E>().data();
        T* os = out.mutable_values<T>().data();
        if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
          if (y.size() == 1 && ys[0] == 2.0f) {  // squares (variance in normalisations) are common
            binary_apply(p, xs, ys, os, threads, kCheapChunk, [](float a, float) { return a * a; });
            return out;
          }
        }
        binary_apply(p, xs, ys, os, threads, kCostlyChunk, [](T a, E b) { return pow_value(a, b); });
        return out;
      });
    });
  }

  LegacyBroadcast legacy_;
};

class ModKernel : public Kernel {
 public:
  explicit ModKernel(const KernelInfo& info) : fmod_(info.node.attr_int("fmod", 0)) {
    if (fmod_ != 0 && fmod_ != 1) throw Error("attribute fmod must be 0 or 1, got " + std::to_string(fmod_));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "A");
    const Tensor& b = required_input(in, 1, "B");
    check_same_type(in, 2);
    DataType t = a.dtype();
    if (!fmod_ && (is_float16_like(t) || t == DataType::Float || t == DataType::Double))
      throw Error("Mod of " + type_name(t) + " needs fmod=1, got fmod=0");
    BroadcastPlan p = plan_for(a, b.dims(), false);
    bool c_style = fmod_ != 0;
    out[0] = same_type_binary<TypeSet::Numeric>(a, b, p, "Mod", ctx, kCheapChunk, [&](auto tag) {
      using T = decltype(tag);
      check_no_zero_divisor<T>(b);
      return [c_style](T x, T y) -> T {
        if constexpr (std::is_floating_point_v<T>) {
          return std::fmod(x, y);
        } else {
          if constexpr (std::is_signed_v<T>)
            if (y == -1) return 0;  // MIN % -1 would trap
          T r = static_cast<T>(x % y);
          // fmod=0 follows Python: the remainder takes the divisor's sign.
          if constexpr (std::is_signed_v<T>)
            if (!c_style && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
          return r;
        }
      };
    });
  }

 private:
  int64_t fmod_;
};

class BitShiftKernel : public Kernel {
 public:
  explicit BitShiftKernel(const KernelInfo& info) {
    std::string direction = info.node.attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      throw Error("attribute direction must be LEFT or RIGHT, got '" + direction + "'");
    left_ = direction == "LEFT";
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "X");
    const Tensor& b = required_input(in, 1, "Y");
    check_same_type(in, 2);
    BroadcastPlan p = plan_for(a, b.dims(), false);
    bool left = left_;
    out[0] = same_type_binary<TypeSet::Unsigned>(a, b, p, "BitShift", ctx, kCheapChunk, [left](auto tag) {
      using T = decltype(tag);
      return [left](T x, T y) -> T {
        if (y >= sizeof(T) * 8) return 0;  // shifting every bit out (undefined in C++)
        return static_cast<T>(left ? x << y : x >> y);
      };
    });
  }

 private:
  bool left_;
};

enum class Logic { And, Or, Xor };

template <Logic kOp>
class LogicKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "A");
    const Tensor& b = required_input(in, 1, "B");
    if (a.dtype() != DataType::Bool || b.dtype() != DataType::Bool)
      throw Error("inputs must be bool, got " + type_name(a.dtype()) + " and " + type_name(b.dtype()));
    BroadcastPlan p = plan_for(a, b.dims(), false);
    Tensor result = Tensor::uninitialized(DataType::Bool, p.out_dims);
    binary_apply(p, a.values<uint8_t>().data(), b.values<uint8_t>().data(), result.mutable_values<uint8_t>().data(),
                 ctx.threads, kCheapChunk, [](uint8_t x, uint8_t y) -> uint8_t {
                   if constexpr (kOp == Logic::And) return (x != 0) & (y != 0);
                   else if constexpr (kOp == Logic::Or) return (x != 0) | (y != 0);
                   else return (x != 0) ^ (y != 0);
                 });
    out[0] = std::move(result);
  }
};

enum class Compare { Equal, Less, LessOrEqual, Greater, GreaterOrEqual };

template <Compare kOp, class T>
inline uint8_t compare(T x, T y) {
  if constexpr (kOp == Compare::Equal) return x == y;
  else if constexpr (kOp == Compare::Less) return x < y;
  else if constexpr (kOp == Compare::LessOrEqual) return x <= y;
  else if constexpr (kOp == Compare::Greater) return x > y;
  else return x >= y;
}

template <Compare kOp>
class CompareKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = required_input(in, 0, "A");
    const Tensor& b = required_input(in, 1, "B");
    check_same_type(in, 2);
    BroadcastPlan p = plan_for(a, b.dims(), false);
    Tensor result = Tensor::uninitialized(DataType::Bool, p.out_dims);
    uint8_t* o = result.mutable_values<uint8_t>().data();
    DataType t = a.dtype();
    if (is_float16_like(t)) {
      Tensor fa = as_float32(a), fb = as_float32(b);
      binary_apply(p, fa.values<float>().data(), fb.values<float>().data(), o, ctx.threads, kCheapChunk,
                   [](float x, float y) { return compare<kOp>(x, y); });
    } else if (t == DataType::Bool) {
      binary_apply(p, a.values<uint8_t>().data(), b.values<uint8_t>().data(), o, ctx.threads, kCheapChunk,
                   [](uint8_t x, uint8_t y) { return compare<kOp, uint8_t>(x != 0, y != 0); });
    } else if (t == DataType::String && kOp == Compare::Equal) {
      const auto& as = a.string_values();
      const auto& bs = b.string_values();
      broadcast_for_each(p, 1, kCheapChunk, [&](const int64_t* off, int64_t ob, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          o[ob + i] = as[off[0] + i * p.inner_step[0]] == bs[off[1] + i * p.inner_step[1]];
      });
    } else {
      visit_type<TypeSet::Numeric>(t, "comparison", [&](auto tag) {
        using T = decltype(tag);
        binary_apply(p, a.values<T>().data(), b.values<T>().data(), o, ctx.threads, kCheapChunk,
                     [](T x, T y) { return compare<kOp>(x, y); });
      });
    }
    out[0] = std::move(result);
  }
};

// PRelu: slope broadcast to X (opset 7+); before, a 1-D slope of X's channel count is
// per-channel (axis 1), as PyTorch exports it.
class PReluKernel : public Kernel {
 public:
  explicit PReluKernel(const KernelInfo& info) : legacy_(info.opset < 7) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    const Tensor& slope = required_input(in, 1, "slope");
    check_same_type(in, 2);
    std::vector<int64_t> slope_dims = slope.dims();
    if (legacy_ && slope.rank() == 1 && x.rank() >= 2 && slope.dims()[0] == x.dims()[1] && slope.size() != 1) {
      slope_dims.assign(x.rank() - 1, 1);
      slope_dims[0] = slope.dims()[0];
    }
    BroadcastPlan p = plan_for(x, slope_dims, true);
    out[0] = same_type_binary<TypeSet::Numeric>(x, slope, p, "PRelu", ctx, kCheapChunk, [](auto tag) {
      using T = decltype(tag);
      return [](T v, T s) -> T {
        if constexpr (std::is_unsigned_v<T>) return v;
        else if constexpr (std::is_same_v<T, float>) return select_bits(v < 0.0f, v * s, v);
        else return v < 0 ? wrap_mul(v, s) : v;
      };
    });
  }

 private:
  bool legacy_;
};

}  // namespace

void register_binary(KernelRegistry& r) {
  r.add("", "Add", 1, kLatestOpset, kernel_factory<ArithKernel<Arith::Add>>());
  r.add("", "Sub", 1, kLatestOpset, kernel_factory<ArithKernel<Arith::Sub>>());
  r.add("", "Mul", 1, kLatestOpset, kernel_factory<ArithKernel<Arith::Mul>>());
  r.add("", "Div", 1, kLatestOpset, kernel_factory<ArithKernel<Arith::Div>>());
  r.add("", "Pow", 1, kLatestOpset, kernel_factory<PowKernel>());
  r.add("", "Mod", 10, kLatestOpset, kernel_factory<ModKernel>());
  r.add("", "BitShift", 11, kLatestOpset, kernel_factory<BitShiftKernel>());
  r.add("", "And", 7, kLatestOpset, kernel_factory<LogicKernel<Logic::And>>());
  r.add("", "Or", 7, kLatestOpset, kernel_factory<LogicKernel<Logic::Or>>());
  r.add("", "Xor", 7, kLatestOpset, kernel_factory<LogicKernel<Logic::Xor>>());
  r.add("", "Equal", 7, kLatestOpset, kernel_factory<CompareKernel<Compare::Equal>>());
  r.add("", "Less", 7, kLatestOpset, kernel_factory<CompareKernel<Compare::Less>>());
  r.add("", "Greater", 7, kLatestOpset, kernel_factory<CompareKernel<Compare::Greater>>());
  r.add("", "LessOrEqual", 12, kLatestOpset, kernel_factory<CompareKernel<Compare::LessOrEqual>>());
  r.add("", "GreaterOrEqual", 12, kLatestOpset, kernel_factory<CompareKernel<Compare::GreaterOrEqual>>());
  r.add("", "PRelu", 1, kLatestOpset, kernel_factory<PReluKernel>());
}

}  // namespace onnxptq::engine::elementwise
