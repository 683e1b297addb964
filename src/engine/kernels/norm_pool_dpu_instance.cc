// com.amd.quark ExtendedInstanceNormalization: InstanceNormalization as the NPU computes it in
// bfloat16 (Quark's custom operator, written by ConvertInstanceNormToDPUVersion). The operator's
// documentation gives y = scale * (x - mean) / sqrt(variance + epsilon) + B "with bfloat16"; the
// order of operations and the roundings below are those of Quark's CPU kernel, which the NPU's
// results follow:
//   - x, scale and B are rounded to bfloat16 (to nearest, ties to even);
//   - per (n, c): sum and sum of squares accumulate in float32 in index order; mean = sum / n and
//     mean of squares likewise (a float32 multiply by the float32 1/n); the stored mean is mean
//     rounded to bfloat16, the variance = mean_sq - mean * mean evaluated by the NPU's split
//     multiply-subtract (msc32 below) from the unrounded mean;
//   - inv = bf16(powf(variance + epsilon, -0.5)); y = bf16(bf16(bf16(x) * inv) - bf16(mean * inv)),
//     then bf16(scale * y + B) with the multiply and add in float32.
#include <bit>
#include <cmath>

#include "engine/kernels/norm_pool.h"
#include "engine/kernels/quark_bfloat16.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

// Quark's rounding of x to bfloat16.
float bf16(float x) { return quark_round_to_bfloat16(x); }

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t u) { return std::bit_cast<float>(u); }

int exponent_of(float v) { return static_cast<int>((bits_of(v) >> 23) & 0xFFu); }

// v rounded to the accumulator grid of exponent m: adding and removing 2^(m-e) * |v|'s leading
// power drops the bits below the 24 kept at exponent m (the NPU's aligned-accumulator adds).
float align(float v, int m) {
  const int shift = m - exponent_of(v);
  const float x = float_of((bits_of(v) & 0xFF800000u) + (static_cast<uint32_t>(shift) << 23));
  return (v + x) - x;
}

float mac(float a, float b, float c) {  // c + a * b on the aligned accumulator
  const float d = a * b;
  const int m = std::max(exponent_of(a) + exponent_of(b) - 127, exponent_of(c));
  return align(c, m) + align(d, m);
}

float add_mac(float a, float b, float c, float d) {  // c + d + a * b on the aligned accumulator
  const float e = a * b;
  const int m = std::max({exponent_of(a) + exponent_of(b) - 127, exponent_of(c), exponent_of(d)});
  return align(c, m) + align(d, m) + align(e, m);
}

// c - a * b with a and -b split into three bfloat16 parts each and the nine products summed
// smallest first, as the NPU's float32 emulation on bfloat16 multipliers does.
float multiply_subtract(float a, float b, float c) {
  const float a0 = bf16(a), a1 = bf16(a - a0), a2 = bf16(a - a0 - a1);
  const float b0 = bf16(-b), b1 = bf16(-b - b0), b2 = bf16(-b - b0 - b1);
  float terms = a2 * b2;
  terms = mac(a2, b1, terms);
  terms = mac(a1, b2, terms);
  terms = mac(a0, b2, terms);
  terms = mac(a1, b1, terms);
  terms = mac(a2, b0, terms);
  terms = mac(a1, b0, terms);
  terms = mac(a0, b1, terms);
  return add_mac(a0, b0, terms, c);
}

class DpuInstanceNormKernel : public Kernel {
 public:
  explicit DpuInstanceNormKernel(const KernelInfo& info) : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.dtype() != DataType::Float)
      throw Error("ExtendedInstanceNormalization takes float32 tensors only, got " + norm_pool_type_name(x.dtype()));
    if (x.rank() < 2) throw Error("input must be N x C x ..., got " + ir::dims_to_string(x.dims()));
    const int64_t N = x.dims()[0], C = x.dims()[1], spatial = N * C > 0 ? x.size() / (N * C) : 0;
    std::vector<float> scale = bf16_params(*in[1], "scale", C), bias = bf16_params(*in[2], "B", C);
    const float* xs = x.values<float>().data();
    Tensor y = Tensor::uninitialized(DataType::Float, x.dims());
    float* ys = y.mutable_values<float>().data();
    const float inv_count = static_cast<float>(1.0 / static_cast<double>(spatial));
    parallel_for(ctx.threads, N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(spatial, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) {
                     const float* xi = xs + i * spatial;
                     float sum = 0, sum_sq = 0;
                     for (int64_t j = 0; j < spatial; ++j) {
                       const float v = bf16(xi[j]);
                       sum += v;
                       // The reference adds std::pow(v, 2), a double: the sum is rounded from double.
                       sum_sq = static_cast<float>(static_cast<double>(sum_sq) + static_cast<double>(v) * v);
                     }
                     const float mean = sum * inv_count;
                     const float variance = multiply_subtract(mean, mean, sum_sq * inv_count);
                     const float inv = bf16(std::pow(variance + epsilon_, -0.5f));
                     const float mean_scaled = bf16(bf16(mean) * inv);
                     const float g = scale[i % C], b = bias[i % C];
                     float* yi = ys + i * spatial;
                     for (int64_t j = 0; j < spatial; ++j) {
                       const float t = bf16(bf16(bf16(xi[j]) * inv) - mean_scaled);
                       yi[j] = bf16(g * t + b);
                     }
                   }
                 });
    out[0] = std::move(y);
  }

 private:
  static std::vector<float> bf16_params(const Tensor& t, const std::string& what, int64_t channels) {
    if (t.dtype() != DataType::Float)
      throw Error("ExtendedInstanceNormalization takes a float32 " + what + ", got " + norm_pool_type_name(t.dtype()));
    if (t.size() != channels)
      throw Error(what + " must have C = " + std::to_string(channels) + " values, got " + std::to_string(t.size()));
    std::vector<float> v;
    for (float f : t.values<float>()) v.push_back(bf16(f));
    return v;
  }

  float epsilon_;
};

}  // namespace

void norm_pool_register_dpu_instance_norm(KernelRegistry& r) {
  r.add("com.amd.quark", "ExtendedInstanceNormalization", 1, 1, kernel_factory<DpuInstanceNormKernel>());
}

}  // namespace onnxptq::engine
