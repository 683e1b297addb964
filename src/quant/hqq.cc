// HQQ's proximal solver for a block's zero point (the paper's Algorithm 1 with the scale fixed,
// as its reference code and ONNX Runtime's quantizer run it).
#include "quant/hqq.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/parallel.h"
#include "onnxptq/error.h"

namespace onnxptq::quant {

namespace {

// The lp "shrinkage" operator, the proximal step of |x|^p with weight 1 / beta (p < 1).
double hqq_shrink(double x, double beta, double p) {
  const double a = std::fabs(x);
  if (a == 0.0) return 0.0;
  const double shrunk = a - std::pow(a, p - 1.0) / beta;
  return shrunk > 0.0 ? std::copysign(shrunk, x) : 0.0;
}

struct HqqBlock {
  double inverse_scale = 1, zero = 0;
};

// One block (rows of one column), solved alone.
HqqBlock hqq_solve_block(const std::vector<double>& w, double max_code, const HqqOptions& o) {
  const auto [lo_it, hi_it] = std::minmax_element(w.begin(), w.end());
  const double range = *hi_it - *lo_it;
  HqqBlock b;
  b.inverse_scale = range > 0.0 ? max_code / range : 1.0;
  const double s = b.inverse_scale;
  double z = std::nearbyint(-*lo_it * s);
  double best_error = std::numeric_limits<double>::infinity();
  double beta = o.beta;
  const double count = static_cast<double>(w.size());
  b.zero = z;
  for (int i = 0; i < o.iterations; ++i) {
    double error = 0, next = 0;
    for (double v : w) {
      const double q = std::clamp(std::nearbyint(v * s + z), 0.0, max_code);
      const double r = (q - z) / s;
      error += std::fabs(v - r);
      next += q - (v - hqq_shrink(v - r, beta, o.lp_norm)) * s;
    }
    error /= count;
    // Mean |error| is flat in z between code changes: a tie in exact arithmetic must stop it
    // whatever the rounding of the sums, so a fall counts from 1e-9 of the error.
    if (!(error < best_error * (1 - 1e-9))) break;
    best_error = error;
    b.zero = z;
    z = next / count;
    beta *= o.kappa;
  }
  return b;
}

}  // namespace

HqqWeight hqq_quantize(const ir::Tensor& w, int64_t bits, int64_t block_size, const HqqOptions& options) {
  if (w.dtype() != ir::DataType::Float || w.rank() != 2)
    throw Error("HQQ weights are float32 [K, N], got " + std::string(ir::data_type_name(w.dtype())) + " " +
                ir::dims_to_string(w.dims()));
  const int64_t k_rows = w.dims()[0], n_cols = w.dims()[1];
  const int64_t k_blocks = (k_rows + block_size - 1) / block_size;
  const double max_code = static_cast<double>((1 << bits) - 1);
  std::span<const float> x = w.values<float>();
  HqqWeight out;
  out.codes.resize(static_cast<size_t>(k_rows * n_cols));
  out.scales.resize(static_cast<size_t>(n_cols * k_blocks));
  out.zeros.resize(out.scales.size());
  // Blocks are independent: columns split over threads give the same result for any count.
  const int threads = options.threads > 0 ? options.threads : engine::hardware_threads();
  engine::parallel_for(threads, n_cols, 8, [&](int64_t first, int64_t last) {
    std::vector<double> block;
    for (int64_t n = first; n < last; ++n)
      for (int64_t j = 0; j < k_blocks; ++j) {
        const int64_t begin = j * block_size, end = std::min(k_rows, begin + block_size);
        block.clear();
        for (int64_t k = begin; k < end; ++k) block.push_back(x[k * n_cols + n]);
        const HqqBlock b = hqq_solve_block(block, max_code, options);
        const size_t p = static_cast<size_t>(n * k_blocks + j);
        out.scales[p] = static_cast<float>(1.0 / b.inverse_scale);
        out.zeros[p] = static_cast<float>(b.zero);
        for (int64_t k = begin; k < end; ++k)
          out.codes[static_cast<size_t>(k * n_cols + n)] = static_cast<uint8_t>(std::clamp(
              std::nearbyint(block[static_cast<size_t>(k - begin)] * b.inverse_scale + b.zero), 0.0, max_code));
      }
  });
  return out;
}

NBitsWeight hqq_nbits_weight(const ir::Tensor& w, int64_t bits, int64_t block_size, const HqqOptions& options) {
  HqqWeight h = hqq_quantize(w, bits, block_size, options);
  const double max_code = static_cast<double>((1 << bits) - 1);
  NBitsGrid grid;  // the padding codes: a zero weight past K quantizes to the rounded zero point
  grid.scales = h.scales;
  for (float z : h.zeros)
    grid.zero_codes.push_back(static_cast<uint8_t>(std::clamp(std::nearbyint(z), 0.0f, static_cast<float>(max_code))));
  NBitsWeight out = pack_nbits_weight(h.codes, w.dims()[0], w.dims()[1], grid, bits, block_size, true);
  out.zero_points = ir::Tensor::from_values<float>({static_cast<int64_t>(h.zeros.size())}, h.zeros);
  return out;
}

}  // namespace onnxptq::quant
