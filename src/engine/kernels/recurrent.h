// Private header of the recurrent family (LSTM, GRU, RNN): the activation functions the ONNX
// operator specification lets these ops name in their `activations` attribute, applied to a row
// of gate values at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/kernel.h"
#include "ir/graph.h"

namespace onnxptq::engine::recurrent {

enum class ActivationKind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
                            Softsign, Softplus };

struct Activation {
  ActivationKind kind = ActivationKind::Sigmoid;
  float alpha = 0;
  float beta = 0;
};

// The node's activations, `per_direction` of them for each of `directions` (the spec's order: all
// of the forward direction's, then the reverse's), `defaults` (one direction's) when the attribute
// is absent. activation_alpha and activation_beta are consumed in order by the functions that take
// them, as ONNX Runtime reads them; a function without its value gets the default of the ONNX
// operator of that name. Error naming the attribute for an unknown name or a wrong count.
std::vector<Activation> read_activations(const ir::Node& node, const std::vector<std::string>& defaults,
                                         int64_t directions);

// x[i] = f(x[i]) for i in [0, n).
void activate(const Activation& f, float* x, int64_t n);

// x[i] = min(max(x[i], -threshold), threshold): the spec's `clip`, applied to the input of activations.
void clip(float threshold, float* x, int64_t n);

// com.amd.quark ExtendedLSTM, Quark's quantized LSTM (recurrent_extended.cc).
void register_extended_lstm_kernel(KernelRegistry& r);

}  // namespace onnxptq::engine::recurrent
