// Quark's block-format nodes in standard ONNX ops (quant/block_standard_ops.h), as a model tool: a
// model quantized by Quark or by onnxptq with QBFP / QMX types made runnable without Quark's
// custom-op library.
#include "onnxptq/error.h"
#include "quant/block_standard_ops.h"
#include "tools/convert.h"

namespace onnxptq::tools {

ir::Model block_to_standard_ops(const ir::Model& model, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  result.changed = quant::write_block_nodes_in_standard_ops(m);
  if (result.changed == 0)
    throw Error("the model has no com.amd.quark BFPQuantizeDequantize or MXQuantizeDequantize node");
  result.log.push_back(std::to_string(result.changed) + " block nodes written in standard ops");
  return m;
}

}  // namespace onnxptq::tools
