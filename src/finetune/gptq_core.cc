// GPTQ's arithmetic (gptq_core.h): the Hessian, the inverse Cholesky factor, the rounding loop.
// Algorithm 1 of the paper (arXiv:2210.17323) and its reference code (github.com/IST-DASLab/gptq,
// gptq.py fasterquant): dead inputs, act order, damping, blocks with lazy batch updates.
#include "finetune/gptq_core.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/parallel.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune {
namespace {

// C = alpha * op(A) * op(B) + beta * C, row-major with leading dimensions.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) throw Error("GPTQ: oneDNN sgemm failed (status " + std::to_string(status) + ")");
}

int thread_count(int threads) { return threads > 0 ? threads : engine::hardware_threads(); }

// The lower Cholesky factor of the block at `a` (n x n, leading dimension lda), in place, in
// double; the upper part zeroed.
void cholesky_small(float* a, int64_t n, int64_t lda) {
  std::vector<double> l(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = a[i * lda + j];
      for (int64_t p = 0; p < j; ++p) s -= l[i * n + p] * l[j * n + p];
      if (i == j) {
        if (!(s > 0))
          throw Error("GPTQ: the damped Hessian is not positive definite (pivot " + std::to_string(s) +
                      "); raise PercDamp");
        l[i * n + i] = std::sqrt(s);
      } else {
        l[i * n + j] = s / l[j * n + j];
      }
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) a[i * lda + j] = static_cast<float>(l[i * n + j]);
}

// The inverse of the lower triangular block at `a` (n x n, leading dimension lda), in place, in double.
void invert_lower_small(float* a, int64_t n, int64_t lda) {
  std::vector<double> x(static_cast<size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    x[j * n + j] = 1.0 / a[j * lda + j];
    for (int64_t i = j + 1; i < n; ++i) {
      double s = 0;
      for (int64_t p = j; p < i; ++p) s += static_cast<double>(a[i * lda + p]) * x[p * n + j];
      x[i * n + j] = -s / a[i * lda + i];
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) a[i * lda + j] = static_cast<float>(x[i * n + j]);
}

// Right-looking blocked Cholesky: each diagonal block in double, the panel below it multiplied by
// the inverse of its factor, the trailing matrix updated, both by sgemm.
void cholesky_lower(float* a, int64_t n, int64_t nb) {
  std::vector<float> inverse, panel;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t b = std::min(nb, n - j0), m = n - j0 - b;
    float* diag = a + j0 * n + j0;
    cholesky_small(diag, b, n);
    if (m == 0) break;
    inverse.assign(static_cast<size_t>(b * b), 0.0f);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j <= i; ++j) inverse[i * b + j] = diag[i * n + j];
    invert_lower_small(inverse.data(), b, b);
    // L21 = A21 L11^-T.
    float* below = a + (j0 + b) * n + j0;
    panel.resize(static_cast<size_t>(m * b));
    for (int64_t i = 0; i < m; ++i) std::copy(below + i * n, below + i * n + b, panel.data() + i * b);
    sgemm(false, true, m, b, b, 1.0f, panel.data(), b, inverse.data(), b, 0.0f, below, n);
    // A22 -= L21 L21^T.
    sgemm(false, true, m, m, b, -1.0f, below, n, below, n, 1.0f, a + (j0 + b) * n + j0 + b, n);
  }
  for (int64_t i = 0; i < n; ++i) std::fill(a + i * n + i + 1, a + (i + 1) * n, 0.0f);
}

// The inverse of a lower triangular matrix (upper part zero) in place, by halves:
// [L11 0; L21 L22]^-1 = [X11 0; -X22 L21 X11 X22].
void invert_lower(float* a, int64_t n, int64_t lda, int64_t nb, std::vector<float>& scratch) {
  if (n <= nb) {
    invert_lower_small(a, n, lda);
    return;
  }
  const int64_t n1 = ((n / 2 + nb - 1) / nb) * nb, n2 = n - n1;
  float* l11 = a;
  float* l21 = a + n1 * lda;
  float* l22 = l21 + n1;
  invert_lower(l11, n1, lda, nb, scratch);
  invert_lower(l22, n2, lda, nb, scratch);
  std::vector<float> t(static_cast<size_t>(n2 * n1));
  sgemm(false, false, n2, n1, n1, 1.0f, l21, lda, l11, lda, 0.0f, t.data(), n1);
  sgemm(false, false, n2, n1, n2, -1.0f, l22, lda, t.data(), n1, 0.0f, l21, lda);
}

}  // namespace

GptqHessian::GptqHessian(int64_t k, int threads) : k_(k), threads_(thread_count(threads)) {
  if (k <= 0) throw Error("GPTQ: the weight has no input channel");
  sum_.assign(static_cast<size_t>(k * k), 0.0);
}

void GptqHessian::add(const float* x, int64_t rows) {
  if (rows <= 0) return;
  // Products over at least this many rows at once (sgemm is faster with a deep inner dimension).
  const int64_t cap = std::max<int64_t>(256, (int64_t{1} << 24) / k_);
  if (pending_rows_ + rows > cap) flush();
  pending_.insert(pending_.end(), x, x + rows * k_);
  pending_rows_ += rows;
  rows_ += rows;
  if (pending_rows_ >= cap) flush();
}

void GptqHessian::flush() {
  if (pending_rows_ == 0) return;
  product_.resize(static_cast<size_t>(k_ * k_));
  omp_set_num_threads(threads_);
  // The lower block triangle only, in panels of rows: X[:, p]^T X[:, 0:end of p].
  // Panels of 512 columns at least: thinner ones cost sgemm more than the products they save.
  const int64_t panel = std::max<int64_t>(512, (k_ + 15) / 16);
  const float* x = pending_.data();
  for (int64_t c0 = 0; c0 < k_; c0 += panel) {
    const int64_t c1 = std::min(k_, c0 + panel);
    sgemm(true, false, c1 - c0, c1, pending_rows_, 1.0f, x + c0, k_, x, k_, 0.0f, product_.data() + c0 * k_, k_);
  }
  engine::parallel_for(threads_, k_, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double* s = sum_.data() + i * k_;
      const float* p = product_.data() + i * k_;
      for (int64_t j = 0; j <= i; ++j) s[j] += p[j];
    }
  });
  pending_.clear();
  pending_rows_ = 0;
}

std::vector<double> GptqHessian::matrix() {
  flush();
  std::vector<double> h(static_cast<size_t>(k_ * k_), 0.0);
  if (rows_ == 0) return h;
  const double f = 2.0 / static_cast<double>(rows_);
  for (int64_t i = 0; i < k_; ++i)
    for (int64_t j = 0; j <= i; ++j) h[i * k_ + j] = h[j * k_ + i] = f * sum_[i * k_ + j];
  return h;
}

size_t GptqGrid::param(int64_t k, int64_t n, int64_t rows) const {
  switch (layout) {
    case Layout::PerTensor:
      return 0;
    case Layout::PerColumn:
      return static_cast<size_t>(n);
    case Layout::PerRow:
      return static_cast<size_t>(k);
    case Layout::ColumnGroups:
      return static_cast<size_t>(n * ((rows + group_size - 1) / group_size) + k / group_size);
  }
  return 0;
}

float GptqGrid::code(float w, size_t p) const {
  const float zp = zero_point[p];
  if (mlas_rounding) {
    const float reciprocal = scale[p] != 0.0f ? 1.0f / scale[p] : 0.0f;
    return std::clamp(std::roundf(w * reciprocal + zp), qmin, qmax);
  }
  float v = w / scale[p];
  const float lo = qmin - zp, hi = qmax - zp;
  v = v > lo ? v : lo;  // NaN -> lo, as qmath::quantize_scaled
  v = v < hi ? v : hi;
  return std::nearbyint(v) + zp;
}

std::vector<float> gptq_inverse_cholesky_upper(const std::vector<double>& h, int64_t k, int64_t block, int threads) {
  omp_set_num_threads(thread_count(threads));
  std::vector<float> a(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) a[i * k + j] = static_cast<float>(h[(k - 1 - i) * k + (k - 1 - j)]);
  cholesky_lower(a.data(), k, block);
  std::vector<float> scratch;
  invert_lower(a.data(), k, k, block, scratch);
  std::vector<float> u(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) u[i * k + j] = a[(k - 1 - i) * k + (k - 1 - j)];
  return u;
}

GptqResult gptq_quantize(std::vector<double> h, const float* w, int64_t k, int64_t n, const GptqGrid& grid,
                         const GptqOptions& o) {
  if (static_cast<int64_t>(h.size()) != k * k)
    throw Error("GPTQ: the Hessian has " + std::to_string(h.size()) + " values, the weight " + std::to_string(k) +
                " input channels");
  if (o.block_size <= 0) throw Error("GPTQ: BlockSize must be positive, got " + std::to_string(o.block_size));
  const int threads = thread_count(o.threads);
  GptqResult r;
  // The undamped Hessian, for the errors.
  std::vector<float> h_error(h.begin(), h.end());

  // Dead inputs (always 0 in the data): diag 1, their weight rows 0 (they change no output).
  std::vector<float> wp(static_cast<size_t>(k * n));
  std::vector<bool> dead(static_cast<size_t>(k), false);
  for (int64_t i = 0; i < k; ++i)
    if (h[i * k + i] == 0) {
      h[i * k + i] = 1;
      dead[i] = true;
    }
  // Act order: rows by descending diag(H), ties in row order.
  std::vector<int64_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  if (o.act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return h[a * k + a] > h[b * k + b]; });
  std::vector<double> hp(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) hp[i * k + j] = h[perm[i] * k + perm[j]];
    if (dead[perm[i]])
      std::fill(wp.begin() + i * n, wp.begin() + (i + 1) * n, 0.0f);
    else
      std::copy(w + perm[i] * n, w + (perm[i] + 1) * n, wp.begin() + i * n);
  }
  h.clear();
  h.shrink_to_fit();
  double mean = 0;
  for (int64_t i = 0; i < k; ++i) mean += hp[i * k + i];
  const double damp = o.perc_damp * mean / static_cast<double>(k);
  for (int64_t i = 0; i < k; ++i) hp[i * k + i] += damp;
  const std::vector<float> u = gptq_inverse_cholesky_upper(hp, k, 128, threads);
  hp.clear();
  hp.shrink_to_fit();

  std::vector<float> codes(static_cast<size_t>(k * n));
  std::vector<float> err(static_cast<size_t>(std::min(o.block_size, k) * n));
  std::vector<double> err_sum(static_cast<size_t>(n), 0.0);  // per column, sum of err^2
  omp_set_num_threads(threads);
  for (int64_t i1 = 0; i1 < k; i1 += o.block_size) {
    const int64_t i2 = std::min(k, i1 + o.block_size);
    // The columns are independent: each thread rounds the whole block for a range of them,
    // one parallel region a block.
    engine::parallel_for(threads, n, 64, [&](int64_t c0, int64_t c1) {
      for (int64_t i = i1; i < i2; ++i) {
        float* row = wp.data() + i * n;
        float* e = err.data() + (i - i1) * n;
        const float d = u[i * k + i];
        const int64_t original = perm[i];
        for (int64_t c = c0; c < c1; ++c) {
          const size_t p = grid.param(original, c, k);
          const float q = grid.code(row[c], p);
          codes[i * n + c] = q;
          e[c] = (row[c] - grid.value(q, p)) / d;
          err_sum[c] += static_cast<double>(e[c]) * e[c];
        }
        // The error onto the block's later rows: w_j -= Hinv_ij * err.
        for (int64_t j = i + 1; j < i2; ++j) {
          const float f = u[i * k + j];
          float* target = wp.data() + j * n;
          for (int64_t c = c0; c < c1; ++c) target[c] -= f * e[c];
        }
      }
    });
    // The lazy batch update of the rows after the block: W[i2:] -= U[i1:i2, i2:]^T Err.
    if (i2 < k)
      sgemm(true, false, k - i2, n, i2 - i1, -1.0f, u.data() + i1 * k + i2, k, err.data(), n, 1.0f, wp.data() + i2 * n,
            n);
  }
  r.codes.resize(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k; ++i)
    std::copy(codes.begin() + i * n, codes.begin() + (i + 1) * n, r.codes.begin() + perm[i] * n);

  // The errors on up to kErrorColumns evenly spaced columns (each column's error is its own:
  // e_c^T H e_c). GPTQ's: each row's rounding raises the damped loss (1/2) e^T (H + lambda I) e by
  // exactly err^2 / 2 (the paper's Losses; the rows left re-solved optimally after each step),
  // so the undamped one is (sum err^2 - lambda ||e||^2) / 2 (dead rows: e 0). Rounding to
  // nearest has no such sum: H E by sgemm.
  constexpr int64_t kErrorColumns = 512;
  const int64_t m = std::min(n, kErrorColumns);
  std::vector<float> e(static_cast<size_t>(k * m)), he(static_cast<size_t>(k * m));
  double err_squares = 0, gptq_squares = 0;
  for (int64_t j = 0; j < m; ++j) {
    const int64_t c = j * n / m;
    err_squares += err_sum[c];
    for (int64_t i = 0; i < k; ++i) {
      const size_t p = grid.param(i, c, k);
      const float v = w[i * n + c];
      e[i * m + j] = v - grid.value(grid.code(v, p), p);
      const double g = (dead[i] ? 0.0 : static_cast<double>(v)) - grid.value(r.codes[i * n + c], p);
      gptq_squares += g * g;
    }
  }
  sgemm(false, false, k, m, k, 1.0f, h_error.data(), k, e.data(), m, 0.0f, he.data(), m);
  double nearest = 0;
  for (int64_t i = 0; i < k; ++i) {
    double s = 0;
    for (int64_t j = 0; j < m; ++j) s += static_cast<double>(e[i * m + j]) * he[i * m + j];
    nearest += s;
  }
  r.error_nearest = nearest / (2.0 * static_cast<double>(m));
  r.error_gptq = std::max(0.0, err_squares - damp * gptq_squares) / (2.0 * static_cast<double>(m));
  return r;
}

}  // namespace onnxptq::finetune
