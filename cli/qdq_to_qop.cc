// `onnxptq qdq-to-qop`: vai_q_onnx's convert_qdq_to_qop, a QDQ model in QOperator form.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_qdq_to_qop_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand("qdq-to-qop",
                                     "Convert a QDQ model to QOperator form: QLinearConv, QLinearMatMul, com.microsoft "
                                     "QLinear ops (vai_q_onnx convert_qdq_to_qop)");
  add_model_tool(cmd, a, [](const Model& model) { return qdq_to_qop(model); });
}

}  // namespace onnxptq::cli
