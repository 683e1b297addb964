// Test support: a small model whose quantization loses its output in one node, and its data.
#pragma once

#include <memory>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/config.h"

namespace onnxptq::testing {

// x[1,2,6,6] -> conv1 -> a -> conv2 -> c -> Tanh -> t -> conv3 -> y, all 1x1. conv2's output
// channel 0 has weights near 8 and channels 1-3 near 0.02, and conv3 reads channels 1-3 only
// (weight 1, channel 0: 0.01): per-tensor weights of conv2 lose what y depends on. The Tanh
// keeps cross-layer equalization from pairing conv2 with conv3.
ir::Model outlier_model();
// `count` seeded samples of x, uniform in [-1, 1].
std::unique_ptr<DataReader> samples(const ir::Model& model, size_t count);
// QDQ, MinMax, symmetric activations (no activation is removed: plans of one node match
// whole-model plans), one thread.
quant::QuantConfig qdq_config();

}  // namespace onnxptq::testing
