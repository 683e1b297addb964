// Exact conversions between float32 and the 16-bit float formats (IEEE half, bfloat16):
// round to nearest even, infinities kept, NaN kept as a quiet NaN with its top payload bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace onnxptq::ir {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

void half_to_float(const uint16_t* in, float* out, size_t n);
void float_to_half(const float* in, uint16_t* out, size_t n);
void bfloat16_to_float(const uint16_t* in, float* out, size_t n);
void float_to_bfloat16(const float* in, uint16_t* out, size_t n);

}  // namespace onnxptq::ir
