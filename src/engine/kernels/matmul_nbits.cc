// com.microsoft MatMulNBits (ONNX Runtime's contrib operator documentation): Y = A x W, W [K, N]
// the block-quantized B dequantized, W[k, n] = (q - zp) * scale of the block k / block_size of
// column n. B is uint8 [N, k_blocks, blob_size], each column's codes packed low bits first along
// K; scales [N * k_blocks] (or [N, k_blocks]); zero_points packed uint8 [N, ceil(k_blocks * bits
// / 8)] or unpacked in the scales' type, 2^(bits - 1) when omitted; bias [N] added last. The
// engine dequantizes the constant weights once, then runs its float GEMM.
#include <cmath>
#include <string>
#include <vector>

#include "engine/kernels/linear.h"

namespace onnxptq::engine::linear {
namespace {

std::string dims_text(const Tensor& t) { return ir::dims_to_string(t.dims()); }

class MatMulNBitsKernel : public Kernel {
 public:
  explicit MatMulNBitsKernel(const KernelInfo& info) {
    const ir::Node& n = info.node;
    k_ = n.attr_int("K", -1);
    n_ = n.attr_int("N", -1);
    const int64_t bits = n.attr_int("bits", 4);
    const int64_t block = n.attr_int("block_size", -1);
    if (k_ <= 0 || n_ <= 0) throw Error("attributes K and N are required and positive");
    if (bits != 2 && bits != 4 && bits != 8) throw Error("bits must be 2, 4 or 8, got " + std::to_string(bits));
    if (block < 16 || (block & (block - 1)) != 0)
      throw Error("block_size must be a power of 2 and at least 16, got " + std::to_string(block));
    if (info.has_input(4)) throw Error("g_idx (input 4) is not supported");
    const Tensor* b = info.constant(1);
    const Tensor* scales = info.constant(2);
    const Tensor* zp = info.constant(3);
    if (!b || !scales || (info.has_input(3) && !zp))
      throw Error("B, scales and zero_points must be constants (initializers)");
    const int64_t k_blocks = (k_ + block - 1) / block;
    const int64_t blob = block * bits / 8;
    if (b->dtype() != DataType::UInt8 || b->dims() != std::vector<int64_t>{n_, k_blocks, blob})
      throw Error("B must be uint8 [N, k_blocks, blob_size] = [" + std::to_string(n_) + ", " +
                  std::to_string(k_blocks) + ", " + std::to_string(blob) + "], got " +
                  std::string(ir::data_type_name(b->dtype())) + " " + dims_text(*b));
    if (!is_float_like(scales->dtype()) || scales->size() != n_ * k_blocks)
      throw Error("scales must be float with N * k_blocks = " + std::to_string(n_ * k_blocks) + " values, got " +
                  dims_text(*scales));
    Tensor s = as_float32(*scales);
    std::span<const float> sv = s.values<float>();
    // Zero points per block, as floats (exact: small integers or values of the scales' type).
    std::vector<float> zero(static_cast<size_t>(n_ * k_blocks), static_cast<float>(int64_t{1} << (bits - 1)));
    if (zp && zp->dtype() == DataType::UInt8) {
      const int64_t per_column = (k_blocks * bits + 7) / 8;
      if (zp->size() != n_ * per_column)
        throw Error("packed zero_points must have N * ceil(k_blocks * bits / 8) = " + std::to_string(n_ * per_column) +
                    " bytes, got " + dims_text(*zp));
      std::span<const uint8_t> zv = zp->values<uint8_t>();
      const int64_t per_byte = 8 / bits;
      for (int64_t c = 0; c < n_; ++c)
        for (int64_t j = 0; j < k_blocks; ++j) {
          const int code = (zv[c * per_column + j / per_byte] >> ((j % per_byte) * bits)) & ((1 << bits) - 1);
          zero[c * k_blocks + j] = static_cast<float>(code);
        }
    } else if (zp) {
      if (!is_float_like(zp->dtype()) || zp->size() != n_ * k_blocks)
        throw Error("zero_points must be packed uint8 or " + std::to_string(n_ * k_blocks) +
                    " values of the scales' type, got " + std::string(ir::data_type_name(zp->dtype())) + " " +
                    dims_text(*zp));
      Tensor z = as_float32(*zp);
      std::copy(z.values<float>().begin(), z.values<float>().end(), zero.begin());
    }
    // W [K, N] row-major, for the GEMM.
    weights_.assign(static_cast<size_t>(k_ * n_), 0.f);
    std::span<const uint8_t> q = b->values<uint8_t>();
    const int64_t per_byte = 8 / bits;
    for (int64_t c = 0; c < n_; ++c)
      for (int64_t k = 0; k < k_; ++k) {
        const int64_t j = k / block, within = k % block;
        const uint8_t byte = q[(c * k_blocks + j) * blob + within / per_byte];
        const int code = (byte >> ((within % per_byte) * bits)) & ((1 << bits) - 1);
        const size_t p = static_cast<size_t>(c * k_blocks + j);
        weights_[static_cast<size_t>(k * n_ + c)] = (static_cast<float>(code) - zero[p]) * sv[p];
      }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& a = *in[0];
    if (!is_float_like(a.dtype()))
      throw Error("A must be float, float16 or bfloat16, got " + std::string(ir::data_type_name(a.dtype())));
    if (a.rank() < 1 || a.dims().back() != k_)
      throw Error("A's last dimension must be K = " + std::to_string(k_) + ", got " + dims_text(a));
    std::vector<int64_t> y_dims = a.dims();
    y_dims.back() = n_;
    const int64_t rows = a.size() / k_;
    Tensor a32 = as_float32(a);
    Tensor y = Tensor::uninitialized(DataType::Float, y_dims);
    float* yv = y.mutable_values<float>().data();
    matmul_f32(matmul_threads(ctx.threads, rows * n_), a32.values<float>().data(), weights_.data(), yv, 1, rows, k_,
               n_);
    if (in.size() > 5 && in[5]) {
      Tensor bias = as_float32(*in[5]);
      if (bias.size() != n_)
        throw Error("bias must have N = " + std::to_string(n_) + " values, got " + dims_text(bias));
      std::span<const float> bv = bias.values<float>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n_; ++c) yv[r * n_ + c] += bv[c];
    }
    out[0] = float32_as(y, a.dtype());
  }

 private:
  int64_t k_ = 0, n_ = 0;
  std::vector<float> weights_;
};

}  // namespace

void register_matmul_nbits_kernels(KernelRegistry& r) {
  r.add("com.microsoft", "MatMulNBits", 1, 1, kernel_factory<MatMulNBitsKernel>());
}

}  // namespace onnxptq::engine::linear
