// Gemm and MatMul as trained layers: y = alpha * x * op(B) + beta * C for Gemm (transA 0, C one
// value per output column or one value), y = x * B for MatMul with a 2-D B, x's leading dims
// being rows, plus the constant of the Add after it when bias correction gives one (a bias). The products go through
// oneDNN's row-major sgemm.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <string>

#include "finetune/layer_op_detail.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune::detail {
namespace {

// C = alpha * op(A) * op(B) + beta * C, all row-major.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c) {
  if (m == 0 || n == 0) return;
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, trans_a ? m : k, b,
                                    trans_b ? k : n, beta, c, n);
  if (status != dnnl_success) throw Error("finetune: oneDNN sgemm failed (status " + std::to_string(status) + ")");
}

class LinearOp : public LayerOp {
 public:
  LinearOp(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size, int threads)
      : name_(node.name), threads_(threads > 0 ? threads : omp_get_num_procs()) {
    auto fail = [&](const std::string& why) {
      throw Error("finetune: node '" + node.name + "' (" + node.op_type + "): " + why);
    };
    const bool gemm = node.op_type == "Gemm";
    if (weight_dims.size() != 2) fail("the weight must be 2-D");
    if (gemm) {
      if (node.attr_int("transA", 0) != 0) fail("transA 1 is not trained (the batch must be the rows of A)");
      trans_b_ = node.attr_int("transB", 0) != 0;
      alpha_ = node.attr_float("alpha", 1.0f);
      beta_ = node.attr_float("beta", 1.0f);
    }
    k_ = trans_b_ ? weight_dims[1] : weight_dims[0];
    n_ = trans_b_ ? weight_dims[0] : weight_dims[1];
    if (bias_size != 0 && bias_size != 1 && static_cast<int64_t>(bias_size) != n_)
      fail("the bias must hold one value or one per output column (" + std::to_string(n_) + "), it holds " +
           std::to_string(bias_size));
    gemm_ = gemm;
    weight_size_ = static_cast<size_t>(k_ * n_);
    bias_size_ = bias_size;
  }

  std::vector<int64_t> output_dims(const std::vector<int64_t>& x) const override {
    if (x.size() < 2 || (gemm_ && x.size() != 2))
      throw Error("finetune: node '" + name_ + "': the input has " + std::to_string(x.size()) + " dims, expected " +
                  (gemm_ ? "2" : "at least 2"));
    if (x.back() != k_)
      throw Error("finetune: node '" + name_ + "': the input's last dim is " + std::to_string(x.back()) +
                  ", the weight takes " + std::to_string(k_));
    std::vector<int64_t> y = x;
    y.back() = n_;
    return y;
  }

  void forward(const float* x, const std::vector<int64_t>& x_dims, const float* w, const float* b,
               float* y) const override {
    const int64_t m = rows(x_dims);
    float beta = 0;
    if (bias_size_ > 0 && b) {
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n_; ++j) y[r * n_ + j] = b[bias_size_ == 1 ? 0 : j];
      beta = beta_;
    }
    omp_set_num_threads(threads_);
    sgemm(false, trans_b_, m, n_, k_, alpha_, x, w, beta, y);
  }

  void backward(const float* x, const std::vector<int64_t>& x_dims, const float* w, const float* dy, float* dw,
                float* db) const override {
    const int64_t m = rows(x_dims);
    omp_set_num_threads(threads_);
    // dL/dB = alpha * x^T dy ([K, N]), or its transpose when the weight is [N, K].
    if (dw) {
      if (trans_b_)
        sgemm(true, false, n_, k_, m, alpha_, dy, x, 0.0f, dw);
      else
        sgemm(true, false, k_, n_, m, alpha_, x, dy, 0.0f, dw);
    }
    if (db && bias_size_ > 0) {
      // Summed in double, row by row: the same bits whatever the thread count.
      std::vector<double> sum(static_cast<size_t>(n_), 0.0);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n_; ++j) sum[static_cast<size_t>(j)] += dy[r * n_ + j];
      if (bias_size_ == 1) {
        double total = 0;
        for (double s : sum) total += s;
        db[0] = static_cast<float>(beta_ * total);
      } else {
        for (int64_t j = 0; j < n_; ++j) db[j] = static_cast<float>(beta_ * sum[static_cast<size_t>(j)]);
      }
    }
  }

  size_t weight_size() const override { return weight_size_; }
  size_t bias_size() const override { return bias_size_; }
  size_t bias_axis(const std::vector<int64_t>& y_dims) const override { return y_dims.size() - 1; }

 private:
  int64_t rows(const std::vector<int64_t>& x_dims) const {
    output_dims(x_dims);  // checks
    int64_t m = 1;
    for (size_t i = 0; i + 1 < x_dims.size(); ++i) m *= x_dims[i];
    return m;
  }

  std::string name_;
  int threads_;
  bool gemm_ = false, trans_b_ = false;
  float alpha_ = 1, beta_ = 1;
  int64_t k_ = 0, n_ = 0;
  size_t weight_size_ = 0, bias_size_ = 0;
};

}  // namespace

std::unique_ptr<LayerOp> make_linear_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                        int threads) {
  return std::make_unique<LinearOp>(node, weight_dims, bias_size, threads);
}

}  // namespace onnxptq::finetune::detail
