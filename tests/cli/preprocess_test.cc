// `onnxptq preprocess` as a user runs it: the PP-OCR classifier (opset 9) written at opset 13 and
// accepted by python3-onnx's checker, external data options, options refused by name, one-line
// errors with nothing written, and the input model never modified.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/cli_run.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kCls;

using cli_test::CliRun;
using cli_test::onnxptq;
using cli_test::run;
using cli_test::slurp;

class Preprocess : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_preprocess_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    input_ = dir_ / "cls.onnx";
    fs::copy_file(kCls, input_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // What python3-onnx reads from a file: opset, checker verdict, metadata, BatchNormalization count.
  std::string onnx_says(const fs::path& model) {
    std::string script =
        "import onnx,sys; m=onnx.load(sys.argv[1]); onnx.checker.check_model(m); "
        "print([o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0], "
        "{p.key: p.value for p in m.metadata_props}.get('onnx.quant.pre_process'), len(m.graph.node))";
    CliRun r = run("/usr/bin/python3 -c \"" + script + "\" " + model.string());
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }

  void expect_refused(const std::string& args, const std::string& message) {
    std::string before = slurp(input_);
    CliRun r = onnxptq("preprocess " + input_.string() + " -o " + (dir_ / "out.onnx").string() + " " + args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.onnx")) << args;
    EXPECT_EQ(slurp(input_), before) << "the input changed";
  }

  fs::path dir_, input_;
};

TEST_F(Preprocess, UpgradesTheClassifierToOpset13) {
  std::string before = slurp(input_);
  fs::path out = dir_ / "out.onnx";
  CliRun r = onnxptq("preprocess " + input_.string() + " -o " + out.string() + " --verbose");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("upgrade_opset: opset 9 -> 13"), std::string::npos) << r.err;
  std::string says = onnx_says(out);
  EXPECT_EQ(says.substr(0, says.find(' ')), "13") << says;
  EXPECT_NE(says.find("onnxruntime.quant"), std::string::npos) << says;
  EXPECT_EQ(slurp(input_), before) << "the input changed";
}

TEST_F(Preprocess, TargetOpset) {
  fs::path out = dir_ / "out.onnx";
  CliRun r =
      onnxptq("preprocess " + input_.string() + " -o " + out.string() + " --target-opset 15 --skip-optimization");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string says = onnx_says(out);
  EXPECT_EQ(says.substr(0, says.find(' ')), "15") << says;
}

TEST_F(Preprocess, ExternalData) {
  fs::path out = dir_ / "out.onnx";
  CliRun r = onnxptq("preprocess " + input_.string() + " -o " + out.string() +
                     " --skip-optimization --save-as-external-data --all-tensors-to-one-file"
                     " --external-data-location weights.bin --external-data-size-threshold 4096");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir_ / "weights.bin"));
  EXPECT_GT(fs::file_size(dir_ / "weights.bin"), 300000u);  // most of the 580 KB of weights
  EXPECT_LT(fs::file_size(out), fs::file_size(kCls));
  std::string says = onnx_says(out);
  EXPECT_EQ(says.substr(0, says.find(' ')), "13") << says;
}

TEST_F(Preprocess, RefusesWhatItDoesNotDo) {
  expect_refused("--auto-merge", "--auto-merge is not supported");
  expect_refused("--int-max 100", "--int-max is not supported");
  expect_refused("--save-as-external-data", "add --all-tensors-to-one-file");
  expect_refused("--external-data-location w.bin", "need --save-as-external-data");
  expect_refused("--save-as-external-data --all-tensors-to-one-file --external-data-location sub/w.bin",
                 "must be a file name");
  expect_refused("--passes fold_everything", "unknown pass 'fold_everything'");
  expect_refused("--target-opset 9", "--target-opset");
  expect_refused("--shape y=1x3x48x192", "not an input of the model");
}

// --guess-output-rank reaches the pass: an op nobody knows (its own domain) gets input 0's type
// and rank in the written value_info, as python3-onnx reads it; without the flag it gets none.
TEST_F(Preprocess, GuessOutputRank) {
  fs::path custom = dir_ / "custom.onnx";
  std::string make =
      "import onnx,sys; from onnx import helper as h, TensorProto as T; "
      "g=h.make_graph([h.make_node('Mystery',['x'],['c'],domain='my.custom'),h.make_node('Relu',['c'],['y'])],'g',"
      "[h.make_tensor_value_info('x',T.FLOAT,[1,3,4])],[h.make_tensor_value_info('y',T.FLOAT,None)]); "
      "onnx.save(h.make_model(g,opset_imports=[h.make_opsetid('',13),h.make_opsetid('my.custom',1)]),sys.argv[1])";
  ASSERT_EQ(run("/usr/bin/python3 -c \"" + make + "\" " + custom.string()).code, 0);
  std::string read =
      "import onnx,sys; m=onnx.load(sys.argv[1]); "
      "print([(v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim)) for v in m.graph.value_info "
      "if v.name=='c'])";
  for (bool guess : {false, true}) {
    fs::path out = dir_ / (guess ? "guessed.onnx" : "plain.onnx");
    CliRun r = onnxptq("preprocess " + custom.string() + " -o " + out.string() + " --skip-optimization" +
                       (guess ? " --guess-output-rank" : ""));
    ASSERT_EQ(r.code, 0) << r.err;
    CliRun says = run("/usr/bin/python3 -c \"" + read + "\" " + out.string());
    EXPECT_EQ(says.out, guess ? "[(1, 3)]\n" : "[]\n") << says.err;
  }
}

TEST_F(Preprocess, NeverWritesOverItsInput) {
  std::string before = slurp(input_);
  CliRun r = onnxptq("preprocess " + input_.string() + " -o " + input_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is the input model"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(input_), before);
}

TEST_F(Preprocess, BadModelIsOneLineAndWritesNothing) {
  fs::path bad = dir_ / "bad.onnx";
  std::ofstream(bad) << "not a model";
  CliRun r = onnxptq("preprocess " + bad.string() + " -o " + (dir_ / "out.onnx").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
}

// optimize_model (the default) runs the same preparation inside `quantize`: the opset-9
// classifier quantizes, at opset 13; --no-optimize-model quantizes the model as given, which QDQ
// refuses at opset 9.
TEST_F(Preprocess, QuantizeRunsThePreparationUnlessTurnedOff) {
  fs::path out = dir_ / "q.onnx";
  std::string common = "quantize " + input_.string() + " -o " + out.string() +
                       " --random 2 --random-shape x=1x3x48x192 --calibrate-method MinMax --quiet";
  CliRun r = onnxptq(common);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string says = onnx_says(out);
  EXPECT_EQ(says.substr(0, says.find(' ')), "13") << says;
  fs::remove(out);
  r = onnxptq(common + " --no-optimize-model");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("opset 9"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace onnxptq
