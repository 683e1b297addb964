// The activation a finetuned layer ends with: Quark for ONNX trains a target node together with
// the node after it when that is one of Relu, PRelu, LeakyRelu, Gelu, Tanh, Clip, Sigmoid or
// Softmax, so the loss is measured after it. Forward, and the gradient through it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace onnxptq::finetune {

// The output's quantization after the activation (Quark's OutputQDQ): the quantized model's
// (clamp(rne(a / scale) + zero_point, min, max) - zero_point) scale, its rounding passed straight
// through, no gradient where the clamp holds the value.
struct OutputQuant {
  float scale = 1, zero_point = 0, min = -128, max = 127;
};

struct Activation {
  enum class Kind { None, Relu, PRelu, LeakyRelu, Gelu, GeluTanh, Tanh, Clip, Sigmoid, Softmax };
  Kind kind = Kind::None;
  float alpha = 0.01f;                              // LeakyRelu
  float min = -3.4028235e38f, max = 3.4028235e38f;  // Clip
  std::vector<float> slope;                         // PRelu: one value, or one per channel (dim 1)
  int64_t axis = -1;                                // Softmax (opset 13: one axis)
  std::optional<OutputQuant> output;                // OutputQDQ: applied by activation_error only
};

// a = act(y) for y of `dims` (a may be y).
void activation_forward(const Activation& act, const std::vector<int64_t>& dims, const float* y, float* a);

// dy = da * act'(y), given y, a = act(y) and da, for y of `dims` (dy may be da).
void activation_backward(const Activation& act, const std::vector<int64_t>& dims, const float* y, const float* a,
                         const float* da, float* dy);

// The squared error of a = act(y) (then act.output's fake quantization, if any) against `target`,
// summed over y of `dims`, and with dy (may be null) dy = da/dy grad_scale (a - target): a loss's
// value and its gradient before the activation in one pass. On up to `threads` threads; the sum is the same for any
// thread count.
double activation_error(const Activation& act, const std::vector<int64_t>& dims, const float* y, const float* target,
                        float grad_scale, float* dy, int threads);

}  // namespace onnxptq::finetune
