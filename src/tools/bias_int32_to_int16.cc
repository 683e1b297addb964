// convert_bias_int32_to_int16 (Quark's tool): the quantizer's Int16Bias step (quant/export.h) on a
// written model.
#include "onnxptq/error.h"
#include "quant/export.h"
#include "tools/convert.h"

namespace onnxptq::tools {

ir::Model bias_int32_to_int16(const ir::Model& model, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  quant::Int16Biases b = quant::store_biases_as_int16(m);
  if (b.converted == 0)
    throw Error(
        "the model has no int32 bias dequantized for a Conv, ConvTranspose, Gemm or normalization: "
        "nothing to convert");
  if (b.contrib)
    result.log.push_back(std::to_string(b.contrib) + " bias DequantizeLinear nodes made com.microsoft's (opset " +
                         std::to_string(m.opset("")) + " < 21: ONNX's takes no int16)");
  result.changed = b.converted;
  result.log.push_back(std::to_string(b.converted) + " int32 biases stored as int16");
  if (b.clipped)
    result.log.push_back("warning: " + std::to_string(b.clipped) + " bias values were beyond int16 and clipped");
  return m;
}

}  // namespace onnxptq::tools
