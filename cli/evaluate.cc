// `onnxptq evaluate`: cosine similarity, L2 loss and PSNR between the results of a float model and
// of its quantized version, file by file (the seeds' evaluate tool).
#include "onnxptq/evaluate.h"

#include <iostream>

#include "cli/commands.h"

namespace onnxptq::cli {

void add_evaluate_command(CLI::App& app) {
  struct Args {
    std::string baseline, quantized;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "evaluate", "Compare result folders of a float and a quantized model (cosine, L2 loss, PSNR per file)");
  cmd->add_option("--baseline-results,--baseline", a->baseline,
                  "Folder of the float model's results (.npy, .png, .jpg)")
      ->required();
  cmd->add_option("--quantized-results,--quantized", a->quantized,
                  "Folder of the quantized model's results, the same file names")
      ->required();
  cmd->add_flag("--json", a->json, "Print the metrics as JSON");
  cmd->callback([a] {
    EvaluateReport report = evaluate_folders(a->baseline, a->quantized);
    if (a->json)
      std::cout << report.to_json() << "\n";
    else
      std::cout << report.to_table();
  });
}

}  // namespace onnxptq::cli
