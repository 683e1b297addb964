// `onnxptq compare`: the error of a quantized model tensor by tensor, worst first.
#include "onnxptq/compare.h"

#include <iostream>

#include "cli/calib_data.h"
#include "cli/commands.h"
#include "onnxptq/files.h"

namespace onnxptq::cli {

void add_compare_command(CLI::App& app) {
  struct Args {
    std::string float_model, quantized_model, json, csv;
    CalibDataArgs data;
    size_t top = 20;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Error of each quantized activation (SQNR, cosine, max error) against the float model, worst first");
  cmd->add_option("FLOAT_MODEL", a->float_model, "The float ONNX model")->required();
  cmd->add_option("QUANT_MODEL", a->quantized_model, "Its quantized version (QDQ)")->required();
  add_calib_data_options(cmd, a->data);
  cmd->add_option("--top", a->top, "Tensors shown on the terminal (default 20; 0: all)")->check(non_negative());
  cmd->add_option("--json", a->json, "Write every tensor's errors as JSON to this file");
  cmd->add_option("--csv", a->csv, "Write every tensor's errors as CSV to this file");
  cmd->add_option("--threads", a->threads, "Threads (default: every hardware thread)")->check(non_negative());
  cmd->callback([a] {
    Model float_model = Model::load(a->float_model);
    Model quantized_model = Model::load(a->quantized_model);
    CalibDataArgs data = a->data;
    if (data.calib_data.empty() && !data.random) data.random = 1;  // as quantize does
    std::unique_ptr<DataReader> reader = open_calib_data(data, float_model);
    ModelComparison comparison = compare_models(float_model, quantized_model, *reader, a->threads);
    if (!a->json.empty()) write_text_file(a->json, comparison.to_json() + "\n");
    if (!a->csv.empty()) write_text_file(a->csv, comparison.to_csv());
    std::cout << comparison.to_table(a->top);
  });
}

}  // namespace onnxptq::cli
