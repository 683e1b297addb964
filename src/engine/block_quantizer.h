// Quark's block formats outside a session: what one com.amd.quark BFPQuantizeDequantize or
// MXQuantizeDequantize node computes (their kernels, engine/kernels/quantize_block.cc), for the
// quantizer's simulation of a plan, which fake-quantizes tensors where the written model has
// these nodes.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace onnxptq::engine {

class Kernel;

class BlockQuantizer {
 public:
  // `node` gives the op type and the attributes only (its inputs and outputs are not read).
  // Error for another op type or an invalid attribute, as the kernel reports it.
  explicit BlockQuantizer(const ir::Node& node);
  ~BlockQuantizer();
  BlockQuantizer(const BlockQuantizer&) = delete;
  BlockQuantizer& operator=(const BlockQuantizer&) = delete;

  // The node's output for input x (float or float16), on up to `threads` threads.
  ir::Tensor operator()(const ir::Tensor& x, int threads) const;

 private:
  std::unique_ptr<Kernel> kernel_;
};

}  // namespace onnxptq::engine
