// MatMulNBitsParams Algorithm "HQQ": Half-Quadratic Quantization (Badri & Shaji 2023, "Half-Quadratic
// Quantization of Large Machine Learning Models"), weight-only and data-free, as ONNX Runtime's
// HQQWeightOnlyQuantizer (matmul_4bits_quantizer.py) writes it for MatMulNBits: each block of a
// column keeps its min-max scale, and its zero point, a float, is what the solver optimises.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/tensor.h"
#include "quant/matmul_nbits.h"

namespace onnxptq::quant {

// The solver's settings (the paper's and ONNX Runtime's defaults): the lp-norm of the error's
// sparsity prior, the half-quadratic penalty beta and its growth kappa per iteration.
struct HqqOptions {
  double lp_norm = 0.7;
  double beta = 10.0;
  double kappa = 1.01;
  int iterations = 20;
  int threads = 0;  // columns solved at once; 0: every hardware thread
};

// HQQ of W [K, N] in blocks of `block_size` rows of a column (MatMulNBits' blocks), block index
// n * k_blocks + j. With s = (2^bits - 1) / (max - min) (1 when max = min) and z0 = round(-min s),
// each iteration i (beta_i = beta kappa^i) computes
//   q = clamp(round(w s + z), 0, 2^bits - 1),  r = (q - z) / s,
//   e = shrink_p(w - r, beta_i) = sign(x) max(|x| - |x|^(p-1) / beta_i, 0),  z' = mean(q - (w - e) s),
// and stops when the block's mean |w - r| does not fall (by 1e-9 of it: it is flat in z between
// code changes, and exact ties must not depend on rounding); the block keeps the z of the least
// error seen. Rounding is to nearest even (the paper's torch.round). Unlike ONNX Runtime, the
// blocks are solved and stopped one by one (not on the whole tensor's error), the zero point kept
// is the best one and not the one after it, a last partial block is not padded with zeros, and s
// is not capped at 2e4 (a guard for float16 there).
// Done in double; codes, scales 1 / s and zero points z as MatMulNBits stores them.
struct HqqWeight {
  std::vector<uint8_t> codes;  // [K, N] row-major
  std::vector<float> scales;   // [N * k_blocks]
  std::vector<float> zeros;    // [N * k_blocks]
};
HqqWeight hqq_quantize(const ir::Tensor& w, int64_t bits, int64_t block_size, const HqqOptions& options = {});

// The MatMulNBits initializers of it: B packed as for the other algorithms (codes past K are the
// block's rounded zero point, as ONNX Runtime's padding quantizes to), float scales and float
// zero points [N * k_blocks] (ONNX Runtime's kernel takes zero points of the scales' type with
// 4 bits only).
NBitsWeight hqq_nbits_weight(const ir::Tensor& w, int64_t bits, int64_t block_size, const HqqOptions& options = {});

}  // namespace onnxptq::quant
