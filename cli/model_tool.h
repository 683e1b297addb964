// The shape every model-to-model tool of the command line shares (remove-qdq, qdq-to-qop,
// fix-shapes, the converters): MODEL, --output, --save-as-external-data; its log on stderr.
#pragma once

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "onnxptq/convert.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"
#include "onnxptq/model.h"

namespace onnxptq::cli {

struct ModelToolArgs {
  std::string model;
  std::string output;
  bool external_data = false;
};

// Adds MODEL, --output/-o and --save-as-external-data to `cmd`; `run` converts the loaded model
// (after the output path is checked), and the result is saved and its log printed.
inline void add_model_tool(CLI::App* cmd, std::shared_ptr<ModelToolArgs> a,
                           std::function<Converted(const Model&)> run) {
  cmd->add_option("MODEL", a->model, "Input ONNX model (never modified)")->required();
  cmd->add_option("--output,-o", a->output, "Model file to write")->required();
  cmd->add_flag("--save-as-external-data", a->external_data, "Write the tensors to a data file beside the model");
  cmd->callback([a, run] {
    check_output_path(a->model, a->output, "--output");
    Model model = Model::load(a->model);
    std::optional<Converted> converted;
    try {
      converted = run(model);
    } catch (const Error& e) {  // say which model
      throw Error(a->model + ": " + e.what(), e.kind());
    }
    Converted& c = *converted;
    c.model.save(a->output, a->external_data);
    for (const std::string& line : c.result.log) std::cerr << line << "\n";
    std::cerr << "written to " << a->output << "\n";
  });
}

}  // namespace onnxptq::cli
