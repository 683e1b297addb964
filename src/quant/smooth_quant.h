// SmoothQuant (Xiao et al., "SmoothQuant: Accurate and Efficient Post-Training Quantization for
// Large Language Models", ICML 2023, arXiv:2211.10438), Quark's include_sq: before calibration,
// the input channels of each MatMul with a constant weight are divided by s_j and the weight's
// rows multiplied by s_j, s_j = a_j^alpha / w_j^(1 - alpha) (a_j: the largest |x| of channel j
// over the calibration data, w_j: the largest |w| of row j), so that activation outliers move
// into the weights, which quantize per channel or absorb them better. The float model computes the
// same values.
//
// Beyond Quark (which inserts Mul(x, 1/s) before every MatMul):
// - Folding: when the input is read only by these MatMuls and made by a node linear in its
//   channels with constant parameters (a LayerNormalization's scale and bias, a MatMul's or
//   Gemm's weight columns and bias, with an Add of a bias after them, a Mul by a per-channel
//   constant), those are divided by s instead (no node added), as Intel Neural Compressor folds.
// - SmoothAlpha "auto": alpha per input, the one of a grid (SmoothAlphaRange) whose MatMuls,
//   input and weight fake-quantized, come closest to the float products on calibration rows.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/config.h"

namespace onnxptq::quant {

struct SmoothQuantResult {
  size_t inputs = 0;                          // MatMul inputs smoothed (a group of MatMuls each)
  size_t matmuls = 0;                         // MatMuls whose weight rows were scaled
  size_t folded = 0;                          // inputs whose scale went into the node before them
  std::map<std::string, size_t> folded_into;  // of those, how many by that node's op type
  size_t inserted = 0;                        // Mul nodes inserted
  std::map<std::string, double> alpha;        // per input tensor, the alpha used
};

// Smooths `model` in place from the samples of `reader` (read once from where it stands; at most
// config.calib.max_samples of them). The MatMuls are those `quantizable` accepts whose B is a 2-D
// float initializer and whose A is computed; a weight another node also reads is copied first.
// `log` gets one summary line.
SmoothQuantResult smooth_quant(ir::Model& model, calib::DataReader& reader, const QuantConfig& config,
                               const std::function<bool(const ir::Node&)>& quantizable,
                               const std::function<void(const std::string&)>& log = {});

}  // namespace onnxptq::quant
