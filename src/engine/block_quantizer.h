// Quark's block formats outside a session: what one com.amd.quark BFPQuantizeDequantize or
// MXQuantizeDequantize node computes (their kernels, engine/kernels/quantize_block.cc), for the
// quantizer's simulation of a plan, which fake-quantizes tensors where the written model has
// these nodes.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace onnxptq::engine {

class Kernel;

// An OCP MX element format (MXQuantizeDequantize's element_dtype): exponent and mantissa bits
// (ebits 0: int8, whose 8 bits are all mantissa), the largest normal exponent, the largest value.
struct MxElementFormat {
  int ebits;
  int mbits;
  int emax;
  float max_norm;
};
// Error naming element_dtype when it is not int8, fp8_e5m2, fp8_e4m3, fp6_e3m2, fp6_e2m3 or fp4_e2m1.
MxElementFormat mx_element_format(const std::string& element_dtype);

// Whether `node` is com.amd.quark's BFPQuantizeDequantize or MXQuantizeDequantize.
bool is_block_quantize_node(const ir::Node& node);

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
