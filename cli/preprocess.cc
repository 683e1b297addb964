// `onnxptq preprocess`: ORT's quant_pre_process on the command line (shape inference, opset
// upgrade, graph optimisation), writing a new model; the input is never modified.
#include "onnxptq/preprocess.h"

#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"
#include "onnxptq/model.h"
#include "onnxptq/random_inputs.h"

namespace onnxptq::cli {
namespace {

namespace fs = std::filesystem;

struct PreprocessArgs {
  std::string model;
  std::string output;
  PreprocessOptions prepare;
  bool auto_merge = false;
  std::optional<int64_t> int_max;
  bool verbose = false;
  bool save_as_external_data = false;
  bool all_tensors_to_one_file = false;
  std::optional<std::string> external_data_location;
  std::optional<size_t> external_data_size_threshold;
  std::vector<std::string> shapes;  // NAME=AxB...
};

// Refuses, by name and with the reason, what onnxptq does not do; before anything is read.
SaveOptions check_and_save_options(const PreprocessArgs& a) {
  if (a.auto_merge)
    throw Error(
        "--auto-merge is not supported: it resolves conflicts of ONNX Runtime's symbolic shape inference, which "
        "onnxptq does not use (its shape inference leaves a conflicting dim unknown instead of stopping)");
  if (a.int_max)
    throw Error(
        "--int-max is not supported: it bounds ONNX Runtime's symbolic Slice arithmetic, which onnxptq does not use "
        "(ONNX's inference clamps Slice ends to the dimension)");
  SaveOptions save;
  if (!a.save_as_external_data) {
    if (a.all_tensors_to_one_file || a.external_data_location || a.external_data_size_threshold)
      throw Error(
          "--all-tensors-to-one-file, --external-data-location and --external-data-size-threshold need "
          "--save-as-external-data");
    return save;
  }
  if (!a.all_tensors_to_one_file)
    throw Error(
        "--save-as-external-data: onnxptq writes all tensors to one data file, not one file per tensor "
        "(ONNX Runtime's default): add --all-tensors-to-one-file");
  save.external_data = SaveOptions::ExternalData::Always;
  if (a.external_data_location) {
    fs::path location(*a.external_data_location);
    if (location.empty() || location.has_parent_path() || location == "." || location == "..")
      throw Error("--external-data-location '" + *a.external_data_location +
                  "' must be a file name (the data file is written beside the output model)");
    save.data_file_name = location.string();
  }
  if (a.external_data_size_threshold) save.external_threshold = *a.external_data_size_threshold;
  return save;
}

void preprocess_command(PreprocessArgs a) {
  SaveOptions save = check_and_save_options(a);
  for (const std::string& s : a.shapes) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--shape wants NAME=AxBx..., got '" + s + "'");
    a.prepare.input_shapes[s.substr(0, eq)] = parse_dims(s.substr(eq + 1), "--shape " + s.substr(0, eq));
  }
  check_preprocess_options(a.prepare);  // unknown pass names before any work
  check_output_path(a.model, a.output, "--output");

  Model model = Model::load(a.model);
  for (const auto& [name, dims] : a.prepare.input_shapes) {
    bool known = false;
    for (const ValueInfo& input : model.inputs()) known = known || input.name == name;
    if (!known) throw Error("--shape names '" + name + "', which is not an input of the model");
  }
  // What the format conversions did or skipped is always said; what the passes did with --verbose.
  a.prepare.conversion_log = [](const std::string& line) { std::cerr << line << "\n"; };
  if (a.verbose) a.prepare.pass_log = [](const std::string& line) { std::cerr << line << "\n"; };
  preprocess(model, a.prepare).save(a.output, save);
  std::cerr << "preprocessed model written to " << a.output << "\n";
}

}  // namespace

void add_preprocess_command(CLI::App& app) {
  auto a = std::make_shared<PreprocessArgs>();
  CLI::App* cmd = app.add_subcommand(
      "preprocess",
      "Prepare a float model for quantization: shapes, opset upgrade, graph optimisation (quant_pre_process)");
  cmd->add_option("MODEL", a->model, "Float ONNX model file (never modified)")->required();
  cmd->add_option("--output,-o", a->output, "Model file to write")->required();
  cmd->add_flag("--skip-optimization", a->prepare.skip_optimization,
                "No graph optimisation passes (shape inference and opset upgrade only)");
  cmd->add_flag("--skip-onnx-shape", a->prepare.skip_onnx_shape, "No ONNX (libonnx) shape inference");
  cmd->add_flag("--skip-symbolic-shape", a->prepare.skip_symbolic_shape,
                "No engine run on a sample to type what static shape inference cannot");
  cmd->add_flag("--auto-merge", a->auto_merge, "Refused: ONNX Runtime's symbolic inference option (docs/cli.md)");
  cmd->add_option("--int-max", a->int_max, "Refused: ONNX Runtime's symbolic inference option (docs/cli.md)");
  cmd->add_flag("--guess-output-rank", a->prepare.guess_output_rank,
                "Outputs nothing could type get the element type and rank of the node's input 0");
  cmd->add_flag("--verbose,-v", a->verbose, "Print what each pass did");
  cmd->add_flag("--convert-fp16-to-fp32", a->prepare.convert_fp16_to_fp32,
                "First make a float16 model float32 (tensors, inputs, outputs, Casts)");
  cmd->add_flag("--convert-nchw-to-nhwc", a->prepare.convert_nchw_to_nhwc,
                "First declare 4-D NCHW image inputs NHWC (a Transpose moved into the graph)");
  cmd->add_flag("--save-as-external-data", a->save_as_external_data,
                "Write the tensors to a data file beside the model");
  cmd->add_flag("--all-tensors-to-one-file", a->all_tensors_to_one_file,
                "All tensors in one data file (the only layout onnxptq writes; needed with --save-as-external-data)");
  cmd->add_option("--external-data-location", a->external_data_location,
                  "Data file name, beside the output (default: <output file name>.data)");
  cmd->add_option("--external-data-size-threshold", a->external_data_size_threshold,
                  "Tensors smaller than this many bytes stay in the model file (default 1024)")
      ->check(non_negative());
  cmd->add_option("--target-opset", a->prepare.target_opset, "Models below this opset are converted to it (default 13)")
      ->check(CLI::Range(10, 17));
  cmd->add_option("--shape", a->shapes,
                  "NAME=AxBx...: input shape of the sample run (dynamic dims: 1 in front, else 64)");
  cmd->add_option("--passes", a->prepare.passes, "Run only these passes, in this order (comma-separated)")
      ->delimiter(',');
  cmd->callback([a] { preprocess_command(*a); });
}

}  // namespace onnxptq::cli
