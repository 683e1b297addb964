// Quark's float2bfloat, shared by the engine's kernels of Quark's custom ops.
#pragma once

#include <bit>
#include <cstdint>

namespace onnxptq::engine {

// float32 rounded to bfloat16's 8 significant bits by its bit pattern, to nearest with ties to
// even, as a float. NaN patterns are rounded like any other (a NaN whose payload lies in its low
// 16 bits can become an infinity), as Quark's kernels do; ir::float_to_bfloat16 keeps NaNs.
inline float quark_round_to_bfloat16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x8000u) && ((u & 0xFFFFu) > 0x8000u || (u & 0x10000u))) u += 0x10000u;
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

}  // namespace onnxptq::engine
