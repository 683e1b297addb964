// Training one layer, AdaRound or AdaQuant, as Quark for ONNX's fast finetune does it: the
// layer's output (after its activation) from quantized inputs is brought close to the float
// model's, with the weight's scales and zero points frozen.
//
// - Loss: L_rec = mean over the batch and the positions of the squared L2 norm over dim 1
//   (torch.norm(q - f, p="fro", dim=1) ** 2 .mean()).
// - AdaRound (Nagel et al. 2020): the weight is s (clamp(floor(w / s) + h(alpha) + zp, qmin,
//   qmax) - zp), Adam over alpha, plus lambda sum(1 - |2h - 1|^beta) after the warm start
//   (rounding.h); at the end each value rounds up where alpha >= 0.
// - AdaQuant: Adam over the float weight (and the bias with update_bias) through the weight's
//   fake quantization, rounding passed straight through, the clamp's gradient zero outside
//   [qmin, qmax].
// Mini-batches of batch_size samples are drawn at random (a seeded generator) from the samples
// given; with drop_ratio < 1 each input value is the quantized model's with that probability,
// else the float model's (Quark's DropRatio).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "finetune/activation.h"
#include "finetune/layer_op.h"
#include "finetune/sample_store.h"
#include "ir/tensor.h"
#include "qmath/quantize.h"

namespace onnxptq::finetune {

// BiasCorrection: no training; each output channel's bias moves by the mean error of the layer
// with its weight rounded to nearest (correct_bias below).
enum class Algorithm { AdaRound, AdaQuant, BiasCorrection };

// The weight's frozen quantization: q = clamp(rne(w / s) + zp, range), one scale and zero
// point, or one per channel along `axis`.
struct WeightQuant {
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
  int64_t axis = 0;
  qmath::QRange range;
  // A float16/bfloat16 weight (AdaQuant only; Quark's FP16_ADAQUANT, BF16_ADAQUANT): the cast's
  // fake quantization of n values of channel `channel` (0 per tensor), in place of rounding and
  // clamping to `range`. Its gradient passes straight through where the result is finite.
  std::function<void(const float* w, size_t n, size_t channel, float* out)> float_cast;
  // A block-format weight (QBFP, QMX; AdaQuant only: Quark's BFP16_ADAQUANT, MX*_ADAQUANT): the
  // fake quantization of the whole weight (its blocks run along an axis), in place of rounding
  // and clamping to `range`; one scale 1 and zero point 0 stand for the parameters it has not.
  // Its gradient passes straight through where the result is finite, as float_cast's.
  std::function<void(const float* w, float* out)> tensor_cast;
};

struct TrainOptions {
  Algorithm algorithm = Algorithm::AdaRound;
  int iterations = 1000;
  double learning_rate = 0.1;
  size_t batch_size = 1;
  bool early_stop = false;
  size_t window = 0;  // early stop's window of iterations (Quark's NumBatches when > 1; 0: iterations / 10)
  double reg_param = 0.01, beta_start = 20, beta_end = 2, warm_start = 0.2;
  double drop_ratio = 1.0;
  bool update_bias = false;  // AdaQuant
  // Quark's LRAdjust: when the loss before training exceeds `first`, the learning rate is `second`.
  std::optional<std::pair<double, double>> lr_adjust;
  uint64_t seed = 1705472343;
  int threads = 1;  // for the per-weight updates and the loss (the layer op has its own)
  // Every log_period iterations (0: never), progress(iteration, reconstruction loss of the batch).
  int log_period = 0;
  std::function<void(int, double)> progress;
};

// A layer's samples, one tensor each (the batch first; converted to float as read), in the same
// order: its input in the quantized model, in the float model (needed when drop_ratio < 1), and
// its output (after the activation) in the float model.
struct LayerSamples {
  SharedStore quantized_inputs;
  SharedStore float_inputs;
  SharedStore float_outputs;
};

struct LayerResult {
  std::vector<int64_t> quantized_weight;  // the integers written (as int64, each inside range)
  std::vector<float> float_weight;        // with a float_cast or tensor_cast: the float weight whose cast is written
  std::vector<float> bias;                // the bias (trained with AdaQuant's update_bias, else as given)
  double loss_before = 0;                 // L_rec over every sample, the weight rounded to nearest
  double loss_after = 0;                  // with the trained weight
  int iterations_run = 0;
  bool improved = false;  // loss_after < loss_before; when not, the result is the weight rounded to nearest (or cast)
};

// Trains `op` (with `activation` after it) on `samples` from the float `weight` and `bias` (may be
// empty) quantized by `quant`. Deterministic for a seed: the same result on every run.
LayerResult train_layer(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                        const std::vector<int64_t>& weight_dims, const std::vector<float>& bias,
                        const WeightQuant& quant, const LayerSamples& samples, const TrainOptions& options);

// Empirical bias correction (Nagel et al., "Data-Free Quantization Through Weight Equalization
// and Bias Correction", ICCV 2019, section 4.2; Finkelstein et al., "Fighting Quantization Bias
// With Bias", arXiv:1906.03193): with the weight quantized to nearest, the bias of each output
// channel (dim 1) moves by the mean over the samples and positions of the float model's output
// minus the layer's, so that the error the weight's rounding and the quantized input bring has
// no mean. Behind an activation the shift is measured after it (as Quark's BiasCorrection
// extends its subgraph through Relu and Clip) and taken again, `steps` times in all, since the
// activation bends it; the bias of the lowest L_rec is the result (`bias` itself when none is
// lower). Error when the bias is not one value per output channel.
LayerResult correct_bias(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                         const std::vector<int64_t>& weight_dims, const std::vector<float>& bias,
                         const WeightQuant& quant, const LayerSamples& samples, int steps, int threads);

// L_rec of `op` with `weight` (already quantized values, as floats) and `bias` over every sample.
double reconstruction_loss(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                           const std::vector<float>& bias, const LayerSamples& samples, int threads = 1);

}  // namespace onnxptq::finetune
