// QuaRot's R1 rotation (Ashkboos et al., "QuaRot: Outlier-Free 4-Bit Inference in Rotated LLMs",
// arXiv:2404.00456, 2024), Quark's include_rotation: before calibration, the residual stream of a
// decoder is multiplied by an orthogonal matrix R (a Hadamard matrix / sqrt(n), RMatrixDim n),
// which spreads its outlier channels over all channels, so that it quantizes with less error. The
// float model computes the same values: each node that writes the stream rotates its output (its
// weight W becomes W R, a bias b becomes b R, an embedding table's rows too), each node that reads
// it undoes the rotation on its input (W becomes R^T W), and the RMS norms between them, which
// commute with R once their scale is 1, give their scale to the weights after them.
//
// The nodes come from the JSON file of extra option RConfigPath, as Quark reads it:
//   {"R1_pairs": [{"prev_nodes": [...], "next_nodes": [...], "norm_node": "..."}, ...]}
// prev_nodes write the stream (MatMul, Gemm with a constant weight, or the Gather of an embedding
// table), next_nodes read it after the norm (MatMul or Gemm), norm_node is that RMS norm: a Mul by
// a constant scale (the last step of a decomposed RMS norm), SimplifiedLayerNormalization
// (com.microsoft) or RMSNormalization. Each node is named once in each role.
//
// Beyond Quark: the weight is the node's constant input, whatever its name (Quark looks for
// "weight" in the name); a Gemm's transB is read (Quark tests an attribute by position); the
// bias of a MatMul is also the constant of an Add that alone reads its output (Quark rotates a
// bias only when it is the node's own input); a weight another node also reads is copied first.
// The rotation is applied with the fast Walsh-Hadamard transform in double (no n x n matrix).
// RMatrixDim must be a power of two (Quark also takes some multiples of 12, 20, 28, ...);
// UseRandomHad's signs come from a fixed seed, so a run is reproducible (Quark draws them anew).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/model.h"
#include "onnxptq/data_reader.h"
#include "quant/config.h"

namespace onnxptq::quant {

struct QuaRotResult {
  size_t pairs = 0;        // R1_pairs applied
  size_t rotated_out = 0;  // nodes whose output was rotated (prev_nodes)
  size_t rotated_in = 0;   // nodes whose input rotation was undone (next_nodes)
  size_t norms = 0;        // norms whose scale went into the next nodes
};

// Rotates `model` in place as options.config_path says; Error naming the file, the pair and the
// node for anything it cannot do (a node the model lacks, a weight of another size than
// options.matrix_dim, a norm that subtracts the mean, ...). `log` gets one summary line.
QuaRotResult rotate_r1(ir::Model& model, const RotationOptions& options,
                       const std::function<void(const std::string&)>& log = {});

// Error when the rotated model's outputs on `feed` differ from `before` (the float model's there)
// by more than 1e-3 of each output's range: R1 pairs that miss a node reading or writing the
// rotated stream change the model's function (Quark rotates such a model without a word).
void check_rotation_kept_function(const ir::Model& rotated, const Feed& feed, const std::vector<ir::Tensor>& before,
                                  const RotationOptions& options, int threads);

// With R = D H / sqrt(n) (H the Sylvester Hadamard matrix, n a power of two, D the diagonal of
// `signs`, empty for the identity): v R for a row vector v of n values, in place, which is also
// R^T v for a column (H is symmetric): a writer's weight rows and bias, a table's rows, a reader's
// weight columns all take this one transform.
void hadamard_rotate(double* v, int64_t n, const std::vector<double>& signs);

// The signs of UseRandomHad for size n (fixed seed).
std::vector<double> random_signs(int64_t n);

}  // namespace onnxptq::quant
