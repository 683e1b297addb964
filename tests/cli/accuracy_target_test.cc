// `onnxptq quantize` with an accuracy target, as a user runs it: the user's evaluate command,
// what is refused, what a missed target looks like.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "ir/model.h"
#include "support/cli_run.h"
#include "support/pass_check.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using cli_test::CliRun;
using cli_test::expect_one_line_error;
using cli_test::onnxptq;
using cli_test::slurp;

class AccuracyTargetCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("onnxptq_accuracy_target_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // x[1,3,6,6] -> Conv -> Relu -> Conv -> y
    ir::Model m;
    m.set_opset("", 13);
    ir::Graph& g = *m.graph;
    ir::Value* x = testing::add_float_value(g, "x", {1, 3, 6, 6});
    g.add_input(x);
    ir::Value* a = g.add_value("a");
    ir::Value* r = g.add_value("r");
    ir::Value* y = g.add_value("y");
    g.add_node("Conv", {x, testing::add_random_initializer(g, "w1", {4, 3, 1, 1}, 1)}, {a}, "conv1");
    g.add_node("Relu", {a}, {r}, "relu");
    g.add_node("Conv", {r, testing::add_random_initializer(g, "w2", {2, 4, 1, 1}, 2)}, {y}, "conv2");
    g.add_output(y);
    ir::save_model(m, dir_ / "m.onnx");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // `onnxptq quantize m.onnx -o out.onnx --random 8 ARGS`
  static CliRun quantize(const std::string& args) {
    fs::remove(out());
    return onnxptq("quantize " + model() + " -o " + out().string() + " --random 8 --calibrate-method MinMax " + args);
  }
  static std::string model() { return (dir_ / "m.onnx").string(); }
  static fs::path out() { return dir_ / "out.onnx"; }

  static fs::path dir_;
};
fs::path AccuracyTargetCli::dir_;

TEST_F(AccuracyTargetCli, BuiltInMetricSearchesAndReportsEveryTrial) {
  fs::path report = dir_ / "report.json";
  CliRun r = quantize("--min-sqnr 10 --report " + report.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("trial 1 (recipe: as configured): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("accuracy target met by trial"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out()));
  nlohmann::json j = nlohmann::json::parse(slurp(report));
  const nlohmann::json& search = j.at("accuracy_target");
  EXPECT_TRUE(search.at("met"));
  EXPECT_EQ(search.at("required"), 10);
  EXPECT_GE(search.at("trials").size(), 1u);
  EXPECT_EQ(search.at("node_precision").at("relu").is_string() || search.at("node_precision").at("relu").is_object(),
            true);
}

TEST_F(AccuracyTargetCli, AMissedTargetWritesTheBestModelAndExitsOne) {
  // The float model scores 1, every candidate 0: no trial can meet a loss of 0.5.
  std::string command = "test {model} = " + model() + " && echo 1 || echo 0";
  CliRun r = quantize("--evaluate-command '" + command + "' --max-loss 0.5 --max-trials 2");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("accuracy target missed by trial 1 of 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missed by 0.5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the trial limit (2) is reached"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out()));
}

TEST_F(AccuracyTargetCli, AFailingEvaluateCommandNamesTheTrial) {
  std::string fails = "test {model} = " + model() + " && echo 1 || (echo scorer broke >&2; exit 3)";
  CliRun r = quantize("--evaluate-command '" + fails + "' --max-loss 0.1 --quiet");
  expect_one_line_error(r, "trial 1: the evaluate command");
  EXPECT_NE(r.err.find("exit"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out()));

  r = quantize("--evaluate-command 'echo no number here' --max-loss 0.1 --quiet");
  expect_one_line_error(r, "the float model: the evaluate command");
  // What the command printed over several lines stays on the error's one line.
  r = quantize("--evaluate-command 'echo first line; echo second line; exit 4' --max-loss 0.1 --quiet");
  expect_one_line_error(r, "the float model: the evaluate command");
  EXPECT_NE(r.err.find("first line | second line"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out()));

  r = quantize("--evaluate-command 'sleep 30; echo {model}' --evaluate-timeout 0.5 --max-loss 0.1 --quiet");
  expect_one_line_error(r, "the float model: the evaluate command");
  EXPECT_NE(r.err.find("0.5"), std::string::npos) << r.err;
}

TEST_F(AccuracyTargetCli, OptionsThatCannotWorkAreRefusedByName) {
  expect_one_line_error(quantize("--max-trials 3"), "--max-trials belongs to the accuracy target search");
  expect_one_line_error(quantize("--evaluate-command 'echo 1'"), "an evaluate function belongs to an accuracy target");
  expect_one_line_error(quantize("--max-loss 0.1"), "max_loss and max_relative_loss need an evaluate command");
  expect_one_line_error(quantize("--min-sqnr 20 --fallback-type int8"), "fallback type 'int8': expected float, int16 or bfloat16");
  expect_one_line_error(quantize("--min-sqnr 20 --fallback-type bfloat16"),
                        "NodePrecision['(a node falling back)']: bfloat16 needs ExtendedQuantFormat.QDQ");
  expect_one_line_error(quantize("--min-sqnr 20 --fallback-order best"), "fallback order 'best'");
  expect_one_line_error(quantize("--min-sqnr 20 --lower-is-better"), "--lower-is-better is about --evaluate-command");
  EXPECT_EQ(quantize("--min-sqnr 20 --max-loss 0.1").code, 2);  // two targets
  EXPECT_FALSE(fs::exists(out()));
}

TEST_F(AccuracyTargetCli, SensitivityWritesEveryFormat) {
  fs::path json = dir_ / "s.json", csv = dir_ / "s.csv", html = dir_ / "s.html";
  CliRun r = onnxptq("sensitivity " + model() + " --random 4 --calibrate-method MinMax --samples 3 --left-float --json " +
                     json.string() + " --csv " + csv.string() + " --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("whole model quantized: output SQNR"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j.at("samples"), 3);
  std::set<std::string> nodes;
  for (const auto& n : j.at("nodes")) nodes.insert(n.at("node").get<std::string>());
  EXPECT_TRUE(nodes.count("conv1") && nodes.count("conv2")) << j.dump();
  for (const auto& n : j.at("nodes")) {
    if (n.at("op_type") == "Conv") {
      EXPECT_TRUE(n.at("left_float").is_object()) << n.dump();
    }
    EXPECT_TRUE(n.at("weight").is_null()) << "measured with --split only: " << n.dump();
  }
  std::string table = slurp(csv);
  EXPECT_EQ(table.rfind("node,op_type,alone_sqnr_db", 0), 0u);
  EXPECT_EQ(static_cast<size_t>(std::count(table.begin(), table.end(), '\n')), j.at("nodes").size() + 1);
  EXPECT_NE(slurp(html).find("<svg"), std::string::npos);
  EXPECT_EQ(slurp(html).find("its weight only"), std::string::npos);

  r = onnxptq("sensitivity " + model() + " --random 4 --calibrate-method MinMax --samples 3 --split --json " +
              json.string() + " --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("weight dB"), std::string::npos) << r.out;
  nlohmann::json split = nlohmann::json::parse(slurp(json));
  for (const auto& n : split.at("nodes")) {
    if (n.at("op_type") == "Conv") {
      EXPECT_TRUE(n.at("weight").at("sqnr_db").is_number()) << n.dump();
    }
  }
  EXPECT_NE(slurp(html).find("its weight only"), std::string::npos);

  expect_one_line_error(onnxptq("sensitivity " + model() + " --random 1 --samples 0"), "--samples must be at least 1");
  expect_one_line_error(onnxptq("sensitivity " + model() + " --random 1 --json " + model()),
                        "--json");
}

}  // namespace
}  // namespace onnxptq
