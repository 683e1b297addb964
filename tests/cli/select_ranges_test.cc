// `onnxptq quantize` with Quark's node selection flags (--nodes-to-exclude patterns,
// --subgraphs-to-exclude, --extra-op-types-to-quantize) and with --ranges, the JSON of `onnxptq
// calibrate`, as a user runs them on resnet18.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "onnxptq/files.h"
#include "support/cli_run.h"

namespace onnxptq::cli_test {
namespace {

namespace fs = std::filesystem;

struct Folder {
  Folder(const std::string& name) : dir(fs::temp_directory_path() / (name + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  fs::path dir;
};

const fs::path kModel = fs::path(ONNXPTQ_MODELS_DIR) / "resnet18.onnx";

// The report of quantizing resnet18 with `options`.
nlohmann::json report_of(const fs::path& dir, const std::string& options) {
  fs::path report = dir / "report.json";
  fs::remove(report);
  CliRun r = onnxptq("quantize " + kModel.string() + " -o " + (dir / "q.onnx").string() +
                     " --random 1 --calibrate-method MinMax --quiet --report " + report.string() + " " + options);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(slurp(report)) : nlohmann::json::object();
}

size_t count_excluded(const nlohmann::json& report) {
  size_t n = 0;
  for (const auto& [name, why] : report["float_nodes"].items()) n += why == "excluded";
  return n;
}

TEST(CliSelection, ResNet18QuarkPatternsSubgraphsAndExtraOpTypes) {
  Folder f("onnxptq_cli_select_");
  nlohmann::json plain = report_of(f.dir, "");
  EXPECT_EQ(plain["quantized_nodes_by_op_type"]["Conv"], 20);
  // layer1's two blocks: four Convs, two Adds, four Relus.
  nlohmann::json pattern = report_of(f.dir, "--nodes-to-exclude '^/layer1/.*'");
  EXPECT_EQ(pattern["quantized_nodes_by_op_type"]["Conv"], 16);
  EXPECT_EQ(count_excluded(pattern), 10u);
  EXPECT_EQ(pattern["float_nodes"]["/layer1/layer1.1/Add"], "excluded");
  // The second block of layer1, from the Relu that feeds both of its paths to its Add.
  nlohmann::json subgraph =
      report_of(f.dir, "--subgraphs-to-exclude /layer1/layer1.0/relu_1/Relu:/layer1/layer1.1/Add");
  EXPECT_EQ(subgraph["quantized_nodes_by_op_type"]["Conv"], 18);
  EXPECT_EQ(count_excluded(subgraph), 5u);
  // A start node after the end: one line naming them.
  std::string base = "quantize " + kModel.string() + " -o " + (f.dir / "bad.onnx").string() + " --random 1 --quiet ";
  expect_one_line_error(
      onnxptq(base + "--subgraphs-to-exclude /layer1/layer1.1/Add:/layer1/layer1.0/conv1/Conv"),
      "subgraphs_to_exclude[0]: going back from end node '/layer1/layer1.0/conv1/Conv', node '/conv1/Conv' reads "
      "graph input");
  expect_one_line_error(onnxptq(base + "--subgraphs-to-exclude /layer1/layer1.1/Add"),
                        "--subgraphs-to-exclude '/layer1/layer1.1/Add': expected START,...:END,...");
  expect_one_line_error(onnxptq(base + "--nodes-to-exclude '^/layer9/.*'"),
                        "nodes_to_exclude: no node name matches the regular expression '^/layer9/.*'");
  EXPECT_FALSE(fs::exists(f.dir / "bad.onnx"));
  // Flatten is in no registry: quantized only when asked.
  EXPECT_FALSE(plain["quantized_nodes_by_op_type"].contains("Flatten"));
  nlohmann::json extra = report_of(f.dir, "--extra-op-types-to-quantize Flatten");
  EXPECT_EQ(extra["quantized_nodes_by_op_type"]["Flatten"], 1);
}

// One calibration, many quantizations: the model quantized with --ranges is byte for byte the one
// quantized with calibration on the same data.
TEST(CliRanges, ResNet18QuantizeWithRangesFromCalibrateWritesTheSameModel) {
  Folder f("onnxptq_cli_ranges_");
  const fs::path ranges = f.dir / "ranges.json";
  CliRun cal = onnxptq("calibrate " + kModel.string() + " --random 2 --quiet -o " + ranges.string());
  ASSERT_EQ(cal.code, 0) << cal.err;
  nlohmann::json file = nlohmann::json::parse(slurp(ranges));
  EXPECT_EQ(file["method"], "MinMax");
  EXPECT_EQ(file["activation_type"], "QInt8");
  const std::string model = kModel.string();
  CliRun plain = onnxptq("quantize " + model + " -o " + (f.dir / "plain.onnx").string() +
                         " --random 2 --calibrate-method MinMax --quiet");
  ASSERT_EQ(plain.code, 0) << plain.err;
  // No calibration data: nothing is calibrated, and no warning says so.
  CliRun reused = onnxptq("quantize " + model + " -o " + (f.dir / "reused.onnx").string() + " --ranges " +
                          ranges.string() + " --calibrate-method MinMax");
  ASSERT_EQ(reused.code, 0) << reused.err;
  EXPECT_EQ(reused.err.find("warning"), std::string::npos) << reused.err;
  EXPECT_NE(reused.err.find("tensors from --ranges '" + ranges.string() + "' (not calibrated)"), std::string::npos)
      << reused.err;
  EXPECT_EQ(slurp(f.dir / "reused.onnx"), slurp(f.dir / "plain.onnx"));

  // Ranges that do not fit: one line each, nothing written.
  const fs::path out = f.dir / "bad.onnx";
  std::string base = "quantize " + model + " -o " + out.string() + " --quiet --ranges ";
  expect_one_line_error(
      onnxptq(base + ranges.string()),
      "--ranges '" + ranges.string() + "': ranges calibrated with MinMax, but the config's calibrate_method is MinMSE");
  expect_one_line_error(
      onnxptq(base + ranges.string() + " --calibrate-method MinMax --activation-type QUInt8"),
      "--ranges '" + ranges.string() + "': ranges calibrated for activation_type QInt8, but the config's is QUInt8");
  nlohmann::json other = file;
  other["tensors"]["/other/model/output"] = {{"min", -1.0}, {"max", 1.0}};
  write_text_file(f.dir / "other.json", other.dump());
  expect_one_line_error(onnxptq(base + (f.dir / "other.json").string() + " --calibrate-method MinMax"),
                        "--ranges '" + (f.dir / "other.json").string() +
                            "': the model has no tensor '/other/model/output' (ranges of another model?)");
  nlohmann::json fewer = file;
  fewer["tensors"].erase(fewer["tensors"].begin());
  write_text_file(f.dir / "fewer.json", fewer.dump());
  expect_one_line_error(onnxptq(base + (f.dir / "fewer.json").string() + " --calibrate-method MinMax"),
                        "--ranges '" + (f.dir / "fewer.json").string() + "': no range for tensor '" +
                            file["tensors"].begin().key() + "', which the plan calibrates");
  expect_one_line_error(onnxptq(base + (f.dir / "missing.json").string()),
                        "--ranges '" + (f.dir / "missing.json").string() + "': no such file");
  expect_one_line_error(onnxptq(base + model), "--ranges '" + model + "': not JSON");
  // A folder where a file goes: said so (the stream library's own failure was an internal error).
  expect_one_line_error(onnxptq(base + f.dir.string()), "--ranges '" + f.dir.string() + "': not a file");
  expect_one_line_error(onnxptq("quantize " + model + " -o " + out.string() + " --quiet --random 1 --extra-option " +
                                "SaveAndRestore='\"" + f.dir.string() + "\"'"),
                        "SaveAndRestore '" + f.dir.string() + "': not a file");
  EXPECT_FALSE(fs::exists(out));
}

// calibrate --config XINT8: the ranges of XINT8's calibration (MinMSE positions on the model after
// the NPU rewrites), which quantize --config XINT8 --ranges takes to write the model calibrating
// writes; an option given after --config overrides it.
TEST(CliRanges, ResNet18CalibrateWithAPresetServesThatPreset) {
  Folder f("onnxptq_cli_ranges_preset_");
  const std::string model = kModel.string();
  const fs::path ranges = f.dir / "xint8.json";
  CliRun cal = onnxptq("calibrate " + model + " --config XINT8 --random 2 --quiet -o " + ranges.string());
  ASSERT_EQ(cal.code, 0) << cal.err;
  nlohmann::json file = nlohmann::json::parse(slurp(ranges));
  EXPECT_EQ(file["method"], "MinMSE");
  CliRun plain = onnxptq("quantize " + model + " -o " + (f.dir / "plain.onnx").string() + " --config XINT8 --random 2 --quiet");
  ASSERT_EQ(plain.code, 0) << plain.err;
  CliRun reused = onnxptq("quantize " + model + " -o " + (f.dir / "reused.onnx").string() +
                          " --config XINT8 --quiet --ranges " + ranges.string());
  ASSERT_EQ(reused.code, 0) << reused.err;
  EXPECT_EQ(slurp(f.dir / "reused.onnx"), slurp(f.dir / "plain.onnx"));
  CliRun overridden = onnxptq("calibrate " + model + " --config XINT8 --method NonOverflow --random 1 --quiet");
  ASSERT_EQ(overridden.code, 0) << overridden.err;
  EXPECT_EQ(nlohmann::json::parse(overridden.out)["method"], "NonOverflow");
  expect_one_line_error(onnxptq("calibrate " + model + " --config NOPRESET --random 1"),
                        "--config 'NOPRESET' is neither a preset nor a readable file");
}

}  // namespace
}  // namespace onnxptq::cli_test
