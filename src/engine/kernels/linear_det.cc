// Det (opsets 11 and later): the determinants of [*, M, M], by LU decomposition with partial
// pivoting in double (G. Golub and C. Van Loan, "Matrix Computations", section 3.4), one matrix
// per thread at a time.
#include <cmath>
#include <utility>
#include <vector>

#include "engine/kernels/linear.h"
#include "engine/parallel.h"

namespace onnxptq::engine::linear {
namespace {

// The determinant of the m x m matrix `a` (row-major), which it overwrites.
double determinant(double* a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; ++k) {
    int64_t pivot = k;
    for (int64_t r = k + 1; r < m; ++r)
      if (std::fabs(a[r * m + k]) > std::fabs(a[pivot * m + k])) pivot = r;
    const double p = a[pivot * m + k];
    if (p == 0) return 0.0;
    if (pivot != k) {
      for (int64_t c = 0; c < m; ++c) std::swap(a[k * m + c], a[pivot * m + c]);
      det = -det;
    }
    det *= p;
    for (int64_t r = k + 1; r < m; ++r) {
      const double f = a[r * m + k] / p;
      if (f == 0) continue;
      for (int64_t c = k + 1; c < m; ++c) a[r * m + c] -= f * a[k * m + c];
    }
  }
  return det;
}

class DetKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const std::vector<int64_t>& dims = x.dims();
    if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2])
      throw Error("input " + ir::dims_to_string(dims) + " must be [*, M, M]: square matrices");
    const DataType type = x.dtype();
    if (type != DataType::Float && type != DataType::Double && type != DataType::Float16 && type != DataType::BFloat16)
      throw Error("Det takes float tensors, got " + std::string(ir::data_type_name(type)));
    const int64_t m = dims.back();
    const std::vector<int64_t> out_dims(dims.begin(), dims.end() - 2);
    const int64_t count = ir::element_count(out_dims);
    std::vector<double> values(static_cast<size_t>(x.size()));
    if (type == DataType::Double) {
      auto v = x.values<double>();
      values.assign(v.begin(), v.end());
    } else {
      Tensor f = as_float32(x);
      auto v = f.values<float>();
      values.assign(v.begin(), v.end());
    }
    std::vector<double> result(static_cast<size_t>(count));
    parallel_for(ctx.threads, count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, m * m * m)),
                 [&](int64_t first, int64_t last) {
                   for (int64_t i = first; i < last; ++i) result[i] = determinant(values.data() + i * m * m, m);
                 });
    if (type == DataType::Double) {
      out[0] = Tensor::from_values<double>(out_dims, result);
      return;
    }
    Tensor f = Tensor::uninitialized(DataType::Float, out_dims);
    auto dst = f.mutable_values<float>();
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(result[i]);
    out[0] = float32_as(f, type);
  }
};

}  // namespace

void register_det_kernels(KernelRegistry& r) { r.add("", "Det", 11, kLatestOpset, kernel_factory<DetKernel>()); }

}  // namespace onnxptq::engine::linear
