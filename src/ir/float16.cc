#include "ir/float16.h"

#include <bit>

namespace onnxptq::ir {

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float32.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_half(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: keep it quiet, keep what fits of the payload
    return sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5 lines the half's subnormal
    // bits up with float32's mantissa, and the FPU rounds to nearest even for us.
    float shifted = std::bit_cast<float>(magnitude) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += 0xc8000fffu + odd;
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bfloat16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

void half_to_float(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}
void float_to_half(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}
void bfloat16_to_float(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bfloat16_to_float(in[i]);
}
void float_to_bfloat16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_bfloat16(in[i]);
}

}  // namespace onnxptq::ir
