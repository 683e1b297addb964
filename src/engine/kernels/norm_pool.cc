// BatchNormalization, InstanceNormalization, LayerNormalization, GroupNormalization,
// MeanVarianceNormalization, LpNormalization and LRN; the family's registration (the pools are
// in norm_pool_pooling.cc).
//
// Everything computes in float32 (float16, bfloat16 and double through it); means and
// variances accumulate in double, in two passes, so that long rows keep their digits.
#include <algorithm>
#include <cmath>

#include "engine/kernels/norm_pool.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

// The float32 form of a float-like tensor; Error naming `what` for other types.
Tensor norm_as_float(const Tensor& t, const std::string& op_type, const std::string& what) {
  const DataType type = t.dtype();
  if (type == DataType::Float) return t;
  if (type == DataType::Double || norm_pool_is_half(type)) return as_float32(t);
  throw Error(op_type + " does not take a " + norm_pool_type_name(type) + " " + what);
}

std::vector<float> norm_floats(const Tensor& t, const std::string& op_type, const std::string& what) {
  Tensor f = norm_as_float(t, op_type, what);
  auto v = f.values<float>();
  return {v.begin(), v.end()};
}

Tensor norm_output(const Tensor& yf, DataType type) { return type == DataType::Float ? yf : float32_as(yf, type); }

struct MeanVar {
  double mean = 0, var = 0;
};

MeanVar norm_mean_var(const float* x, int64_t n) {
  if (n == 0) return {};
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  return {mean, sq / static_cast<double>(n)};
}

inline void norm_scale_shift(const float* x, float* y, int64_t n, float a, float b) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

// ---- BatchNormalization ----

class BatchNormKernel : public Kernel {
 public:
  explicit BatchNormKernel(const KernelInfo& info) {
    const ir::Node& node = info.node;
    epsilon_ = node.attr_float("epsilon", 1e-5f);
    momentum_ = node.attr_float("momentum", 0.9f);
    training_ = info.opset >= 14 && node.attr_int("training_mode", 0) != 0;
    // spatial = 0 (before opset 9): one scale per activation, of shape C x D1 x ... x Dk.
    per_channel_ = info.opset >= 9 || node.attr_int("spatial", 1) != 0;
    if (info.opset < 14)
      for (size_t i = 1; i < node.outputs().size(); ++i)
        if (node.output(i))
          throw Error("the training outputs (mean, var, saved_mean, saved_var) of BatchNormalization-" +
                      std::to_string(info.opset) + " are not supported: the engine runs inference");
    if (info.input_count() != 5) throw Error("BatchNormalization needs 5 inputs, got " + std::to_string(info.input_count()));
    bool constant = true;
    for (size_t i = 1; i < 5; ++i) constant = constant && info.constant(i);
    if (!training_ && constant) {
      fold(*info.constant(1), *info.constant(2), *info.constant(3), *info.constant(4), a_, b_);
      folded_ = true;
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error("X must be N x C x ..., got " + ir::dims_to_string(x.dims()));
    const int64_t N = x.dims()[0], C = x.dims()[1], spatial = C > 0 && N > 0 ? x.size() / (N * C) : 0;
    const int64_t count = per_channel_ ? C : C * spatial;
    Tensor xf = norm_as_float(x, "BatchNormalization", "X");
    Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
    std::vector<float> a, b;
    if (training_) {
      train(ctx, xf.values<float>().data(), N, C, spatial, in, out, a, b);
    } else if (!folded_) {
      fold(*in[1], *in[2], *in[3], *in[4], a, b);
    }
    const std::vector<float>& scale = folded_ ? a_ : a;
    const std::vector<float>& shift = folded_ ? b_ : b;
    if (static_cast<int64_t>(scale.size()) != count)
      throw Error("scale, B, mean and var must have " + std::to_string(count) + " values for X " +
                  ir::dims_to_string(x.dims()) + ", got " + std::to_string(scale.size()));
    const float* xp = xf.values<float>().data();
    float* yp = yf.mutable_values<float>().data();
    parallel_for(ctx.threads, N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(spatial, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t c = plane % C;
        const float* xs = xp + plane * spatial;
        float* ys = yp + plane * spatial;
        if (per_channel_) {
          norm_scale_shift(xs, ys, spatial, scale[c], shift[c]);
        } else {
          const float* sa = scale.data() + c * spatial;
          const float* sb = shift.data() + c * spatial;
#pragma omp simd
          for (int64_t i = 0; i < spatial; ++i) ys[i] = xs[i] * sa[i] + sb[i];
        }
      }
    });
    out[0] = norm_output(yf, x.dtype());
  }

 private:
  // y = x * a + b with a = scale / sqrt(var + epsilon), b = B - mean * a.
  void fold(const Tensor& scale_t, const Tensor& bias_t, const Tensor& mean_t, const Tensor& var_t, std::vector<float>& a,
            std::vector<float>& b) const {
    std::vector<float> scale = norm_floats(scale_t, "BatchNormalization", "scale");
    std::vector<float> bias = norm_floats(bias_t, "BatchNormalization", "B");
    std::vector<float> mean = norm_floats(mean_t, "BatchNormalization", "mean");
    std::vector<float> var = norm_floats(var_t, "BatchNormalization", "var");
    if (bias.size() != scale.size() || mean.size() != scale.size() || var.size() != scale.size())
      throw Error("scale, B, mean and var must have the same size, got " + std::to_string(scale.size()) + ", " +
                  std::to_string(bias.size()) + ", " + std::to_string(mean.size()) + ", " + std::to_string(var.size()));
    a.resize(scale.size());
    b.resize(scale.size());
    for (size_t i = 0; i < scale.size(); ++i) {
      a[i] = static_cast<float>(scale[i] / std::sqrt(static_cast<double>(var[i]) + epsilon_));
      b[i] = bias[i] - mean[i] * a[i];
    }
  }

  // Training mode (opset 14+): normalise with the batch's own mean and (biased) variance and
  // give the running statistics blended by momentum.
  void train(const RunContext& ctx, const float* x, int64_t N, int64_t C, int64_t spatial, std::span<const Tensor* const> in,
             std::span<Tensor> out, std::vector<float>& a, std::vector<float>& b) const {
    std::vector<float> scale = norm_floats(*in[1], "BatchNormalization", "scale");
    std::vector<float> bias = norm_floats(*in[2], "BatchNormalization", "B");
    std::vector<float> run_mean = norm_floats(*in[3], "BatchNormalization", "input_mean");
    std::vector<float> run_var = norm_floats(*in[4], "BatchNormalization", "input_var");
    const size_t c_count = static_cast<size_t>(C);
    if (scale.size() != c_count || bias.size() != c_count || run_mean.size() != c_count || run_var.size() != c_count)
      throw Error("scale, B, input_mean and input_var must each have C = " + std::to_string(C) + " values");
    std::vector<double> mean(c_count), var(c_count);
    parallel_for(ctx.threads, C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double sum = 0;
        for (int64_t n = 0; n < N; ++n) {
          const float* xs = x + (n * C + c) * spatial;
#pragma omp simd reduction(+ : sum)
          for (int64_t i = 0; i < spatial; ++i) sum += xs[i];
        }
        const double count = static_cast<double>(N * spatial), m = count > 0 ? sum / count : 0;
        double sq = 0;
        for (int64_t n = 0; n < N; ++n) {
          const float* xs = x + (n * C + c) * spatial;
#pragma omp simd reduction(+ : sq)
          for (int64_t i = 0; i < spatial; ++i) sq += (xs[i] - m) * (xs[i] - m);
        }
        mean[c] = m;
        var[c] = count > 0 ? sq / count : 0;
      }
    });
    a.resize(c_count);
    b.resize(c_count);
    Tensor out_mean = Tensor::uninitialized(DataType::Float, {C}), out_var = Tensor::uninitialized(DataType::Float, {C});
    auto om = out_mean.mutable_values<float>();
    auto ov = out_var.mutable_values<float>();
    for (size_t c = 0; c < c_count; ++c) {
      a[c] = static_cast<float>(scale[c] / std::sqrt(var[c] + epsilon_));
      b[c] = static_cast<float>(bias[c] - mean[c] * a[c]);
      om[c] = static_cast<float>(run_mean[c] * momentum_ + mean[c] * (1.0 - momentum_));
      ov[c] = static_cast<float>(run_var[c] * momentum_ + var[c] * (1.0 - momentum_));
    }
    if (out.size() > 1) out[1] = norm_output(out_mean, in[3]->dtype());
    if (out.size() > 2) out[2] = norm_output(out_var, in[4]->dtype());
  }

  float epsilon_ = 1e-5f;
  float momentum_ = 0.9f;
  bool training_ = false;
  bool per_channel_ = true;
  bool folded_ = false;
  std::vector<float> a_, b_;
};

// ---- InstanceNormalization and GroupNormalization ----

// Normalises each of `blocks` contiguous blocks of `channels` x `spatial` values (block i is
// group i % groups_per_sample of its sample) by the block's own mean and variance, then scales
// and shifts per group or per channel. InstanceNormalization is the case of one channel a group.
void norm_groups(const RunContext& ctx, const float* x, float* y, int64_t blocks, int64_t groups_per_sample, int64_t channels,
                 int64_t spatial, float epsilon, const float* scale, const float* bias, bool per_group_affine) {
  const int64_t block = channels * spatial;
  parallel_for(ctx.threads, blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(block, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t g = i % groups_per_sample;
      const MeanVar mv = norm_mean_var(x + i * block, block);
      const double inv = 1.0 / std::sqrt(mv.var + epsilon);
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t param = per_group_affine ? g : g * channels + c;
        const float a = static_cast<float>(scale[param] * inv);
        const float b = static_cast<float>(bias[param] - mv.mean * scale[param] * inv);
        norm_scale_shift(x + i * block + c * spatial, y + i * block + c * spatial, spatial, a, b);
      }
    }
  });
}

class InstanceNormKernel : public Kernel {
 public:
  explicit InstanceNormKernel(const KernelInfo& info) : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error("input must be N x C x ..., got " + ir::dims_to_string(x.dims()));
    const int64_t N = x.dims()[0], C = x.dims()[1], spatial = N * C > 0 ? x.size() / (N * C) : 0;
    std::vector<float> scale = norm_floats(*in[1], "InstanceNormalization", "scale");
    std::vector<float> bias = norm_floats(*in[2], "InstanceNormalization", "B");
    if (static_cast<int64_t>(scale.size()) != C || static_cast<int64_t>(bias.size()) != C)
      throw Error("scale and B must have C = " + std::to_string(C) + " values, got " + std::to_string(scale.size()) + " and " +
                  std::to_string(bias.size()));
    Tensor xf = norm_as_float(x, "InstanceNormalization", "input");
    Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
    norm_groups(ctx, xf.values<float>().data(), yf.mutable_values<float>().data(), N * C, C, 1, spatial, epsilon_, scale.data(),
                bias.data(), true);
    out[0] = norm_output(yf, x.dtype());
  }

 private:
  float epsilon_;
};

class GroupNormKernel : public Kernel {
 public:
  explicit GroupNormKernel(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)),
        groups_(info.node.attr_int("num_groups", 0)),
        per_channel_affine_(info.opset >= 21) {
    if (groups_ < 1) throw Error("num_groups must be 1 or more, got " + std::to_string(groups_));
    const int64_t stash = info.node.attr_int("stash_type", 1);
    if (stash != 1) throw unsupported("stash_type " + std::to_string(stash) + " is not supported (only 1, float32)");
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error("X must be N x C x ..., got " + ir::dims_to_string(x.dims()));
    const int64_t N = x.dims()[0], C = x.dims()[1], spatial = N * C > 0 ? x.size() / (N * C) : 0;
    if (C % groups_ != 0)
      throw Error("num_groups " + std::to_string(groups_) + " does not divide the " + std::to_string(C) + " channels");
    std::vector<float> scale = norm_floats(*in[1], "GroupNormalization", "scale");
    std::vector<float> bias = norm_floats(*in[2], "GroupNormalization", "bias");
    // Opset 18 scales per group, opset 21 per channel.
    const int64_t params = per_channel_affine_ ? C : groups_;
    if (static_cast<int64_t>(scale.size()) != params || static_cast<int64_t>(bias.size()) != params)
      throw Error(std::string("scale and bias must have ") + (per_channel_affine_ ? "C = " : "num_groups = ") +
                  std::to_string(params) + " values, got " + std::to_string(scale.size()) + " and " + std::to_string(bias.size()));
    Tensor xf = norm_as_float(x, "GroupNormalization", "X");
    Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
    norm_groups(ctx, xf.values<float>().data(), yf.mutable_values<float>().data(), N * groups_, groups_, C / groups_, spatial,
                epsilon_, scale.data(), bias.data(), !per_channel_affine_);
    out[0] = norm_output(yf, x.dtype());
  }

 private:
  float epsilon_;
  int64_t groups_;
  bool per_channel_affine_;
};

// ---- LayerNormalization ----

// `v` of shape `v_dims` broadcast (NumPy rules, v the smaller side) to the shape `target`.
std::vector<float> norm_broadcast_to(const std::vector<float>& v, const std::vector<int64_t>& v_dims,
                                     const std::vector<int64_t>& target, const std::string& what) {
  const int64_t total = ir::element_count(target);
  if (static_cast<int64_t>(v.size()) == total) return v;  // same shape, or only leading 1s added
  const size_t rank = target.size(), lead = rank - std::min(rank, v_dims.size());
  bool fits = v_dims.size() <= rank;
  for (size_t i = lead; fits && i < rank; ++i) fits = v_dims[i - lead] == target[i] || v_dims[i - lead] == 1;
  if (!fits) throw Error(what + " of shape " + ir::dims_to_string(v_dims) + " does not broadcast to " + ir::dims_to_string(target));
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = rank; i-- > lead;) {
    const int64_t d = v_dims[i - lead];
    strides[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
  std::vector<float> out(static_cast<size_t>(total));
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat, src = 0;
    for (size_t i = rank; i-- > 0;) {
      src += (rest % target[i]) * strides[i];
      rest /= target[i];
    }
    out[flat] = v[src];
  }
  return out;
}

class LayerNormKernel : public Kernel {
 public:
  explicit LayerNormKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", -1)), epsilon_(info.node.attr_float("epsilon", 1e-5f)) {
    const int64_t stash = info.node.attr_int("stash_type", 1);
    // The stash type is the type of Mean and InvStdDev; the computation runs in float32 or better.
    if (stash != 1 && stash != 10 && stash != 11 && stash != 16)
      throw Error("stash_type " + std::to_string(stash) + " is not a float type (1, 10, 11 or 16)");
    stash_type_ = static_cast<DataType>(stash);
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const int64_t rank = static_cast<int64_t>(x.rank());
    const int64_t axis = normalize_axis(axis_, rank);
    const std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
    const int64_t inner = ir::element_count(norm_dims), outer = inner > 0 ? x.size() / inner : 0;
    const std::vector<float> scale =
        norm_broadcast_to(norm_floats(*in[1], "LayerNormalization", "Scale"), in[1]->dims(), norm_dims, "Scale");
    std::vector<float> bias;
    if (in.size() > 2 && in[2]) bias = norm_broadcast_to(norm_floats(*in[2], "LayerNormalization", "B"), in[2]->dims(), norm_dims, "B");
    Tensor xf = norm_as_float(x, "LayerNormalization", "X");
    Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
    std::vector<int64_t> stat_dims(x.dims().begin(), x.dims().begin() + axis);
    stat_dims.resize(static_cast<size_t>(rank), 1);
    Tensor mean_t = Tensor::uninitialized(DataType::Float, stat_dims), inv_t = Tensor::uninitialized(DataType::Float, stat_dims);
    const float* xp = xf.values<float>().data();
    float* yp = yf.mutable_values<float>().data();
    float* mp = mean_t.mutable_values<float>().data();
    float* ip = inv_t.mutable_values<float>().data();
    const float* sp = scale.data();
    const float* bp = bias.empty() ? nullptr : bias.data();
    parallel_for(ctx.threads, outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = xp + r * inner;
        float* yr = yp + r * inner;
        const MeanVar mv = norm_mean_var(xr, inner);
        const float mean = static_cast<float>(mv.mean), inv = static_cast<float>(1.0 / std::sqrt(mv.var + epsilon_));
        mp[r] = mean;
        ip[r] = inv;
        if (bp) {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) yr[i] = (xr[i] - mean) * inv * sp[i] + bp[i];
        } else {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) yr[i] = (xr[i] - mean) * inv * sp[i];
        }
      }
    });
    out[0] = norm_output(yf, x.dtype());
    if (out.size() > 1) out[1] = norm_output(mean_t, stash_type_);
    if (out.size() > 2) out[2] = norm_output(inv_t, stash_type_);
  }

 private:
  int64_t axis_;
  float epsilon_;
  DataType stash_type_ = DataType::Float;
};

// ---- MeanVarianceNormalization ----

// y = (x - mean) / (sqrt(var) + 1e-9), mean and variance over `axes` (the function body of
// the spec adds 1e-9 to the standard deviation).
class MeanVarianceNormKernel : public Kernel {
 public:
  explicit MeanVarianceNormKernel(const KernelInfo& info) : axes_(info.node.attr_ints("axes", {0, 2, 3})) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    (void)ctx;
    const Tensor& x = *in[0];
    const auto& dims = x.dims();
    const int64_t rank = static_cast<int64_t>(dims.size());
    std::vector<bool> reduced(static_cast<size_t>(rank), axes_.empty());
    for (int64_t a : axes_) {
      const int64_t axis = normalize_axis(a, rank, "axes value");
      if (reduced[axis] && !axes_.empty()) throw Error("axes " + ir::dims_to_string(axes_) + " name axis " + std::to_string(axis) + " twice");
      reduced[axis] = true;
    }
    // group_stride: the stride of each axis in the space of kept axes (0 for a reduced axis).
    std::vector<int64_t> group_stride(static_cast<size_t>(rank), 0);
    int64_t groups = 1;
    for (int64_t i = rank; i-- > 0;)
      if (!reduced[i]) {
        group_stride[i] = groups;
        groups *= dims[i];
      }
    const int64_t total = x.size(), per_group = groups > 0 ? total / groups : 0;
    Tensor xf = norm_as_float(x, "MeanVarianceNormalization", "input");
    Tensor yf = Tensor::uninitialized(DataType::Float, dims);
    const float* xp = xf.values<float>().data();
    float* yp = yf.mutable_values<float>().data();
    // Visits every element with its group, in memory order.
    auto for_each = [&](auto&& fn) {
      std::vector<int64_t> index(static_cast<size_t>(rank), 0);
      int64_t group = 0;
      for (int64_t flat = 0; flat < total; ++flat) {
        fn(flat, group);
        for (int64_t i = rank; i-- > 0;) {
          group += group_stride[i];
          if (++index[i] < dims[i]) break;
          group -= group_stride[i] * dims[i];
          index[i] = 0;
        }
      }
    };
    std::vector<double> mean(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
    for_each([&](int64_t i, int64_t g) { mean[g] += xp[i]; });
    for (double& m : mean) m /= static_cast<double>(std::max<int64_t>(per_group, 1));
    for_each([&](int64_t i, int64_t g) { sq[g] += (xp[i] - mean[g]) * (xp[i] - mean[g]); });
    for (double& s : sq) s = 1.0 / (std::sqrt(s / static_cast<double>(std::max<int64_t>(per_group, 1))) + 1e-9);
    for_each([&](int64_t i, int64_t g) { yp[i] = static_cast<float>((xp[i] - mean[g]) * sq[g]); });
    out[0] = norm_output(yf, x.dtype());
  }

 private:
  std::vector<int64_t> axes_;
};

// ---- LpNormalization ----

// y = x / ||x||_p along the axis (p 1 or 2); a zero vector stays zero.
class LpNormKernel : public Kernel {
 public:
  explicit LpNormKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", -1)), p_(info.node.attr_int("p", 2)) {
    if (p_ != 1 && p_ != 2) throw Error("p " + std::to_string(p_) + " is not 1 or 2");
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const int64_t rank = static_cast<int64_t>(x.rank());
    const int64_t axis = normalize_axis(axis_, rank);
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : i == axis ? n : inner) *= x.dims()[i];
    Tensor xf = norm_as_float(x, "LpNormalization", "input");
    Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
    const float* xp = xf.values<float>().data();
    float* yp = yf.mutable_values<float>().data();
    parallel_for(ctx.threads, outer * inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        const int64_t base = (s / inner) * n * inner + s % inner;
        double norm = 0;
        for (int64_t r = 0; r < n; ++r) {
          const double v = xp[base + r * inner];
          norm += p_ == 2 ? v * v : std::fabs(v);
        }
        if (p_ == 2) norm = std::sqrt(norm);
        const double scale = norm > 0 ? 1.0 / norm : 0.0;
        for (int64_t r = 0; r < n; ++r) yp[base + r * inner] = static_cast<float>(xp[base + r * inner] * scale);
      }
    });
    out[0] = norm_output(yf, x.dtype());
  }

 private:
  int64_t axis_;
  int64_t p_;
};

// ---- LRN ----

// y = x / (bias + alpha / size * sum of x^2 over the channels c - floor((size-1)/2) ..
// c + ceil((size-1)/2))^beta.
class LrnKernel : public Kernel {
 public:
  explicit LrnKernel(const KernelInfo& info)
      : size_(info.node.attr_int("size", 0)),
        alpha_(info.node.attr_float("alpha", 1e-4f)),
        beta_(info.node.attr_float("beta", 0.75f)),
        bias_(info.node.attr_float("bias", 1.0f)) {
    if (size_ < 1) throw Error("size must be 1 or more, got " + std::to_string(size_));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.rank() < 2) throw Error("X must be N x C x ..., got " + ir::dims_to_string(x.dims()));
    const int64_t N = x.dims()[0], C = x.dims()[1], spatial = N * C > 0 ? x.size() / (N * C) : 0;
    Tensor xf = norm_as_float(x, "LRN", "X");
    Tensor yf = Tensor::uninitialized(DataType::Float, x.dims());
    const float* xp = xf.values<float>().data();
    float* yp = yf.mutable_values<float>().data();
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    const float coeff = alpha_ / static_cast<float>(size_);
    parallel_for(ctx.threads, N * C, std::max<int64_t>(1, 4096 / std::max<int64_t>(spatial, 1)), [&](int64_t begin, int64_t end) {
      std::vector<float> acc(static_cast<size_t>(spatial));
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / C, c = plane % C;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = std::max<int64_t>(0, c - before); k <= std::min(C - 1, c + after); ++k) {
          const float* xs = xp + (n * C + k) * spatial;
#pragma omp simd
          for (int64_t i = 0; i < spatial; ++i) acc[i] += xs[i] * xs[i];
        }
        const float* xs = xp + plane * spatial;
        float* ys = yp + plane * spatial;
        for (int64_t i = 0; i < spatial; ++i) ys[i] = xs[i] / std::pow(bias_ + coeff * acc[i], beta_);
      }
    });
    out[0] = norm_output(yf, x.dtype());
  }

 private:
  int64_t size_;
  float alpha_, beta_, bias_;
};

}  // namespace

void register_norm_pool_kernels(KernelRegistry& r) {
  norm_pool_register_pooling(r);
  norm_pool_register_unpool(r);
  norm_pool_register_dpu_instance_norm(r);
  // BatchNormalization 6 to 8 may have spatial = 0; 14 adds training_mode, 15 mixed types.
  r.add("", "BatchNormalization", 6, kLatestOpset, kernel_factory<BatchNormKernel>());
  // InstanceNormalization-1 differs from 6 only in a legacy attribute (consumed_inputs).
  r.add("", "InstanceNormalization", 1, kLatestOpset, kernel_factory<InstanceNormKernel>());
  r.add("", "LayerNormalization", 17, kLatestOpset, kernel_factory<LayerNormKernel>());
  r.add("", "GroupNormalization", 18, kLatestOpset, kernel_factory<GroupNormKernel>());
  r.add("", "MeanVarianceNormalization", 9, kLatestOpset, kernel_factory<MeanVarianceNormKernel>());
  r.add("", "LpNormalization", 1, kLatestOpset, kernel_factory<LpNormKernel>());
  r.add("", "LRN", 1, kLatestOpset, kernel_factory<LrnKernel>());
}

}  // namespace onnxptq::engine
