#include "finetune/layer_trainer.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <string>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "finetune/rounding.h"
#include "ir/tensor.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune {
namespace {

// Per-value loops over the weight run in chunks of this many values, vectorised and on the
// layer's threads; sums over them come out the same for any thread count.
constexpr int64_t kWeightChunk = 1 << 14;

// fn(begin, end) over [0, n) in chunks of kWeightChunk values on up to `threads` threads.
template <class F>
void for_each_chunk(int threads, size_t n, F&& fn) {
  engine::parallel_for(threads, static_cast<int64_t>(n), kWeightChunk, fn);
}

// Adam (Kingma and Ba, arXiv:1412.6980) with torch.optim.Adam's defaults: beta1 0.9, beta2 0.999,
// eps 1e-8, bias-corrected moments; in float, as PyTorch trains.
class Adam {
 public:
  Adam(size_t size, double learning_rate) : lr_(static_cast<float>(learning_rate)), m_(size, 0.0f), v_(size, 0.0f) {}
  void step(std::vector<float>& params, const std::vector<float>& grad, int threads) {
    ++t_;
    const float c1 = static_cast<float>(1 - std::pow(kBeta1, t_)), c2 = static_cast<float>(1 - std::pow(kBeta2, t_));
    for_each_chunk(threads, params.size(), [&](int64_t b, int64_t e) {
      update(e - b, lr_, c1, c2, grad.data() + b, m_.data() + b, v_.data() + b, params.data() + b);
    });
  }

 private:
  [[gnu::noinline]] static void update(int64_t n, float lr, float c1, float c2, const float* g, float* m, float* v,
                                       float* p) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      m[i] = kBeta1 * m[i] + (1 - kBeta1) * g[i];
      v[i] = kBeta2 * v[i] + (1 - kBeta2) * g[i] * g[i];
      p[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + kEps);
    }
  }

 private:
  static constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;
  float lr_;
  std::vector<float> m_, v_;
  int t_ = 0;
};

// The weight a layer computes with, w = s (clamp(q + zp, qmin, qmax) - zp), for n values: with
// AdaRound q = floor(w / s) + h(alpha), h and dh/dalpha kept for the gradient; with AdaQuant
// q = rne(w / s).
[[gnu::noinline]] void soft_rounded_weights(int64_t n, float qmin, float qmax, const float* floors, const float* alpha,
                                            const float* zero_point, const float* scale, float* h, float* dh,
                                            float* w) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const SoftRounding<float> soft = soft_rounding(alpha[i]);
    h[i] = soft.h;
    dh[i] = soft.gradient;
    w[i] = (std::min(std::max(floors[i] + soft.h + zero_point[i], qmin), qmax) - zero_point[i]) * scale[i];
  }
}
[[gnu::noinline]] void rounded_weights(int64_t n, float qmin, float qmax, const float* weight, const float* zero_point,
                                       const float* scale, float* w) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    w[i] = (std::min(std::max(std::nearbyint(weight[i] / scale[i]) + zero_point[i], qmin), qmax) - zero_point[i]) *
           scale[i];
}

// AdaQuant's gradient in the float weight, into g: dw passed straight through the rounding, none
// where the clamp holds the value.
[[gnu::noinline]] void straight_through_gradient(int64_t n, float qmin, float qmax, const float* weight,
                                                 const float* zero_point, const float* scale, const float* dw,
                                                 float* g) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(weight[i] / scale[i]) + zero_point[i];
    g[i] = engine::select_bits((q >= qmin) & (q <= qmax), dw[i], 0.0f);
  }
}

// The gradient through a float cast, passed straight through where the cast weight is finite.
[[gnu::noinline]] void cast_gradient(int64_t n, const float* cast, const float* dw, float* g) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) g[i] = engine::select_bits(std::abs(cast[i]) <= FLT_MAX, dw[i], 0.0f);
}

// AdaRound's gradient in alpha, into g, for n weight values: the reconstruction's, through the
// clamp to [qmin, qmax] (none where it holds the value) and the regularizer's, weighted by reg,
// times dh/dalpha. Returns the sum of the regularizer's terms.
[[gnu::noinline]] double adaround_gradient(int64_t n, float beta, float reg, float qmin, float qmax,
                                           const float* floors, const float* h, const float* dh,
                                           const float* zero_point, const float* scale, const float* dw, float* g) {
  float sum = 0;  // a chunk's terms, each in [0, 1]
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const float value = floors[i] + h[i] + zero_point[i];
    const Regularizer<float> term = rounding_regularizer_terms(h[i], beta);
    sum += term.value;
    g[i] = (engine::select_bits((value > qmin) & (value < qmax), dw[i] * scale[i], 0.0f) + reg * term.gradient) * dh[i];
  }
  return sum;
}

// Sample i of `store` as float (the values a layer computes on).
ir::Tensor float_sample(const SampleStore& store, size_t i) {
  ir::Tensor t = store.get(i);
  return t.dtype() == ir::DataType::Float ? t : engine::as_float32(t);
}

// Samples `indices` concatenated along the batch dimension into `out`; returns the batch's dims.
std::vector<int64_t> concatenate(const SampleStore& samples, const std::vector<size_t>& indices,
                                 std::vector<float>& out) {
  std::vector<int64_t> dims = samples.dims(indices[0]);
  dims[0] = 0;
  for (size_t i : indices) dims[0] += samples.dims(i)[0];
  out.resize(static_cast<size_t>(ir::element_count(dims)));
  float* to = out.data();
  for (size_t i : indices) {
    ir::Tensor t = float_sample(samples, i);
    std::span<const float> v = t.values<float>();
    to = std::copy(v.begin(), v.end(), to);
  }
  return dims;
}

// The positions L_rec averages over: every value but those along dim 1, whose squares it sums.
double positions(const std::vector<int64_t>& dims) {
  return static_cast<double>(ir::element_count(dims)) / static_cast<double>(dims.size() > 1 ? dims[1] : 1);
}

// A weight's frozen quantization value by value: each value's scale and zero point (its
// channel's, channels in runs of `inner` values), or the cast of a float16/bfloat16 or block weight.
struct WeightGrid {
  WeightGrid(const WeightQuant& quant, const std::vector<int64_t>& weight_dims, int threads)
      : quant(quant),
        n(static_cast<size_t>(ir::element_count(weight_dims))),
        inner(static_cast<int64_t>(n)),
        threads(threads),
        qmin(static_cast<float>(quant.range.min)),
        qmax(static_cast<float>(quant.range.max)),
        scale(n, quant.scale.at(0)),
        zero_point(n, static_cast<float>(quant.zero_point.at(0))) {
    if (quant.scale.size() == 1) return;
    if (quant.axis < 0 || quant.axis >= static_cast<int64_t>(weight_dims.size()) ||
        weight_dims[static_cast<size_t>(quant.axis)] != static_cast<int64_t>(quant.scale.size()))
      throw Error("finetune: " + std::to_string(quant.scale.size()) + " scales do not fit the weight's axis " +
                  std::to_string(quant.axis) + " of " + ir::dims_to_string(weight_dims));
    inner = 1;
    for (size_t d = static_cast<size_t>(quant.axis) + 1; d < weight_dims.size(); ++d) inner *= weight_dims[d];
    for (size_t i = 0; i < n; ++i) {
      size_t c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % static_cast<int64_t>(quant.scale.size()));
      scale[i] = quant.scale[c];
      zero_point[i] = static_cast<float>(quant.zero_point[c]);
    }
  }

  bool cast() const { return static_cast<bool>(quant.float_cast) || static_cast<bool>(quant.tensor_cast); }

  // rne(w / s) + zp of value i, unclamped: w / s in float, as QuantizeLinear divides.
  float unclamped(float w, int64_t i) const {
    return std::nearbyint(w / scale[static_cast<size_t>(i)]) + zero_point[static_cast<size_t>(i)];
  }

  std::vector<float> dequantized(const std::vector<int64_t>& q) const {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = (static_cast<float>(q[i]) - zero_point[i]) * scale[i];
    return w;
  }

  // The first n values of `w` through the cast: the whole weight (a block format), per tensor in
  // chunks, per channel run by run.
  void cast_weights(const std::vector<float>& w, std::vector<float>& out) const {
    if (quant.tensor_cast) {
      quant.tensor_cast(w.data(), out.data());
      return;
    }
    if (quant.scale.size() == 1) {
      for_each_chunk(threads, n, [&](int64_t b, int64_t e) {
        quant.float_cast(w.data() + b, static_cast<size_t>(e - b), 0, out.data() + b);
      });
      return;
    }
    const auto channels = static_cast<int64_t>(quant.scale.size());
    engine::parallel_for(threads, static_cast<int64_t>(n) / inner, std::max<int64_t>(1, kWeightChunk / inner),
                         [&](int64_t b, int64_t e) {
                           for (int64_t run = b; run < e; ++run)
                             quant.float_cast(w.data() + run * inner, static_cast<size_t>(inner),
                                              static_cast<size_t>(run % channels), out.data() + run * inner);
                         });
  }

  // `weight` rounded to nearest and clamped (its integers into q), or cast (q left empty).
  std::vector<float> nearest(const std::vector<float>& weight, std::vector<int64_t>& q) const {
    std::vector<float> w(n);
    if (cast()) {
      cast_weights(weight, w);
      return w;
    }
    q.resize(n);
    for (size_t i = 0; i < n; ++i)
      q[i] = static_cast<int64_t>(std::clamp(unclamped(weight[i], static_cast<int64_t>(i)), qmin, qmax));
    return dequantized(q);
  }

  const WeightQuant& quant;
  size_t n;
  int64_t inner;
  int threads;
  float qmin, qmax;
  std::vector<float> scale, zero_point;
};

void check_samples(const LayerOp& op, const LayerSamples& s, bool need_float_inputs) {
  if (!s.quantized_inputs || !s.float_outputs || s.quantized_inputs->size() == 0)
    throw Error("finetune: no sample to train on");
  const size_t n = s.quantized_inputs->size();
  if (s.float_outputs->size() != n || (need_float_inputs && (!s.float_inputs || s.float_inputs->size() != n)))
    throw Error("finetune: the layer's samples differ in number (quantized inputs, float inputs, float outputs)");
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t>& x = s.quantized_inputs->dims(i);
    if (op.output_dims(x) != s.float_outputs->dims(i))
      throw Error("finetune: sample " + std::to_string(i) + ": the float output has dims " +
                  ir::dims_to_string(s.float_outputs->dims(i)) + ", the layer makes " +
                  ir::dims_to_string(op.output_dims(x)));
    if (need_float_inputs && s.float_inputs->dims(i) != x)
      throw Error("finetune: sample " + std::to_string(i) + ": the float input's dims differ from the quantized one's");
  }
}

}  // namespace

double reconstruction_loss(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                           const std::vector<float>& bias, const LayerSamples& samples, int threads) {
  // Summed over samples as one batch would: the positions of all of them.
  double sum = 0, count = 0;
  std::vector<float> y;
  for (size_t i = 0; i < samples.quantized_inputs->size(); ++i) {
    const ir::Tensor x = float_sample(*samples.quantized_inputs, i), target = float_sample(*samples.float_outputs, i);
    std::vector<int64_t> dims = op.output_dims(x.dims());
    y.resize(static_cast<size_t>(ir::element_count(dims)));
    op.forward(x.values<float>().data(), x.dims(), weight.data(), bias.empty() ? nullptr : bias.data(), y.data());
    sum += activation_error(activation, dims, y.data(), target.values<float>().data(), 0.0f, nullptr, threads);
    count += positions(dims);
  }
  return count > 0 ? sum / count : 0.0;
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
  const bool cast = static_cast<bool>(quant.float_cast) || static_cast<bool>(quant.tensor_cast);
  if (cast && o.algorithm == Algorithm::AdaRound)
    throw Error(
        "finetune: AdaRound chooses between integers; a float16/bfloat16 or block-format weight trains with AdaQuant");
  const bool mix = o.drop_ratio < 1;
  check_samples(op, samples, mix);
  const int threads = std::max(1, o.threads);

  const WeightGrid grid(quant, weight_dims, threads);
  const float qmin = grid.qmin, qmax = grid.qmax;
  const float *s = grid.scale.data(), *zp = grid.zero_point.data();

  LayerResult r;
  std::vector<int64_t> nearest_q;
  const std::vector<float> nearest = grid.nearest(weight, nearest_q);
  r.loss_before = reconstruction_loss(op, activation, nearest, bias, samples, threads);
  const double lr = o.lr_adjust && r.loss_before > o.lr_adjust->first ? o.lr_adjust->second : o.learning_rate;

  // The trained parameters: alpha per weight value (AdaRound), or the weight then the bias (AdaQuant).
  const bool adaround = o.algorithm == Algorithm::AdaRound;
  const bool train_bias = !adaround && o.update_bias && !bias.empty();
  std::vector<float> floors(adaround ? n : 0), params;
  if (adaround) {
    params.resize(n);
    for (size_t i = 0; i < n; ++i) {
      float x = weight[i] / s[i];
      floors[i] = std::floor(x);
      params[i] = static_cast<float>(initial_alpha(x - floors[i]));
    }
  } else {
    params.assign(weight.begin(), weight.end());
    if (train_bias) params.insert(params.end(), bias.begin(), bias.end());
  }
  Adam adam(params.size(), lr);
  std::vector<float> grad(params.size()), w_eff(n), b_eff = bias, dw(n), db(bias.size());
  std::vector<float> h(adaround ? n : 0), dh(adaround ? n : 0);
  std::vector<float> x, mixed, target, y, dy;

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const size_t sample_count = samples.quantized_inputs->size();
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
    const std::vector<int64_t> x_dims = concatenate(*samples.quantized_inputs, picked, x);
    if (mix) {
      concatenate(*samples.float_inputs, picked, mixed);
      for (size_t i = 0; i < x.size(); ++i)
        if (!(uniform(rng) < o.drop_ratio)) x[i] = mixed[i];
    }
    concatenate(*samples.float_outputs, picked, target);

    // The weight the layer computes with.
    if (cast)
      grid.cast_weights(params, w_eff);
    else
      for_each_chunk(threads, n, [&](int64_t b, int64_t e) {
        if (adaround)
          soft_rounded_weights(e - b, qmin, qmax, floors.data() + b, params.data() + b, zp + b, s + b, h.data() + b,
                               dh.data() + b, w_eff.data() + b);
        else
          rounded_weights(e - b, qmin, qmax, params.data() + b, zp + b, s + b, w_eff.data() + b);
      });
    if (train_bias) std::copy(params.begin() + static_cast<std::ptrdiff_t>(n), params.end(), b_eff.begin());

    const std::vector<int64_t> y_dims = op.output_dims(x_dims);
    y.resize(static_cast<size_t>(ir::element_count(y_dims)));
    dy.resize(y.size());
    op.forward(x.data(), x_dims, w_eff.data(), b_eff.empty() ? nullptr : b_eff.data(), y.data());
    const double count = positions(y_dims);
    const double loss = activation_error(activation, y_dims, y.data(), target.data(), static_cast<float>(2 / count),
                                         dy.data(), threads) /
                        count;
    op.backward(x.data(), x_dims, w_eff.data(), dy.data(), dw.data(), train_bias ? db.data() : nullptr);

    double monitored = loss;
    float* g = grad.data();
    const float* dwv = dw.data();
    if (adaround) {
      // Before the warm start ends the regularizer is off: its weight is zero.
      const bool regularize = it >= warm;
      const float beta = static_cast<float>(annealed_beta(it, o.iterations, o.warm_start, o.beta_start, o.beta_end));
      const float reg = regularize ? static_cast<float>(o.reg_param) : 0.0f;
      const float *hv = h.data(), *dhv = dh.data(), *fl = floors.data();
      const double round_loss =
          engine::parallel_sum(threads, static_cast<int64_t>(n), kWeightChunk, [=](int64_t b, int64_t e) {
            return adaround_gradient(e - b, beta, reg, qmin, qmax, fl + b, hv + b, dhv + b, zp + b, s + b, dwv + b,
                                     g + b);
          });
      monitored = regularize ? o.reg_param * round_loss : 0.0;
    } else {
      for_each_chunk(threads, n, [&](int64_t b, int64_t e) {
        if (cast)
          cast_gradient(e - b, w_eff.data() + b, dwv + b, g + b);
        else
          straight_through_gradient(e - b, qmin, qmax, params.data() + b, zp + b, s + b, dwv + b, g + b);
      });
      if (train_bias) std::copy(db.begin(), db.end(), grad.begin() + static_cast<std::ptrdiff_t>(n));
    }
    adam.step(params, grad, threads);
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

  std::vector<int64_t> trained(cast ? 0 : n);
  std::vector<float> trained_weight(n);
  if (cast) {
    grid.cast_weights(params, trained_weight);
  } else {
    for (size_t i = 0; i < n; ++i) {
      const float q = adaround ? floors[i] + (params[i] >= 0 ? 1.0f : 0.0f) + zp[i]
                               : grid.unclamped(params[i], static_cast<int64_t>(i));
      trained[i] = static_cast<int64_t>(std::clamp(q, qmin, qmax));
    }
    trained_weight = grid.dequantized(trained);
  }
  std::vector<float> trained_bias = bias;
  if (train_bias) std::copy(params.begin() + static_cast<std::ptrdiff_t>(n), params.end(), trained_bias.begin());
  r.loss_after = reconstruction_loss(op, activation, trained_weight, trained_bias, samples, threads);
  r.improved = r.loss_after < r.loss_before;
  r.quantized_weight = r.improved ? std::move(trained) : std::move(nearest_q);
  if (cast)
    r.float_weight =
        r.improved ? std::vector<float>(params.begin(), params.begin() + static_cast<std::ptrdiff_t>(n)) : weight;
  r.bias = r.improved ? std::move(trained_bias) : bias;
  return r;
}

LayerResult correct_bias(const LayerOp& op, const Activation& activation, const std::vector<float>& weight,
                         const std::vector<int64_t>& weight_dims, const std::vector<float>& bias,
                         const WeightQuant& quant, const LayerSamples& samples, int steps, int threads) {
  check_samples(op, samples, false);
  if (bias.empty() || bias.size() != op.bias_size()) throw Error("bias correction: the layer has no bias to correct");
  if (steps < 1) throw Error("bias correction: at least one step");
  threads = std::max(1, threads);
  const WeightGrid grid(quant, weight_dims, threads);
  LayerResult r;
  const std::vector<float> w = grid.nearest(weight, r.quantized_weight);
  if (grid.cast()) r.float_weight = weight;
  const size_t channels = bias.size();

  // The samples in batches (concatenated along dim 0, as the trainer's mini-batches), so that each
  // forward has enough work for the threads: consecutive samples of the same dims, up to
  // kBatchElements input values.
  constexpr int64_t kBatchElements = int64_t{1} << 22;
  std::vector<std::vector<size_t>> batches;
  int64_t filled = 0;
  for (size_t i = 0; i < samples.quantized_inputs->size(); ++i) {
    const std::vector<int64_t>& d = samples.quantized_inputs->dims(i);
    const int64_t n = ir::element_count(d);
    const bool fits = !batches.empty() && filled + n <= kBatchElements &&
                      std::equal(d.begin() + 1, d.end(), samples.quantized_inputs->dims(batches.back()[0]).begin() + 1);
    if (!fits) {
      batches.emplace_back();
      filled = 0;
    }
    batches.back().push_back(i);
    filled += n;
  }

  // L_rec with bias b, and the mean of target - act(y) over each channel's values into `shift`.
  std::vector<float> x, target, y, a;
  auto measure = [&](const std::vector<float>& b, std::vector<double>& shift) {
    std::vector<double> sums(channels, 0.0);
    double loss = 0, count = 0, per_channel = 0;
    for (const std::vector<size_t>& batch : batches) {
      const std::vector<int64_t> x_dims = concatenate(*samples.quantized_inputs, batch, x);
      concatenate(*samples.float_outputs, batch, target);
      const std::vector<int64_t> dims = op.output_dims(x_dims);
      const size_t axis = op.bias_axis(dims);
      if (dims.size() < 2 || static_cast<size_t>(dims[axis]) != channels)
        throw Error("bias correction: the output " + ir::dims_to_string(dims) + " has not " + std::to_string(channels) +
                    " channels along dim " + std::to_string(axis) + ", one a bias value");
      y.resize(static_cast<size_t>(ir::element_count(dims)));
      a.resize(y.size());
      op.forward(x.data(), x_dims, w.data(), b.data(), y.data());
      const float* t = target.data();
      loss += activation_error(activation, dims, y.data(), t, 0.0f, nullptr, threads);
      count += positions(dims);
      activation_forward(activation, dims, y.data(), a.data());
      const auto inner = static_cast<size_t>(
          ir::element_count(std::vector<int64_t>(dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, dims.end())));
      for (size_t k = 0; k < y.size(); k += inner) {  // a run of `inner` values of one channel
        double run = 0;
        for (size_t j = k; j < k + inner; ++j) run += static_cast<double>(t[j]) - a[j];
        sums[(k / inner) % channels] += run;
      }
      per_channel += static_cast<double>(y.size() / channels);
    }
    for (size_t c = 0; c < channels; ++c) shift[c] = sums[c] / per_channel;
    return loss / count;
  };

  std::vector<float> b = bias;
  std::vector<double> shift(channels);
  r.loss_before = measure(b, shift);
  r.loss_after = r.loss_before;
  r.bias = bias;
  for (int step = 0; step < steps; ++step) {
    for (size_t c = 0; c < channels; ++c) b[c] = static_cast<float>(b[c] + shift[c]);
    const double loss = measure(b, shift);
    r.iterations_run = step + 1;
    if (loss < r.loss_after) {
      r.loss_after = loss;
      r.bias = b;
    }
  }
  r.improved = r.loss_after < r.loss_before;
  return r;
}

}  // namespace onnxptq::finetune
