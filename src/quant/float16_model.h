// Quark's QuantizeFP16 and UseFP32Scale: a float16 model is quantized as one. It is computed in
// float32 inside (convert_fp16_to_fp32's widening, samples widened as they are read), so
// calibration and the optimisation passes see float32; the written model then keeps the float16
// model's interface:
//   - UseFP32Scale (default): float32 between a Cast after each float16 input and a Cast before
//     each float16 output, as Quark's convert_fp16_scale_to_fp32 leaves it;
//   - UseFP32Scale false: float16 throughout, Q/DQ scales included (QuantizeLinear and
//     DequantizeLinear take float16 from opset 19; below it they are com.microsoft's).
#pragma once

#include <functional>
#include <string>

#include "ir/model.h"
#include "quant/config.h"

namespace onnxptq::quant {

// Whether the float model is widened to float32 first: convert_fp16_to_fp32, or QuantizeFP16
// (once resolve_float16_model decided it).
inline bool widens_float16(const QuantConfig& config) {
  return config.convert_fp16_to_fp32 || config.quantize_fp16.value_or(false);
}

// Whether the model has a float16 input, output, initializer, typed value, Constant or Cast to
// float16. (Quark's test looks at the inputs, outputs and initializers only and wants no float32
// among them; a model that mixes the two would then have float16 tensors quantized with float32
// scales, which no QuantizeLinear takes.)
bool has_float16(const ir::Model& model);

// Errors (one line) for contradicting keys: QuantizeFP16 with convert_fp16_to_fp32, UseFP32Scale
// true with QuantizeFP16 false, UseFP32Scale false where the format writes no float16 scale.
void check_float16_model_keys(const QuantConfig& config);

// Decides QuantizeFP16 for `model` (Error if it was asked for a model without float16, or refused
// for one with float16 and no convert_fp16_to_fp32) and, when on, UseFP32Scale. Says what it decided through `log`.
void resolve_float16_model(QuantConfig& config, const ir::Model& model,
                           const std::function<void(const std::string&)>& log);

// The written model `quantized` (of the widened model) given back the interface of `original`
// as config's UseFP32Scale says. Nothing when QuantizeFP16 is off. Warnings go to `log`.
void restore_float16_model(ir::Model& quantized, const ir::Model& original, const QuantConfig& config,
                           const std::function<void(const std::string&)>& log);

}  // namespace onnxptq::quant
