// convert_lstm_to_customlstm (Quark's tool, quark/onnx/tools/convert_lstm_to_customlstm.py): each
// LSTM of a quantized model between Q/DQ nodes becomes Quark's com.amd.quark ExtendedLSTM, with the
// scale and zero point of the DequantizeLinear in front of X, W, R and B and of the QuantizeLinear
// reading Y (quant/extended_lstm.h). The Q/DQ nodes stay, as Quark leaves them.
#include "quant/extended_lstm.h"
#include "tools/convert.h"

namespace onnxptq::tools {

ir::Model lstm_to_customlstm(const ir::Model& model, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  result.changed = quant::convert_lstms_to_extended(m, result.log);
  return m;
}

}  // namespace onnxptq::tools
