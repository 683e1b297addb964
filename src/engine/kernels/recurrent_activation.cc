// The activation functions of LSTM, GRU and RNN (ONNX operator specification, "activations":
// Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
// Softsign, Softplus), each a loop the compiler vectorises (but Softplus's, through libm).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "engine/kernels/recurrent.h"
#include "engine/vector_math.h"
#include "onnxptq/error.h"

namespace onnxptq::engine::recurrent {
namespace {

struct ActivationName {
  const char* name;
  ActivationKind kind;
  bool takes_alpha, takes_beta;
  float alpha, beta;  // the defaults of the ONNX operator of that name
};

// ScaledTanh and Affine were ONNX operators (opset 1 to 9) with alpha and beta defaulting to 1 and
// 0 (Affine) and 1 and 1 (ScaledTanh, as ONNX Runtime takes it).
constexpr ActivationName kActivations[] = {
    {"relu", ActivationKind::Relu, false, false, 0, 0},
    {"tanh", ActivationKind::Tanh, false, false, 0, 0},
    {"sigmoid", ActivationKind::Sigmoid, false, false, 0, 0},
    {"affine", ActivationKind::Affine, true, true, 1.0f, 0.0f},
    {"leakyrelu", ActivationKind::LeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", ActivationKind::ThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", ActivationKind::ScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ActivationKind::HardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActivationKind::Elu, true, false, 1.0f, 0},
    {"softsign", ActivationKind::Softsign, false, false, 0, 0},
    {"softplus", ActivationKind::Softplus, false, false, 0, 0},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<Activation> read_activations(const ir::Node& node, const std::vector<std::string>& defaults,
                                         int64_t directions) {
  std::vector<std::string> names;
  if (const ir::Attribute* a = node.find_attribute("activations")) {
    names = a->strings;
    // One direction's list for both directions is taken as meant for each.
    if (directions == 2 && names.size() == defaults.size()) names.insert(names.end(), a->strings.begin(), a->strings.end());
    if (names.size() != defaults.size() * static_cast<size_t>(directions))
      throw Error("activations has " + std::to_string(a->strings.size()) + " names, expected " +
                  std::to_string(defaults.size() * directions) + " (" + std::to_string(defaults.size()) +
                  " per direction)");
  } else {
    for (int64_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  std::vector<float> alphas = node.attr_floats("activation_alpha", {});
  std::vector<float> betas = node.attr_floats("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActivationName* known = nullptr;
    for (const ActivationName& a : kActivations)
      if (lower(name) == a.name) known = &a;
    if (!known) throw Error("activations: unknown activation function \"" + name + "\"");
    Activation f{known->kind, known->alpha, known->beta};
    if (known->takes_alpha && next_alpha < alphas.size()) f.alpha = alphas[next_alpha++];
    if (known->takes_beta && next_beta < betas.size()) f.beta = betas[next_beta++];
    out.push_back(f);
  }
  return out;
}

void activate(const Activation& f, float* x, int64_t n) {
  const float alpha = f.alpha, beta = f.beta;
  switch (f.kind) {
    case ActivationKind::Relu:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
      return;
    case ActivationKind::Tanh:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = fast_tanh(x[i]);
      return;
    case ActivationKind::Sigmoid:
      sigmoid_values(x, x, n);
      return;
    case ActivationKind::Affine:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * x[i] + beta;
      return;
    case ActivationKind::LeakyRelu:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = select_bits(x[i] < 0.0f, alpha * x[i], x[i]);
      return;
    case ActivationKind::ThresholdedRelu:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = select_bits(x[i] > alpha, x[i], 0.0f);
      return;
    case ActivationKind::ScaledTanh:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * fast_tanh(beta * x[i]);
      return;
    case ActivationKind::HardSigmoid:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(0.0f, std::min(1.0f, alpha * x[i] + beta));
      return;
    case ActivationKind::Elu:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = select_bits(x[i] < 0.0f, alpha * (fast_exp(x[i]) - 1.0f), x[i]);
      return;
    case ActivationKind::Softsign:
      #pragma omp simd
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::fabs(x[i]));
      return;
    case ActivationKind::Softplus:
      // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): no overflow for large x.
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f) + std::log1p(std::exp(-std::fabs(x[i])));
      return;
  }
}

void clip(float threshold, float* x, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], -threshold), threshold);
}

}  // namespace onnxptq::engine::recurrent
