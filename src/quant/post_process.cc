// Which formats Quark's post-processes act on (quant/post_process.h).
#include "quant/post_process.h"

#include "onnxptq/error.h"

namespace onnxptq::quant {

void check_post_process(const QuantConfig& c) {
  const bool removes = c.remove_qdq_mul_add || !c.remove_qdq_between_ops.empty();
  const std::string key = c.remove_qdq_mul_add ? "RemoveQDQMulAdd" : "RemoveQDQBetweenOps";
  const std::string format = std::string("quant_format ") + quant_format_name(c.format);
  if (removes && c.format != QuantFormat::QDQ && c.format != QuantFormat::ExtendedQDQ)
    throw Error("extra option " + key + " removes QuantizeLinear/DequantizeLinear pairs, which " + format +
                " does not write (QDQ or ExtendedQuantFormat.QDQ do)");
  if (c.dedicate_dq_node && (c.format == QuantFormat::QOperator || c.format == QuantFormat::FixNeuron))
    throw Error("extra option DedicateDQNode copies DequantizeLinear nodes, which " + format +
                " does not write (QDQ, VitisQuantFormat.QDQ or ExtendedQuantFormat.QDQ do)");
  if (c.int16_bias) {
    if (c.format != QuantFormat::QDQ && c.format != QuantFormat::ExtendedQDQ)
      throw Error("extra option Int16Bias converts the int32 bias of a DequantizeLinear, which " + format +
                  " does not write (QDQ or ExtendedQuantFormat.QDQ do)");
    if (c.enable_dpu)
      throw Error(
          "extra option Int16Bias converts int32 biases, and enable_dpu quantizes biases as int8 weights "
          "(vai_q_onnx's dpu quantizer)");
  }
}

}  // namespace onnxptq::quant
