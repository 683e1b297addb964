// AdaRound's soft rounding and its regularizer (Nagel et al., ICML 2020, arXiv:2004.10568, eqs.
// 21-24), with the constants and schedule Quark for ONNX trains with (AdaroundConstants: zeta 1.1,
// gamma -0.1; beta annealed from 20 to 2 by a cosine after a warm start of 20 % of the
// iterations, regularization weight 0.01).
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>

namespace onnxptq::finetune {

inline constexpr double kZeta = 1.1;
inline constexpr double kGamma = -0.1;

// The rectified sigmoid h(alpha) = clamp(sigmoid(alpha) (zeta - gamma) + gamma, 0, 1): the
// rounding offset, 0 (down) to 1 (up), added to floor(w / s); and dh/dalpha, zero where the clamp
// holds h at 0 or 1. Both from one exponential: the trainer needs them for every weight at every
// iteration.
struct SoftRounding {
  double h, gradient;
};
inline SoftRounding soft_rounding(double alpha) {
  double s = 1 / (1 + std::exp(-alpha));
  double h = s * (kZeta - kGamma) + kGamma;
  if (h <= 0) return {0, 0};
  if (h >= 1) return {1, 0};
  return {h, s * (1 - s) * (kZeta - kGamma)};
}
inline double rectified_sigmoid(double alpha) { return soft_rounding(alpha).h; }
inline double rectified_sigmoid_gradient(double alpha) { return soft_rounding(alpha).gradient; }

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
// derivative in h, -2 beta |2h - 1|^(beta - 1) sign(2h - 1), from one power.
struct Regularizer {
  double value, gradient;
};
inline Regularizer rounding_regularizer_terms(double h, double beta) {
  double u = 2 * h - 1, a = std::abs(u);
  if (a == 0) return {1, 0};
  double p = std::pow(a, beta - 1);
  return {1 - p * a, -2 * beta * p * (u > 0 ? 1 : -1)};
}
inline double rounding_regularizer(double h, double beta) { return rounding_regularizer_terms(h, beta).value; }
inline double rounding_regularizer_gradient(double h, double beta) {
  return rounding_regularizer_terms(h, beta).gradient;
}

}  // namespace onnxptq::finetune
