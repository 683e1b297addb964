#include "finetune/layer_trainer.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "finetune/rounding.h"
#include "ir/tensor.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune {
namespace {

// Adam (Kingma and Ba, arXiv:1412.6980) with torch.optim.Adam's defaults: beta1 0.9, beta2 0.999,
// eps 1e-8, bias-corrected moments.
class Adam {
 public:
  Adam(size_t size, double learning_rate) : lr_(learning_rate), m_(size, 0.0), v_(size, 0.0) {}
  void step(std::vector<double>& params, const std::vector<double>& grad) {
    ++t_;
    const double c1 = 1 - std::pow(kBeta1, t_), c2 = 1 - std::pow(kBeta2, t_);
    for (size_t i = 0; i < params.size(); ++i) {
      m_[i] = kBeta1 * m_[i] + (1 - kBeta1) * grad[i];
      v_[i] = kBeta2 * v_[i] + (1 - kBeta2) * grad[i] * grad[i];
      params[i] -= lr_ * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + kEps);
    }
  }

 private:
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
  double lr_;
  std::vector<double> m_, v_;
  int t_ = 0;
};

// Samples `indices` concatenated along the batch dimension.
ir::Tensor concatenate(const std::vector<ir::Tensor>& samples, const std::vector<size_t>& indices) {
  std::vector<int64_t> dims = samples[indices[0]].dims();
  dims[0] = 0;
  for (size_t i : indices) dims[0] += samples[i].dims()[0];
  ir::Tensor out(ir::DataType::Float, dims);
  float* to = out.mutable_values<float>().data();
  for (size_t i : indices) {
    std::span<const float> v = samples[i].values<float>();
    to = std::copy(v.begin(), v.end(), to);
  }
  return out;
}

// L_rec of output `a` against `target` and, in `grad`, dL/da.
double reconstruction(const std::vector<int64_t>& dims, const float* a, const float* target, float* grad) {
  const int64_t n = ir::element_count(dims);
  const double positions = static_cast<double>(n) / static_cast<double>(dims.size() > 1 ? dims[1] : 1);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = static_cast<double>(a[i]) - target[i];
    sum += d * d;
    if (grad) grad[i] = static_cast<float>(2 * d / positions);
  }
  return sum / positions;
}

void check_samples(const LayerOp& op, const LayerSamples& s, bool need_float_inputs) {
  if (s.quantized_inputs.empty()) throw Error("finetune: no sample to train on");
  if (s.float_outputs.size() != s.quantized_inputs.size() ||
      (need_float_inputs && s.float_inputs.size() != s.quantized_inputs.size()))
    throw Error("finetune: the layer's samples differ in number (quantized inputs, float inputs, float outputs)");
  for (size_t i = 0; i < s.quantized_inputs.size(); ++i) {
    const ir::Tensor& x = s.quantized_inputs[i];
    if (x.dtype() != ir::DataType::Float || s.float_outputs[i].dtype() != ir::DataType::Float)
      throw Error("finetune: sample " + std::to_string(i) + " is not float");
    if (op.output_dims(x.dims()) != s.float_outputs[i].dims())
      throw Error("finetune: sample " + std::to_string(i) + ": the float output has dims " +
                  ir::dims_to_string(s.float_outputs[i].dims()) + ", the layer makes " +
                  ir::dims_to_string(op.output_dims(x.dims())));
    if (need_float_inputs && s.float_inputs[i].dims() != x.dims())
      throw Error("finetune: sample " + std::to_string(i) + ": the float input's dims differ from the quantized one's");
  }
}

}  // namespace

double reconstruction_loss(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                           const std::vector<float>& bias, const LayerSamples& samples) {
  // Summed over samples as one batch would: the positions of all of them.
  double sum = 0, positions = 0;
  for (size_t i = 0; i < samples.quantized_inputs.size(); ++i) {
    const ir::Tensor& x = samples.quantized_inputs[i];
    std::vector<int64_t> dims = op.output_dims(x.dims());
    std::vector<float> y(static_cast<size_t>(ir::element_count(dims)));
    op.forward(x.values<float>().data(), x.dims(), weight.data(), bias.empty() ? nullptr : bias.data(), y.data());
    activation_forward(activation, dims, y.data(), y.data());
    double p = static_cast<double>(y.size()) / static_cast<double>(dims.size() > 1 ? dims[1] : 1);
    sum += reconstruction(dims, y.data(), samples.float_outputs[i].values<float>().data(), nullptr) * p;
    positions += p;
  }
  return positions > 0 ? sum / positions : 0.0;
}

LayerResult train_layer(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                        const std::vector<int64_t>& weight_dims, const std::vector<float>& bias,
                        const WeightQuant& quant, const LayerSamples& samples, const TrainOptions& o) {
  const size_t n = weight.size();
  if (n != op.weight_size() || static_cast<int64_t>(n) != ir::element_count(weight_dims))
    throw Error("finetune: the weight holds " + std::to_string(n) + " values, the layer takes " +
                std::to_string(op.weight_size()));
  if (bias.size() != op.bias_size())
    throw Error("finetune: the bias holds " + std::to_string(bias.size()) + " values, the layer takes " +
                std::to_string(op.bias_size()));
  if (quant.scale.empty() || quant.scale.size() != quant.zero_point.size())
    throw Error("finetune: the weight's scales and zero points differ in number");
  if (o.iterations < 0 || o.batch_size == 0) throw Error("finetune: iterations and batch size must be positive");
  const bool mix = o.drop_ratio < 1;
  check_samples(op, samples, mix);

  // Each weight value's channel: its scale and zero point.
  std::vector<size_t> channel(n, 0);
  if (quant.scale.size() > 1) {
    if (quant.axis < 0 || quant.axis >= static_cast<int64_t>(weight_dims.size()) ||
        weight_dims[static_cast<size_t>(quant.axis)] != static_cast<int64_t>(quant.scale.size()))
      throw Error("finetune: " + std::to_string(quant.scale.size()) + " scales do not fit the weight's axis " +
                  std::to_string(quant.axis) + " of " + ir::dims_to_string(weight_dims));
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(quant.axis) + 1; d < weight_dims.size(); ++d) inner *= weight_dims[d];
    for (size_t i = 0; i < n; ++i)
      channel[i] = static_cast<size_t>((static_cast<int64_t>(i) / inner) % static_cast<int64_t>(quant.scale.size()));
  }
  const double qmin = static_cast<double>(quant.range.min), qmax = static_cast<double>(quant.range.max);
  auto scale = [&](size_t i) { return quant.scale[channel[i]]; };
  auto zero_point = [&](size_t i) { return static_cast<double>(quant.zero_point[channel[i]]); };
  // x / s in float, as QuantizeLinear divides.
  auto scaled = [&](double w, size_t i) { return static_cast<double>(static_cast<float>(w) / scale(i)); };
  auto nearest = [&](double w, size_t i) {
    return std::clamp(std::nearbyint(scaled(w, i)) + zero_point(i), qmin, qmax);
  };
  auto dequantized = [&](const std::vector<int64_t>& q) {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(static_cast<double>(q[i]) - zero_point(i)) * scale(i);
    return w;
  };

  LayerResult r;
  std::vector<int64_t> nearest_q(n);
  for (size_t i = 0; i < n; ++i) nearest_q[i] = static_cast<int64_t>(nearest(weight[i], i));
  r.loss_before = reconstruction_loss(op, activation, dequantized(nearest_q), bias, samples);
  const double lr = o.lr_adjust && r.loss_before > o.lr_adjust->first ? o.lr_adjust->second : o.learning_rate;

  // The trained parameters: alpha per weight value (AdaRound), or the weight then the bias (AdaQuant).
  const bool adaround = o.algorithm == Algorithm::AdaRound;
  const bool train_bias = !adaround && o.update_bias && !bias.empty();
  std::vector<double> floors(adaround ? n : 0), params;
  if (adaround) {
    params.resize(n);
    for (size_t i = 0; i < n; ++i) {
      double x = scaled(weight[i], i);
      floors[i] = std::floor(x);
      params[i] = initial_alpha(x - floors[i]);
    }
  } else {
    params.assign(weight.begin(), weight.end());
    if (train_bias) params.insert(params.end(), bias.begin(), bias.end());
  }
  Adam adam(params.size(), lr);
  std::vector<double> grad(params.size());
  std::vector<float> w_eff(n), b_eff = bias, dw(n), db(bias.size());
  std::vector<SoftRounding> soft(adaround ? n : 0);

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const size_t sample_count = samples.quantized_inputs.size();
  std::vector<size_t> order(sample_count);
  const int warm = adaround ? static_cast<int>(o.warm_start * o.iterations) : 0;
  const size_t window = o.window > 1 ? o.window : std::max<size_t>(1, static_cast<size_t>(o.iterations / 10));
  double best_window = INFINITY, window_sum = 0;
  size_t window_fill = 0;

  for (int it = 0; it < o.iterations; ++it) {
    // A mini-batch: the first batch_size of a fresh random permutation (torch.randperm).
    for (size_t i = 0; i < sample_count; ++i) order[i] = i;
    const size_t take = std::min(o.batch_size, sample_count);
    for (size_t i = 0; i < take; ++i) std::swap(order[i], order[i + rng() % (sample_count - i)]);
    std::vector<size_t> picked(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take));
    ir::Tensor x = concatenate(samples.quantized_inputs, picked);
    if (mix) {
      ir::Tensor f = concatenate(samples.float_inputs, picked);
      std::span<float> xs = x.mutable_values<float>();
      std::span<const float> fs = f.values<float>();
      for (size_t i = 0; i < xs.size(); ++i)
        if (!(uniform(rng) < o.drop_ratio)) xs[i] = fs[i];
    }
    ir::Tensor target = concatenate(samples.float_outputs, picked);

    // The weight the layer computes with.
    for (size_t i = 0; i < n; ++i) {
      double q;
      if (adaround) {
        soft[i] = soft_rounding(params[i]);
        q = std::clamp(floors[i] + soft[i].h + zero_point(i), qmin, qmax);
      } else {
        q = nearest(params[i], i);
      }
      w_eff[i] = static_cast<float>(q - zero_point(i)) * scale(i);
    }
    if (train_bias)
      for (size_t j = 0; j < bias.size(); ++j) b_eff[j] = static_cast<float>(params[n + j]);

    std::vector<int64_t> y_dims = op.output_dims(x.dims());
    std::vector<float> y(static_cast<size_t>(ir::element_count(y_dims))), a(y.size()), da(y.size());
    op.forward(x.values<float>().data(), x.dims(), w_eff.data(), b_eff.empty() ? nullptr : b_eff.data(), y.data());
    activation_forward(activation, y_dims, y.data(), a.data());
    double loss = reconstruction(y_dims, a.data(), target.values<float>().data(), da.data());
    activation_backward(activation, y_dims, y.data(), a.data(), da.data(), da.data());
    op.backward(x.values<float>().data(), x.dims(), w_eff.data(), da.data(), dw.data(),
                train_bias ? db.data() : nullptr);

    double monitored = loss;
    if (adaround) {
      const bool regularize = it >= warm;
      const double beta = annealed_beta(it, o.iterations, o.warm_start, o.beta_start, o.beta_end);
      double round_loss = 0;
      for (size_t i = 0; i < n; ++i) {
        const double h = soft[i].h, value = floors[i] + h + zero_point(i);
        // The clamp to [qmin, qmax] passes no gradient where it holds the value.
        double g = value > qmin && value < qmax ? static_cast<double>(dw[i]) * scale(i) : 0.0;
        if (regularize) {
          Regularizer r = rounding_regularizer_terms(h, beta);
          round_loss += r.value;
          g += o.reg_param * r.gradient;
        }
        grad[i] = g * soft[i].gradient;
      }
      monitored = o.reg_param * round_loss;
    } else {
      for (size_t i = 0; i < n; ++i) {
        double q = std::nearbyint(scaled(params[i], i)) + zero_point(i);
        grad[i] = q >= qmin && q <= qmax ? static_cast<double>(dw[i]) : 0.0;  // rounding passed straight through
      }
      for (size_t j = 0; train_bias && j < bias.size(); ++j) grad[n + j] = db[j];
    }
    adam.step(params, grad);
    r.iterations_run = it + 1;
    if (o.log_period > 0 && o.progress && r.iterations_run % o.log_period == 0) o.progress(r.iterations_run, loss);

    // Early stop (Quark's in-memory rule): after the warm start, the average monitored loss of
    // each window of iterations must beat the best so far.
    if (o.early_stop && it >= warm) {
      window_sum += monitored;
      if (++window_fill == window) {
        double average = window_sum / static_cast<double>(window);
        if (!(average < best_window)) break;
        best_window = average;
        window_sum = 0;
        window_fill = 0;
      }
    }
  }

  std::vector<int64_t> trained(n);
  for (size_t i = 0; i < n; ++i)
    trained[i] =
        static_cast<int64_t>(adaround ? std::clamp(floors[i] + (params[i] >= 0 ? 1.0 : 0.0) + zero_point(i), qmin, qmax)
                                      : nearest(params[i], i));
  std::vector<float> trained_bias = bias;
  if (train_bias)
    for (size_t j = 0; j < bias.size(); ++j) trained_bias[j] = static_cast<float>(params[n + j]);
  r.loss_after = reconstruction_loss(op, activation, dequantized(trained), trained_bias, samples);
  r.improved = r.loss_after < r.loss_before;
  r.quantized_weight = r.improved ? std::move(trained) : std::move(nearest_q);
  r.bias = r.improved ? std::move(trained_bias) : bias;
  return r;
}

}  // namespace onnxptq::finetune
