// The GPTQ algorithm on one weight (Frantar, Ashkboos, Hoefler, Alistarh, "GPTQ: Accurate
// Post-Training Quantization for Generative Pre-trained Transformers", ICLR 2023,
// arXiv:2210.17323, Algorithm 1), on a grid of scales and zero points fixed beforehand: the
// quantizer's. A weight W [K, N] multiplies its input X [rows, K] (MatMul's B); the Hessian of
// the layer's squared output error is H = 2/n X^T X (n rows). GPTQ rounds W's rows (input
// channels) one at a time, in order or by descending diag(H) (act order), and moves the error
// of each onto the rows not rounded yet, weighted by the upper Cholesky factor of H^-1; rows go
// in blocks, the rows after a block updated once per block (the paper's lazy batch updates).
//
// The O(K^3) and O(K^2 N) parts go through oneDNN's sgemm; the small diagonal blocks of the
// factorizations are computed in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnxptq::finetune {

// H = 2/n X^T X over rows added in any number of calls (memory K x K, whatever the row count):
// float products by sgemm, summed in double.
class GptqHessian {
 public:
  GptqHessian(int64_t k, int threads = 0);
  // `rows` rows of K values (row-major).
  void add(const float* x, int64_t rows);
  int64_t k() const { return k_; }
  int64_t rows() const { return rows_; }
  // 2/n X^T X, K x K row-major (all zeros before any row).
  std::vector<double> matrix();

 private:
  void flush();

  int64_t k_;
  int threads_;
  int64_t rows_ = 0, pending_rows_ = 0;
  std::vector<float> pending_;  // rows buffered before one product
  std::vector<double> sum_;     // lower triangle of X^T X so far
  std::vector<float> product_;
};

// The grid a weight is rounded to: code = clamp(round(w / scale) + zero_point, qmin, qmax),
// value = (code - zero_point) * scale.
struct GptqGrid {
  enum class Layout {
    PerTensor,    // one scale
    PerColumn,    // one per output channel n (MatMul B's per-channel axis 1)
    PerRow,       // one per input channel k (axis 0)
    ColumnGroups  // MatMulNBits: one per group of group_size rows of a column, index n * ceil(K/G) + k / G
  };
  Layout layout = Layout::PerTensor;
  int64_t group_size = 0;
  std::vector<float> scale, zero_point;
  float qmin = -128, qmax = 127;
  // false: round half to even of w / scale, clamped before rounding (ONNX QuantizeLinear, and the
  // plan's weights, qmath/quantize.h); true: roundf(w * (1 / scale) + zero_point), then clamped
  // (ONNX Runtime's MLAS BlockwiseQuantizer, which MatMulNBits' DEFAULT algorithm uses).
  bool mlas_rounding = false;

  size_t param(int64_t k, int64_t n, int64_t rows) const;
  float code(float w, size_t p) const;
  float value(float code, size_t p) const { return (code - zero_point[p]) * scale[p]; }
};

struct GptqOptions {
  int64_t block_size = 128;  // rows per lazy batch update (GPTQParams BlockSize)
  double perc_damp = 0.01;   // lambda = perc_damp * mean(diag H) (PercDamp)
  bool act_order = false;    // rows by descending diag(H) (ActOrder)
  int threads = 0;           // 0: every hardware thread
};

struct GptqResult {
  std::vector<float> codes;  // K x N, the grid's integers
  // The layer's mean squared output error per element, (1/(n N)) ||X W - X Q||^2 = tr(E^T H E) / 2N,
  // with H undamped, over up to 512 evenly spaced output columns (all when N <= 512; column j
  // of m is j N / m): rounding to nearest on the same grid (by H E), and GPTQ's integers (from
  // the sum of its rows' errors, as the paper's Losses, less the damping's part).
  double error_nearest = 0, error_gptq = 0;
};

// GPTQ of `w` (K x N row-major) with the Hessian `h` (K x K, GptqHessian::matrix()).
GptqResult gptq_quantize(std::vector<double> h, const float* w, int64_t k, int64_t n, const GptqGrid& grid,
                         const GptqOptions& options);

// The upper Cholesky factor U of H^-1 (U^T U = H^-1), K x K row-major: with P the order
// reversal, H = V V^T for V = P chol(P H P) P upper, and U = V^-1. Blocks of `block` rows;
// error if H is not positive definite.
std::vector<float> gptq_inverse_cholesky_upper(const std::vector<double>& h, int64_t k, int64_t block = 128,
                                               int threads = 0);

}  // namespace onnxptq::finetune
