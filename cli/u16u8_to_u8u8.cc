// `onnxptq u16u8-to-u8u8`: Quark's convert_u16u8_to_u8u8, uint16 activations made uint8 without calibration.
#include "cli/model_tool.h"

namespace onnxptq::cli {

void add_u16u8_to_u8u8_command(CLI::App& app) {
  auto a = std::make_shared<ModelToolArgs>();
  CLI::App* cmd = app.add_subcommand(
      "u16u8-to-u8u8",
      "Make uint16 activations uint8 with the same ranges, no calibration (Quark convert_u16u8_to_u8u8)");
  add_model_tool(cmd, a, [](const Model& model) { return u16u8_to_u8u8(model); });
}

}  // namespace onnxptq::cli
