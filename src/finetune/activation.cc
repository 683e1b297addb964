#include "finetune/activation.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/parallel.h"
#include "engine/vector_math.h"
#include "ir/tensor.h"

namespace onnxptq::finetune {
namespace {

// PRelu's slope for element i of y: one value, or one per channel (dim 1).
float prelu_slope(const Activation& act, const std::vector<int64_t>& dims, int64_t i) {
  if (act.slope.size() <= 1) return act.slope.empty() ? 0.0f : act.slope[0];
  int64_t inner = 1;
  for (size_t d = 2; d < dims.size(); ++d) inner *= dims[d];
  return act.slope[static_cast<size_t>((i / inner) % dims[1])];
}

// Softmax's rows: `outer` runs of `n` values `stride` apart.
struct Rows {
  int64_t outer, n, stride;
};
Rows softmax_rows(const std::vector<int64_t>& dims, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += rank;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= dims[static_cast<size_t>(d)];
  return {ir::element_count(dims) / std::max<int64_t>(dims[static_cast<size_t>(axis)], 1),
          dims[static_cast<size_t>(axis)], inner};
}
int64_t row_start(const Rows& r, int64_t row) { return (row / r.stride) * r.n * r.stride + row % r.stride; }

// The piecewise-linear activations as value(y) and slope(y, a), branch-free so that the loop
// calling them vectorises.
struct Linear {
  float value(float y) const { return y; }
  float slope(float, float) const { return 1.0f; }
};
struct Relu {
  float value(float y) const { return std::max(y, 0.0f); }
  float slope(float y, float) const { return engine::select_bits(y > 0, 1.0f, 0.0f); }
};
struct Leaky {
  float alpha;
  float value(float y) const { return engine::select_bits(y < 0, y * alpha, y); }
  float slope(float y, float) const { return engine::select_bits(y < 0, alpha, 1.0f); }
};
struct Clip {
  float min, max;
  float value(float y) const { return std::min(std::max(y, min), max); }
  float slope(float y, float) const { return engine::select_bits(y > min && y < max, 1.0f, 0.0f); }
};
// f, then the output's fake quantization: its rounding passed straight through.
template <class F>
struct Quantized {
  F f;
  OutputQuant q;
  float value(float y) const {
    return (std::min(std::max(std::nearbyint(f.value(y) / q.scale) + q.zero_point, q.min), q.max) - q.zero_point) *
           q.scale;
  }
  float slope(float y, float) const {
    const float a = f.value(y), level = std::nearbyint(a / q.scale) + q.zero_point;
    return engine::select_bits((level >= q.min) & (level <= q.max), f.slope(y, a), 0.0f);
  }
};

// Sum of (f(y) - t)^2 over n values, and dy = f'(y) k (f(y) - t) when kGradient. Summed in float
// over blocks of kBlock values (a vectorised reduction), the blocks' sums in double.
constexpr int64_t kBlock = 256;
template <bool kGradient, class F>
[[gnu::noinline]] double error_run(const F f, const float* y, const float* t, float k, float* dy, int64_t n) {
  double sum = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    float block = 0;
#pragma omp simd reduction(+ : block)
    for (int64_t i = b; i < e; ++i) {
      const float a = f.value(y[i]), d = a - t[i];
      block += d * d;
      if constexpr (kGradient) dy[i] = f.slope(y[i], a) * (k * d);
    }
    sum += block;
  }
  return sum;
}

constexpr int64_t kErrorChunk = 1 << 14;

template <class F>
double error_over(int threads, int64_t n, const F& f, const float* y, const float* t, float k, float* dy) {
  return engine::parallel_sum(threads, n, kErrorChunk, [&](int64_t b, int64_t e) {
    return dy ? error_run<true>(f, y + b, t + b, k, dy + b, e - b) : error_run<false>(f, y + b, t + b, k, dy, e - b);
  });
}

// error_over f, or f followed by the output's quantization.
template <class F>
double error_over(int threads, int64_t n, const F& f, const std::optional<OutputQuant>& output, const float* y,
                  const float* t, float k, float* dy) {
  return output ? error_over(threads, n, Quantized<F>{f, *output}, y, t, k, dy)
                : error_over(threads, n, f, y, t, k, dy);
}

constexpr double kSqrt2 = std::numbers::sqrt2;
constexpr double kSqrt2OverPi = 0.7978845608028654;

}  // namespace

void activation_forward(const Activation& act, const std::vector<int64_t>& dims, const float* y, float* a) {
  const int64_t n = ir::element_count(dims);
  using K = Activation::Kind;
  switch (act.kind) {
    case K::None:
      std::copy(y, y + n, a);
      return;
    case K::Relu:
      for (int64_t i = 0; i < n; ++i) a[i] = std::max(y[i], 0.0f);
      return;
    case K::PRelu:
      for (int64_t i = 0; i < n; ++i) a[i] = y[i] < 0 ? y[i] * prelu_slope(act, dims, i) : y[i];
      return;
    case K::LeakyRelu:
      for (int64_t i = 0; i < n; ++i) a[i] = y[i] < 0 ? y[i] * act.alpha : y[i];
      return;
    case K::Gelu:
      for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(0.5 * y[i] * (1 + std::erf(y[i] / kSqrt2)));
      return;
    case K::GeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        double x = y[i];
        a[i] = static_cast<float>(0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))));
      }
      return;
    case K::Tanh:
      for (int64_t i = 0; i < n; ++i) a[i] = std::tanh(y[i]);
      return;
    case K::Clip:
      for (int64_t i = 0; i < n; ++i) a[i] = std::min(std::max(y[i], act.min), act.max);
      return;
    case K::Sigmoid:
      for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(1 / (1 + std::exp(-static_cast<double>(y[i]))));
      return;
    case K::Softmax: {
      Rows r = softmax_rows(dims, act.axis);
      for (int64_t row = 0; row < r.outer; ++row) {
        const int64_t s = row_start(r, row);
        double top = -INFINITY, sum = 0;
        for (int64_t j = 0; j < r.n; ++j) top = std::max(top, static_cast<double>(y[s + j * r.stride]));
        for (int64_t j = 0; j < r.n; ++j) sum += std::exp(y[s + j * r.stride] - top);
        for (int64_t j = 0; j < r.n; ++j)
          a[s + j * r.stride] = static_cast<float>(std::exp(y[s + j * r.stride] - top) / sum);
      }
      return;
    }
  }
}

void activation_backward(const Activation& act, const std::vector<int64_t>& dims, const float* y, const float* a,
                         const float* da, float* dy) {
  const int64_t n = ir::element_count(dims);
  using K = Activation::Kind;
  switch (act.kind) {
    case K::None:
      std::copy(da, da + n, dy);
      return;
    case K::Relu:
      for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > 0 ? da[i] : 0.0f;
      return;
    case K::PRelu:
      for (int64_t i = 0; i < n; ++i) dy[i] = y[i] < 0 ? da[i] * prelu_slope(act, dims, i) : da[i];
      return;
    case K::LeakyRelu:
      for (int64_t i = 0; i < n; ++i) dy[i] = y[i] < 0 ? da[i] * act.alpha : da[i];
      return;
    case K::Gelu:
      for (int64_t i = 0; i < n; ++i) {
        double x = y[i];
        double cdf = 0.5 * (1 + std::erf(x / kSqrt2)), pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
        dy[i] = static_cast<float>(da[i] * (cdf + x * pdf));
      }
      return;
    case K::GeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        double x = y[i], u = kSqrt2OverPi * (x + 0.044715 * x * x * x), t = std::tanh(u);
        double du = kSqrt2OverPi * (1 + 3 * 0.044715 * x * x);
        dy[i] = static_cast<float>(da[i] * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du));
      }
      return;
    case K::Tanh:
      for (int64_t i = 0; i < n; ++i) dy[i] = da[i] * (1 - a[i] * a[i]);
      return;
    case K::Clip:
      // The gradient passes where the value was not clipped (at a bound: clipped).
      for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > act.min && y[i] < act.max ? da[i] : 0.0f;
      return;
    case K::Sigmoid:
      for (int64_t i = 0; i < n; ++i) dy[i] = da[i] * a[i] * (1 - a[i]);
      return;
    case K::Softmax: {
      // dy_j = a_j (da_j - sum_k da_k a_k) along the axis.
      Rows r = softmax_rows(dims, act.axis);
      for (int64_t row = 0; row < r.outer; ++row) {
        const int64_t s = row_start(r, row);
        double dot = 0;
        for (int64_t j = 0; j < r.n; ++j) dot += static_cast<double>(da[s + j * r.stride]) * a[s + j * r.stride];
        for (int64_t j = 0; j < r.n; ++j)
          dy[s + j * r.stride] = static_cast<float>(a[s + j * r.stride] * (da[s + j * r.stride] - dot));
      }
      return;
    }
  }
}

}  // namespace onnxptq::finetune

namespace onnxptq::finetune {

double activation_error(const Activation& act, const std::vector<int64_t>& dims, const float* y, const float* target,
                        float grad_scale, float* dy, int threads) {
  const int64_t n = ir::element_count(dims);
  using K = Activation::Kind;
  switch (act.kind) {
    case K::None:
      return error_over(threads, n, Linear{}, act.output, y, target, grad_scale, dy);
    case K::Relu:
      return error_over(threads, n, Relu{}, act.output, y, target, grad_scale, dy);
    case K::LeakyRelu:
      return error_over(threads, n, Leaky{act.alpha}, act.output, y, target, grad_scale, dy);
    case K::Clip:
      return error_over(threads, n, Clip{act.min, act.max}, act.output, y, target, grad_scale, dy);
    case K::PRelu: {
      if (act.slope.size() <= 1)
        return error_over(threads, n, Leaky{act.slope.empty() ? 0.0f : act.slope[0]}, act.output, y, target, grad_scale,
                          dy);
      // One slope per channel: a run of `inner` values at a time.
      int64_t inner = 1;
      for (size_t d = 2; d < dims.size(); ++d) inner *= dims[d];
      double sum = 0;
      for (int64_t b = 0; b < n; b += inner) {
        Leaky f{act.slope[static_cast<size_t>((b / inner) % dims[1])]};
        sum += error_over(threads, inner, f, act.output, y + b, target + b, grad_scale, dy ? dy + b : nullptr);
      }
      return sum;
    }
    case K::Gelu:
    case K::GeluTanh:
    case K::Tanh:
    case K::Sigmoid:
    case K::Softmax: {
      // Forward, the error, backward: three passes, as these evaluate in double.
      std::vector<float> a(static_cast<size_t>(n)), d(static_cast<size_t>(n));
      activation_forward(act, dims, y, a.data());
      const Quantized<Linear> quantized{{}, act.output.value_or(OutputQuant{})};
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float ai = a[static_cast<size_t>(i)];
        const float diff = (act.output ? quantized.value(ai) : ai) - target[i];
        sum += static_cast<double>(diff) * diff;
        d[static_cast<size_t>(i)] = grad_scale * diff * (act.output ? quantized.slope(ai, ai) : 1.0f);
      }
      if (dy) activation_backward(act, dims, y, a.data(), d.data(), dy);
      return sum;
    }
  }
  return 0;
}

}  // namespace onnxptq::finetune
