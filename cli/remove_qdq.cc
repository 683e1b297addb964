// `onnxptq remove-qdq`: vai_q_onnx's remove_qdq, every single-reader quantize/dequantize pair removed.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_remove_qdq_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand("remove-qdq",
                                     "Remove every QuantizeLinear -> DequantizeLinear pair whose quantized value one "
                                     "DequantizeLinear reads (vai_q_onnx remove_qdq); stored weights stay dequantized");
  add_model_tool(cmd, a, [](const Model& model) { return remove_qdq(model); });
}

}  // namespace onnxptq::cli
