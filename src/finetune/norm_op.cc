// InstanceNormalization and LayerNormalization as trained layers, as the ONNX operator
// specification defines them: each "row" of x (InstanceNormalization: one sample's channel, its
// spatial values; LayerNormalization: one index of the dims before axis, the values of the dims
// from axis on) is standardized to xhat = (x - mean) / sqrt(var + epsilon), with the population
// variance, then y = scale * xhat + B. The scale and B are the trained weight and bias, so
//   dscale = sum of dy * xhat,  dB = sum of dy
// over the positions sharing each parameter. The statistics are accumulated in double.
// LayerNormalization's optional outputs Mean and InvStdDev are not produced: the trainer reads
// output 0 only, and neither depends on the scale or B.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "finetune/layer_op_detail.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune::detail {
namespace {

// A parallel region costs more than normalizing a few thousand values: fewer threads below.
constexpr int64_t kValuesPerThread = 16384;

struct RowStats {
  double mean = 0, inv_std = 0;
};

// Two passes (mean, then the mean square deviation): no cancellation, one fixed order.
RowStats row_stats(const float* x, int64_t length, double epsilon) {
  RowStats s;
  if (length == 0) return s;
  double sum = 0;
  for (int64_t i = 0; i < length; ++i) sum += x[i];
  s.mean = sum / static_cast<double>(length);
  double square = 0;
  for (int64_t i = 0; i < length; ++i) {
    const double d = x[i] - s.mean;
    square += d * d;
  }
  s.inv_std = 1.0 / std::sqrt(square / static_cast<double>(length) + epsilon);
  return s;
}

// The rows of an input: `count` rows of `length` values. InstanceNormalization's row r uses
// the parameters of channel r % channels; LayerNormalization's value j of a row the parameter
// j % period, the scale and B repeating along the row since their dims are a suffix of the row's.
struct Rows {
  int64_t count = 0, length = 0;
};

class NormOp : public LayerOp {
 public:
  NormOp(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size, int threads)
      : name_(node.name),
        op_type_(node.op_type),
        instance_(node.op_type == "InstanceNormalization"),
        scale_dims_(weight_dims),
        bias_size_(bias_size),
        threads_(threads > 0 ? threads : omp_get_num_procs()) {
    const float epsilon = node.attr_float("epsilon", 1e-5f);
    if (!std::isfinite(epsilon) || epsilon < 0) fail("epsilon must be a finite value of at least 0");
    epsilon_ = epsilon;
    weight_size_ = static_cast<size_t>(ir::checked_element_count(weight_dims, "the scale of node '" + name_ + "'"));
    const ir::Value* b = node.input(2);
    if (instance_) {
      // scale and B are 1-D of size C, and both are required (the ONNX operator specification).
      if (weight_dims.size() != 1)
        fail("the scale has dims " + ir::dims_to_string(weight_dims) + ", expected one value per channel [C]");
      channels_ = weight_dims[0];
      if (!b) fail("the node has no B, which InstanceNormalization requires");
      if (static_cast<int64_t>(bias_size) != channels_)
        fail("B holds " + std::to_string(bias_size) + " values (none: not a constant), the scale " +
             std::to_string(channels_));
      return;
    }
    axis_ = node.attr_int("axis", -1);
    if (axis_ == 0) fail("axis 0 normalizes across the batch, whose samples are trained as independent");
    if (node.attr_int("stash_type", 1) != 1)
      fail("stash_type " + std::to_string(node.attr_int("stash_type", 1)) +
           " is not computed (only 1, statistics in float)");
    if (!b) {
      if (bias_size != 0) fail("the node has no B, yet a bias of " + std::to_string(bias_size) + " values is given");
      return;
    }
    if (bias_size == 0) fail("B is not a constant: the node cannot be computed without its values");
    // The bias's dims decide how it broadcasts: its initializer's, or its type's.
    std::optional<std::vector<int64_t>> dims;
    if (b->has_initializer())
      dims = b->initializer().dims();
    else if (b->type.is_tensor())
      dims = b->type.static_shape();
    if (!dims) fail("the dims of B '" + b->name() + "' are not known");
    if (ir::checked_element_count(*dims, "B of node '" + name_ + "'") != static_cast<int64_t>(bias_size))
      fail("B '" + b->name() + "' has dims " + ir::dims_to_string(*dims) + " but " + std::to_string(bias_size) +
           " values are given");
    bias_dims_ = *dims;
  }

  std::vector<int64_t> output_dims(const std::vector<int64_t>& x) const override {
    rows_of(x);  // checks
    return x;
  }

  void forward(const float* x, const std::vector<int64_t>& x_dims, const float* w, const float* b,
               float* y) const override {
    const Rows rows = rows_of(x_dims);
    const bool with_bias = b && bias_size_ > 0;
    const int64_t weight_period = static_cast<int64_t>(weight_size_), bias_period = static_cast<int64_t>(bias_size_);
    const int threads = threads_for(rows.count * rows.length);
    // Each row on one thread, in one order: the same bits on any thread count.
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t r = 0; r < rows.count; ++r) {
      const float* xr = x + r * rows.length;
      float* yr = y + r * rows.length;
      const RowStats s = row_stats(xr, rows.length, epsilon_);
      // InstanceNormalization: the parameters of the row's channel; LayerNormalization: the
      // parameters repeat along the row.
      int64_t wi = instance_ ? r % channels_ : 0, bi = wi;
      for (int64_t j = 0; j < rows.length; ++j) {
        const double xhat = (xr[j] - s.mean) * s.inv_std;
        yr[j] = static_cast<float>(w[wi] * xhat + (with_bias ? b[bi] : 0.0));
        if (!instance_) {
          if (++wi == weight_period) wi = 0;
          if (++bi == bias_period) bi = 0;
        }
      }
    }
  }

  void backward(const float* x, const std::vector<int64_t>& x_dims, const float* w, const float* dy, float* dw,
                float* db) const override {
    const Rows rows = rows_of(x_dims);
    if (bias_size_ == 0) db = nullptr;
    if (!dw && !db) return;
    std::vector<RowStats> stats(static_cast<size_t>(rows.count));
    const int threads = threads_for(rows.count * rows.length);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t r = 0; r < rows.count; ++r)
      stats[static_cast<size_t>(r)] = row_stats(x + r * rows.length, rows.length, epsilon_);
    if (instance_) {
      // Channel c gathers rows c, c + C, ...: one channel a thread, its rows in order.
      const int64_t samples = channels_ > 0 ? rows.count / channels_ : 0;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
      for (int64_t c = 0; c < channels_; ++c) {
        double dscale = 0, dbias = 0;
        for (int64_t n = 0; n < samples; ++n) {
          const int64_t r = n * channels_ + c;
          const RowStats s = stats[static_cast<size_t>(r)];
          const float* xr = x + r * rows.length;
          const float* dyr = dy + r * rows.length;
          for (int64_t j = 0; j < rows.length; ++j) {
            dscale += dyr[j] * ((xr[j] - s.mean) * s.inv_std);
            dbias += dyr[j];
          }
        }
        if (dw) dw[c] = static_cast<float>(dscale);
        if (db) db[c] = static_cast<float>(dbias);
      }
      return;
    }
    if (dw) layer_gradient(x, rows, stats, dy, static_cast<int64_t>(weight_size_), true, threads, dw);
    if (db) layer_gradient(x, rows, stats, dy, static_cast<int64_t>(bias_size_), false, threads, db);
  }

  size_t weight_size() const override { return weight_size_; }
  size_t bias_size() const override { return bias_size_; }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("finetune: node '" + name_ + "' (" + op_type_ + "): " + why);
  }

  // LayerNormalization's gradient for a parameter of `period` values repeating along each row:
  // g[k] = sum over rows, then over j = k, k + period, ..., of dy (times xhat for the scale).
  // Each thread owns a range of k and sums in that order: the same bits on any thread count.
  void layer_gradient(const float* x, const Rows& rows, const std::vector<RowStats>& stats, const float* dy,
                      int64_t period, bool times_xhat, int threads, float* g) const {
    const int chunks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, period)));
    const int64_t repeats = period > 0 ? rows.length / period : 0;
#pragma omp parallel for num_threads(chunks) schedule(static, 1) if (chunks > 1)
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const int64_t begin = period * chunk / chunks, end = period * (chunk + 1) / chunks;
      std::vector<double> sum(static_cast<size_t>(end - begin), 0.0);
      for (int64_t r = 0; r < rows.count; ++r) {
        const RowStats s = stats[static_cast<size_t>(r)];
        for (int64_t q = 0; q < repeats; ++q) {
          const int64_t at = r * rows.length + q * period;
          for (int64_t k = begin; k < end; ++k) {
            const double d = dy[at + k];
            sum[static_cast<size_t>(k - begin)] += times_xhat ? d * ((x[at + k] - s.mean) * s.inv_std) : d;
          }
        }
      }
      for (int64_t k = begin; k < end; ++k) g[k] = static_cast<float>(sum[static_cast<size_t>(k - begin)]);
    }
  }

  int threads_for(int64_t values) const {
    return static_cast<int>(std::clamp<int64_t>(values / kValuesPerThread, 1, threads_));
  }

  // Checks x's dims against the node and its parameters, and splits them into rows.
  Rows rows_of(const std::vector<int64_t>& x) const {
    const int64_t total = ir::checked_element_count(x, "the input of node '" + name_ + "'");
    const int64_t rank = static_cast<int64_t>(x.size());
    Rows rows;
    if (instance_) {
      // [N, C, D1, ...]: at least one spatial dim to take the statistics over.
      if (rank < 3) fail("the input has dims " + ir::dims_to_string(x) + ", expected [N, C, D1, ...]");
      if (x[1] != channels_)
        fail("the input has " + std::to_string(x[1]) + " channels, the scale " + std::to_string(channels_));
      rows.count = x[0] * x[1];
    } else {
      if (axis_ < -rank || axis_ >= rank)
        fail("axis " + std::to_string(axis_) + " is out of range for the input's dims " + ir::dims_to_string(x));
      const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
      if (axis == 0)
        fail("axis " + std::to_string(axis_) + " normalizes across the batch (dims " + ir::dims_to_string(x) +
             "), whose samples are trained as independent");
      const std::vector<int64_t> normalized(x.begin() + axis, x.end());
      check_suffix("the scale", scale_dims_, normalized);
      if (bias_size_ > 0) check_suffix("B", bias_dims_, normalized);
      rows.count = 1;
      for (int64_t d = 0; d < axis; ++d) rows.count *= x[static_cast<size_t>(d)];
    }
    rows.length = rows.count > 0 ? total / rows.count : 0;
    return rows;
  }

  // A LayerNormalization parameter must broadcast to the normalized dims (ONNX's unidirectional
  // broadcasting) as their suffix: past leading 1s, its dims are the last ones of `normalized`.
  // Then it repeats along each row with the period of its size.
  void check_suffix(const std::string& what, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& normalized) const {
    size_t lead = 0;
    while (lead < dims.size() && dims[lead] == 1) ++lead;
    const size_t core = dims.size() - lead;
    const bool fits =
        dims.size() <= normalized.size() && std::equal(dims.begin() + static_cast<std::ptrdiff_t>(lead), dims.end(),
                                                       normalized.end() - static_cast<std::ptrdiff_t>(core));
    if (!fits)
      fail(what + " has dims " + ir::dims_to_string(dims) + ", which are not the normalized dims " +
           ir::dims_to_string(normalized) + " or a suffix of them");
  }

  std::string name_, op_type_;
  bool instance_;
  std::vector<int64_t> scale_dims_, bias_dims_;  // bias_dims_: LayerNormalization's
  size_t weight_size_ = 0, bias_size_;
  int threads_;
  double epsilon_ = 1e-5;
  int64_t channels_ = 0;  // InstanceNormalization
  int64_t axis_ = -1;     // LayerNormalization, as given
};

}  // namespace

std::unique_ptr<LayerOp> make_norm_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                      int threads) {
  return std::make_unique<NormOp>(node, weight_dims, bias_size, threads);
}

}  // namespace onnxptq::finetune::detail
