// Weight-only quantization to com.microsoft MatMulNBits (Quark's UseMatMulNBits path, which runs
// ONNX Runtime's MatMulNBitsQuantizer with its DefaultWeightOnlyQuantConfig): every MatMul of the
// main graph whose B is a constant 2-D float32 initializer becomes one MatMulNBits node; the rest
// of the model stays float and nothing is calibrated.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::quant {

// One weight W [K, N] quantized per block of `block_size` rows of a column, laid out as
// MatMulNBits reads it (ONNX Runtime's MLAS BlockwiseQuantizer, column-wise blocks):
//   b            uint8 [N, k_blocks, blob_size], each column's codes packed low bits first along K
//                (blob_size = block_size * bits / 8); codes past K are the block's zero point
//   scales       float [N * k_blocks], column-major over blocks
//   zero_points  asymmetric only: uint8 [N * ceil(k_blocks * bits / 8)], packed the same way
// Symmetric: scale = m / -2^(bits-1), m the block's value of largest magnitude (the first on ties),
// zero point 2^(bits-1) implicit. Asymmetric: [min, max] widened to hold 0, scale = (max - min) /
// (2^bits - 1), zero point roundf(-min / scale) clamped. Codes clamp(roundf(w / scale + zp)) with
// the division done as a multiplication by the float reciprocal (0 for a zero scale), as MLAS does.
struct NBitsWeight {
  ir::Tensor b;
  ir::Tensor scales;
  std::optional<ir::Tensor> zero_points;
};
NBitsWeight quantize_nbits_weight(const ir::Tensor& w, int64_t bits, int64_t block_size, bool symmetric);

// Its parts: the scale and zero point code of each block (index n * k_blocks + j), as above;
// and the packing of codes [K, N] (row-major, each in [0, 2^bits - 1]) with them.
struct NBitsGrid {
  std::vector<float> scales;
  std::vector<uint8_t> zero_codes;
};
NBitsGrid nbits_grid(const ir::Tensor& w, int64_t bits, int64_t block_size, bool symmetric);
NBitsWeight pack_nbits_weight(std::span<const uint8_t> codes, int64_t k_rows, int64_t n_cols, const NBitsGrid& grid,
                              int64_t bits, int64_t block_size, bool symmetric);
// The codes of rounding to nearest on the grid (MLAS's multiplication by the reciprocal, roundf).
std::vector<uint8_t> nbits_nearest_codes(const ir::Tensor& w, const NBitsGrid& grid, int64_t bits, int64_t block_size);

// The MatMuls write_matmul_nbits replaces, in graph order: of the main graph, not excluded (or
// named by nodes_to_quantize), B a constant 2-D float32 initializer that is not a graph input.
std::vector<ir::Node*> matmul_nbits_targets(ir::Graph& graph, const QuantConfig& config);

// For MatMulNBitsParams Algorithm GPTQ: a plan of the targets' weights (TensorPlan::group_size),
// rounded to nearest, for GPTQ (finetune/gptq.h) to round again; write_matmul_nbits packs its codes.
Plan matmul_nbits_plan(const ir::Model& model, const QuantConfig& config);

struct MatMulNBitsResult {
  ir::Model model;
  std::vector<std::string> quantized_nodes;  // the MatMuls replaced, by their names in `model`'s source
};

// The model with its MatMuls replaced, named as ONNX Runtime names them: node "<name>_Q<bits>",
// initializers "<B>_Q<bits>", "<B>_scales", "<B>_zero_points" (made unique when B is shared);
// attributes K, N, bits, block_size and accuracy_level (when not 0). nodes_to_exclude and
// nodes_to_quantize choose the MatMuls by name; weights left unused are dropped. With `plan`
// (matmul_nbits_plan's, after GPTQ), a weight it holds gets its codes and parameters.
MatMulNBitsResult write_matmul_nbits(const ir::Model& model, const QuantConfig& config, const Plan* plan = nullptr);

}  // namespace onnxptq::quant
