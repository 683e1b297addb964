// `onnxptq dump-model`: Quark's dump_model, every quantized tensor's integers on one sample.
#include "onnxptq/dump_model.h"

#include <iostream>

#include "cli/calib_data.h"
#include "cli/commands.h"
#include "onnxptq/error.h"

namespace onnxptq::cli {

void add_dump_model_command(CLI::App& app) {
  struct Args {
    std::string model;
    CalibDataArgs data;
    DumpOptions options;
    std::string output_dir = "dump_results";
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "dump-model",
      "Run a quantized model on one sample and write each quantized tensor's integers (<name>.bin, <name>.txt), "
      "for a bit-exact comparison with hardware (Quark dump_model)");
  cmd->add_option("MODEL", a->model, "Quantized ONNX model (QDQ, Extended, Vitis or FixNeuron)")->required();
  add_calib_data_options(cmd, a->data);
  cmd->add_flag("--dump-float", a->options.dump_float, "Also write every float node output (<name>_float.bin/.txt)");
  cmd->add_option("--output-dir", a->output_dir, "Folder of the files (default dump_results; made if missing)");
  cmd->add_option("--threads", a->options.threads, "Threads (default: every hardware thread)")->check(non_negative());
  cmd->callback([a] {
    Model model = Model::load(a->model);
    CalibDataArgs data = a->data;
    if (data.calib_data.empty() && !data.random) data.random = 1;  // the seeds' RandomDataReader
    std::unique_ptr<DataReader> reader = open_calib_data(data, model);
    DumpOptions options = a->options;
    options.output_dir = a->output_dir;
    DumpResult result;
    try {
      result = dump_model(model, *reader, options);
    } catch (const Error& e) {  // say which model
      throw Error(a->model + ": " + e.what(), e.kind());
    }
    for (const std::string& w : result.warnings) std::cerr << "warning: " << w << "\n";
    std::cerr << result.quantized << " quantized tensors";
    if (options.dump_float) std::cerr << " and " << result.float_tensors << " float tensors";
    std::cerr << " written to " << a->output_dir << "\n";
  });
}

}  // namespace onnxptq::cli
