// Ops over several broadcast inputs: Min, Max, Sum, Mean (any number of inputs) and Where.
#include <cstring>

#include "engine/kernels/elementwise.h"

namespace onnxptq::engine::elementwise {
namespace {

enum class Fold { Min, Max, Sum, Mean };

// NaN wins in Min and Max, as in numpy.minimum / numpy.maximum.
template <Fold kOp, class T>
inline T fold(T x, T y) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  if constexpr (kOp == Fold::Min && kFloat) return (x < y || x != x) ? x : y;
  else if constexpr (kOp == Fold::Max && kFloat) return (x > y || x != x) ? x : y;
  else if constexpr (kOp == Fold::Min) return x < y ? x : y;
  else if constexpr (kOp == Fold::Max) return x > y ? x : y;
  else return wrap_add(x, y);
}

// The inputs are folded pairwise from the first, each step broadcasting the running result with
// the next input (the result's shape is the broadcast of all the inputs).
template <Fold kOp>
class FoldKernel : public Kernel {
 public:
  explicit FoldKernel(const KernelInfo& info) : op_(info.node.op_type) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    size_t n = in.size();
    if (n == 0) throw Error("needs at least one input");
    for (size_t i = 0; i < n; ++i) required_input(in, i, "data");
    check_same_type(in, n);
    DataType t = in[0]->dtype();
    constexpr TypeSet types = kOp == Fold::Mean ? TypeSet::Float : TypeSet::Numeric;
    if (n == 1 && kOp != Fold::Mean) {
      visit_type<types>(is_float16_like(t) ? DataType::Float : t, op_, [](auto) {});
      out[0] = *in[0];  // shares the data
      return;
    }
    if (is_float16_like(t)) {
      std::vector<Tensor> floats;
      for (const Tensor* x : in) floats.push_back(as_float32(*x));
      std::vector<const Tensor*> ptrs;
      for (const Tensor& f : floats) ptrs.push_back(&f);
      out[0] = float32_as(compute(ctx, ptrs, op_), t);
    } else {
      out[0] = compute(ctx, in, op_);
    }
  }

 private:
  static Tensor compute(const RunContext& ctx, std::span<const Tensor* const> in, const std::string& op) {
    constexpr TypeSet types = kOp == Fold::Mean ? TypeSet::Float : TypeSet::Numeric;
    return visit_type<types>(in[0]->dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      auto f = [](T x, T y) { return fold<kOp>(x, y); };
      Tensor acc = *in[0];
      for (size_t i = 1; i < in.size(); ++i) {
        BroadcastPlan p = broadcast_plan({&acc.dims(), &in[i]->dims()});
        Tensor next = Tensor::uninitialized(acc.dtype(), p.out_dims);
        binary_apply(p, acc.values<T>().data(), in[i]->values<T>().data(), next.mutable_values<T>().data(),
                     ctx.threads, kCheapChunk, f);
        acc = std::move(next);
      }
      if constexpr (kOp == Fold::Mean) {
        if (in.size() > 1) {  // else acc still shares the input's data
          T count = static_cast<T>(in.size());
          T* v = acc.mutable_values<T>().data();
          parallel_for(ctx.threads, acc.size(), kCheapChunk, [&](int64_t begin, int64_t end) {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) v[i] = v[i] / count;
          });
        }
      }
      return acc;
    });
  }

  std::string op_;
};

// out[i] = cond[i] ? x[i] : y[i] over the broadcast of the three; any element type (copied by
// width, strings one by one).
class WhereKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& c = required_input(in, 0, "condition");
    const Tensor& x = required_input(in, 1, "X");
    const Tensor& y = required_input(in, 2, "Y");
    if (c.dtype() != DataType::Bool) throw Error("condition must be bool, got " + type_name(c.dtype()));
    if (x.dtype() != y.dtype())
      throw Error("X is " + type_name(x.dtype()) + " and Y is " + type_name(y.dtype()) + ": they must have the same type");
    BroadcastPlan p = broadcast_plan({&c.dims(), &x.dims(), &y.dims()});
    const uint8_t* cs = c.values<uint8_t>().data();
    if (x.dtype() == DataType::String) {
      std::vector<std::string> values(p.total);
      const auto& xs = x.string_values();
      const auto& ys = y.string_values();
      broadcast_for_each(p, 1, kCheapChunk, [&](const int64_t* off, int64_t o, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          values[o + i] = cs[off[0] + i * p.inner_step[0]] ? xs[off[1] + i * p.inner_step[1]] : ys[off[2] + i * p.inner_step[2]];
      });
      out[0] = Tensor::from_strings(p.out_dims, std::move(values));
      return;
    }
    int bits = ir::data_type_bits(x.dtype());
    Tensor result = Tensor::uninitialized(x.dtype(), p.out_dims);
    switch (bits) {
      case 8: select<uint8_t>(ctx, p, cs, x, y, result); break;
      case 16: select<uint16_t>(ctx, p, cs, x, y, result); break;
      case 32: select<uint32_t>(ctx, p, cs, x, y, result); break;
      case 64: select<uint64_t>(ctx, p, cs, x, y, result); break;
      default: throw unsupported("Where does not support element type " + type_name(x.dtype()));
    }
    out[0] = std::move(result);
  }

 private:
  template <class T>
  static void select(const RunContext& ctx, const BroadcastPlan& p, const uint8_t* cs, const Tensor& x, const Tensor& y,
                     Tensor& result) {
    const T* xs = x.values<T>().data();
    const T* ys = y.values<T>().data();
    T* o = result.mutable_values<T>().data();
    broadcast_for_each(p, ctx.threads, kCheapChunk, [&](const int64_t* off, int64_t ob, int64_t n) {
      const uint8_t* c = cs + off[0];
      const T* a = xs + off[1];
      const T* b = ys + off[2];
      int64_t sc = p.inner_step[0], sa = p.inner_step[1], sb = p.inner_step[2];
      T* out = o + ob;
      if (sc && sa && sb) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) out[i] = c[i] ? a[i] : b[i];
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = c[i * sc] ? a[i * sa] : b[i * sb];
      }
    });
  }
};

}  // namespace

void register_variadic(KernelRegistry& r) {
  // Opset 6 is opset 8 without broadcasting.
  r.add("", "Min", 6, kLatestOpset, kernel_factory<FoldKernel<Fold::Min>>());
  r.add("", "Max", 6, kLatestOpset, kernel_factory<FoldKernel<Fold::Max>>());
  r.add("", "Sum", 6, kLatestOpset, kernel_factory<FoldKernel<Fold::Sum>>());
  r.add("", "Mean", 6, kLatestOpset, kernel_factory<FoldKernel<Fold::Mean>>());
  r.add("", "Where", 9, kLatestOpset, kernel_factory<WhereKernel>());
}

}  // namespace onnxptq::engine::elementwise
