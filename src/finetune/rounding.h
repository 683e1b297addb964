// AdaRound's soft rounding and its regularizer (Nagel et al., ICML 2020, arXiv:2004.10568, eqs.
// 21-24), with the constants and schedule Quark for ONNX trains with (AdaroundConstants: zeta 1.1,
// gamma -0.1; beta annealed from 20 to 2 by a cosine after a warm start of 20 % of the
// iterations, regularization weight 0.01).
//
// In double (the reference) and in float, the trainer's: branch-free and with the engine's
// vectorisable exponential and logarithm, so that a loop over every weight vectorises.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#include "engine/vector_math.h"

namespace onnxptq::finetune {

inline constexpr double kZeta = 1.1;
inline constexpr double kGamma = -0.1;

namespace rounding_detail {
template <class T>
T exp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return engine::fast_exp(x);
  else
    return std::exp(x);
}
// ln x for x > 0 normal.
template <class T>
T log(T x) {
  if constexpr (std::is_same_v<T, float>)
    return engine::fast_log(x);
  else
    return std::log(x);
}
template <class T>
T select(bool c, T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return engine::select_bits(c, a, b);
  else
    return c ? a : b;
}
}  // namespace rounding_detail

// The rectified sigmoid h(alpha) = clamp(sigmoid(alpha) (zeta - gamma) + gamma, 0, 1): the
// rounding offset, 0 (down) to 1 (up), added to floor(w / s); and dh/dalpha, zero where the clamp
// holds h at 0 or 1. Both from one exponential: the trainer needs them for every weight at every
// iteration.
template <class T>
struct SoftRounding {
  T h, gradient;
};
template <class T>
[[gnu::always_inline]] inline SoftRounding<T> soft_rounding(T alpha) {
  const T s = 1 / (1 + rounding_detail::exp(-alpha));
  const T v = s * static_cast<T>(kZeta - kGamma) + static_cast<T>(kGamma);
  const T h = std::min(std::max(v, T(0)), T(1));
  return {h, rounding_detail::select(v > 0 && v < 1, s * (1 - s) * static_cast<T>(kZeta - kGamma), T(0))};
}
template <class T>
inline T rectified_sigmoid(T alpha) {
  return soft_rounding(alpha).h;
}
template <class T>
inline T rectified_sigmoid_gradient(T alpha) {
  return soft_rounding(alpha).gradient;
}

// The alpha whose h is `fraction` (w / s - floor(w / s), in [0, 1)): training starts from the
// float weight itself.
inline double initial_alpha(double fraction) { return -std::log((kZeta - kGamma) / (fraction - kGamma) - 1); }

// beta at `iteration` of `iterations` with warm start `warm_start` (a share): the cosine from
// beta_start to beta_end over the iterations after the warm start.
inline double annealed_beta(int iteration, int iterations, double warm_start, double beta_start, double beta_end) {
  double warm = warm_start * iterations;
  double rel = iterations > warm ? (iteration - warm) / (iterations - warm) : 1.0;
  rel = std::clamp(rel, 0.0, 1.0);
  return beta_end + 0.5 * (beta_start - beta_end) * (1 + std::cos(std::numbers::pi * rel));
}

// One term of the regularizer, 1 - |2h - 1|^beta (1 at h = 1/2, 0 at h = 0 or 1), and its
// derivative in h, -2 beta |2h - 1|^(beta - 1) sign(2h - 1), from one power: e^((beta - 1) ln a).
template <class T>
struct Regularizer {
  T value, gradient;
};
template <class T>
[[gnu::always_inline]] inline Regularizer<T> rounding_regularizer_terms(T h, T beta) {
  const T u = 2 * h - 1, a = std::abs(u);
  const T power = rounding_detail::exp((beta - 1) * rounding_detail::log(std::max(a, std::numeric_limits<T>::min())));
  const T p = rounding_detail::select(a > 0, power, T(0));  // at h = 1/2: value 1, gradient 0
  return {1 - p * a, -2 * beta * p * std::copysign(T(1), u)};
}
template <class T>
inline T rounding_regularizer(T h, T beta) {
  return rounding_regularizer_terms(h, beta).value;
}
template <class T>
inline T rounding_regularizer_gradient(T h, T beta) {
  return rounding_regularizer_terms(h, beta).gradient;
}

}  // namespace onnxptq::finetune
