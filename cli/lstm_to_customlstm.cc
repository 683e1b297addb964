// `onnxptq lstm-to-customlstm`: Quark's convert_lstm_to_customlstm.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_lstm_to_customlstm_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand(
      "lstm-to-customlstm",
      "Each LSTM of a model quantized with uint16 X, W, R, B and Y as Quark's com.amd.quark ExtendedLSTM (Quark "
      "convert_lstm_to_customlstm)");
  add_model_tool(cmd, a, [](const Model& model) { return lstm_to_customlstm(model); });
}

}  // namespace onnxptq::cli
