// The model tools as a user runs them (`onnxptq remove-qdq`, `qdq-to-qop`, `fix-shapes`,
// `a8w8-npu-to-cpu`, `u16u8-to-u8u8`, `bias-int32-to-int16`, `lstm-to-customlstm`, `fp32-to-fp16`, `fp32-to-bf16`,
// `fp16-to-bf16`, `block-to-standard-ops`, `dump-model`): each writes a model that loads, and bad
// input (a missing file, a model without what the tool needs, a bad --fix-shapes, a refused
// format) ends in one line naming the model and what is wrong, with nothing written. ONNX Runtime
// runs what they write in tests/e2e/model_tools_vs_ort_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "support/cli_run.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using cli_test::CliRun;
using cli_test::expect_one_line_error;
using cli_test::onnxptq;

const fs::path kResnet = fs::path(ONNXPTQ_MODELS_DIR) / "resnet18.onnx";
using testing::kDet;

class ModelToolsCliRealModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("onnxptq_model_tools_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A QDQ model (uint8 activations, int32 biases) and an A8W8 NPU one (8-bit biases).
    CliRun q = onnxptq("quantize " + kResnet.string() + " -o " + at("qdq.onnx") +
                       " --random 2 --calibrate-method MinMax --activation-type QUInt8 --quiet");
    ASSERT_EQ(q.code, 0) << q.err;
    CliRun npu = onnxptq("quantize " + kResnet.string() + " -o " + at("npu.onnx") +
                         " --random 2 --config A8W8 --extra-option Int32Bias=false --quiet");
    ASSERT_EQ(npu.code, 0) << npu.err;
    CliRun u16 =
        onnxptq("quantize " + kResnet.string() + " -o " + at("u16.onnx") +
                " --random 2 --calibrate-method MinMax --activation-type QUInt16 --weight-type QUInt8 --quiet");
    ASSERT_EQ(u16.code, 0) << u16.err;
    CliRun mx9 = onnxptq("quantize " + kResnet.string() + " -o " + at("mx9.onnx") + " --random 1 --config MX9 --quiet");
    ASSERT_EQ(mx9.code, 0) << mx9.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string at(const std::string& name) { return (dir_ / name).string(); }

  // `onnxptq TOOL MODEL -o OUT ARGS`: the run, and whether OUT was written (then removed).
  static CliRun tool(const std::string& tool, const std::string& model, const std::string& args, bool& written) {
    fs::path out = dir_ / "out.onnx";
    fs::remove(out);
    CliRun r = onnxptq(tool + " " + model + " -o " + out.string() + " " + args);
    written = fs::exists(out);
    return r;
  }

  static fs::path dir_;
};
fs::path ModelToolsCliRealModels::dir_;

TEST_F(ModelToolsCliRealModels, EachToolWritesItsModel) {
  struct Case {
    std::string tool, model, args, says;
  };
  const std::vector<Case> cases = {
      {"remove-qdq", at("qdq.onnx"), "", "quantize/dequantize pairs"},
      {"qdq-to-qop", at("qdq.onnx"), "", "QLinearConv 20"},
      {"fix-shapes", kDet.string(), "--fix-shapes 'x:[1,3,64,64]'", "tensor shapes stored"},
      {"a8w8-npu-to-cpu", at("npu.onnx"), "", "biases made int32"},
      {"u16u8-to-u8u8", at("u16.onnx"), "", "uint16 activations made uint8"},
      {"bias-int32-to-int16", at("qdq.onnx"), "", "int32 biases stored as int16"},
      {"fp32-to-fp16", kResnet.string(), "--keep-io-types", "values made float16"},
      {"fp32-to-bf16", kResnet.string(), "--format simulate_bf16", "bfloat16 tensors"},
      {"block-to-standard-ops", at("mx9.onnx"), "", "block nodes written in standard ops"},
  };
  for (const Case& c : cases) {
    bool written = false;
    CliRun r = tool(c.tool, c.model, c.args, written);
    EXPECT_EQ(r.code, 0) << c.tool << ": " << r.err;
    EXPECT_TRUE(written) << c.tool;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.tool << ": " << r.err;
    EXPECT_NE(r.err.find("written to"), std::string::npos) << c.tool;
    CliRun inspect = onnxptq("inspect " + at("out.onnx"));
    EXPECT_EQ(inspect.code, 0) << c.tool << ": " << inspect.err;
  }
}

TEST_F(ModelToolsCliRealModels, AModelWithoutWhatTheToolNeedsIsRefusedByName) {
  struct Case {
    std::string tool, model, args, error;
  };
  const std::string resnet = kResnet.string();
  const std::vector<Case> cases = {
      {"remove-qdq", resnet, "", resnet + ": the model has no QuantizeLinear or FixNeuron node"},
      {"qdq-to-qop", resnet, "", resnet + ": the model has no QuantizeLinear or DequantizeLinear node"},
      {"a8w8-npu-to-cpu", at("qdq.onnx"), "", at("qdq.onnx") + ": no Conv, ConvTranspose or Gemm reads"},
      {"a8w8-npu-to-cpu", resnet, "", resnet + ": the model has no DequantizeLinear node"},
      {"u16u8-to-u8u8", at("qdq.onnx"), "", at("qdq.onnx") + ": the model has no uint16 activation"},
      {"bias-int32-to-int16", resnet, "", resnet + ": the model has no int32 bias"},
      {"bias-int32-to-int16", at("npu.onnx"), "", at("npu.onnx") + ": the model has no int32 bias"},
      {"fp16-to-bf16", resnet, "", resnet + ": fp16_to_bf16: the model has no float16 input"},
      {"lstm-to-customlstm", resnet, "", resnet + ": the model has no LSTM node (in its main graph)"},
      {"block-to-standard-ops", at("qdq.onnx"), "",
       at("qdq.onnx") + ": the model has no com.amd.quark BFPQuantizeDequantize or MXQuantizeDequantize node"},
      {"remove-qdq", at("missing.onnx"), "", at("missing.onnx") + ": no such file"},
      {"fp32-to-fp16", at("missing.onnx"), "", at("missing.onnx") + ": no such file"},
  };
  for (const Case& c : cases) {
    bool written = false;
    CliRun r = tool(c.tool, c.model, c.args, written);
    expect_one_line_error(r, c.error);
    EXPECT_FALSE(written) << c.tool;
  }
  // Never over the input model.
  std::string before = cli_test::slurp(at("qdq.onnx"));
  expect_one_line_error(onnxptq("qdq-to-qop " + at("qdq.onnx") + " -o " + at("qdq.onnx")),
                        "--output '" + at("qdq.onnx") + "' is the input model");
  EXPECT_EQ(cli_test::slurp(at("qdq.onnx")), before);
}

TEST_F(ModelToolsCliRealModels, BadFixShapesNamesTheEntry) {
  struct Case {
    std::string shapes, error;
  };
  const std::vector<Case> cases = {
      {"x:1,3,64,64", "fix_shapes: 'x:1,3,64,64' for 'x' is not NAME:[d1,d2,...] with whole dims of 1 or more"},
      {"x:[1,3,0,64]", "fix_shapes: 'x:[1,3,0,64]' for 'x' is not NAME:[d1,d2,...]"},
      {"x:[1,3,a,64]", "fix_shapes: 'x:[1,3,a,64]' for 'x' is not NAME:[d1,d2,...]"},
      {"[1,3,64,64]", "fix_shapes: '[1,3,64,64]' is not NAME:[d1,d2,...]"},
      {"x:[1,3,64,64];x:[1,3,32,32]", "fix_shapes: 'x' is given twice"},
      {"", kDet.string() + ": fix_shapes: input 'x' is float[p2o.DynamicDimension.0,3,p2o.DynamicDimension.1,"
                           "p2o.DynamicDimension.2], not fixed: give its shape (x:[d1,d2,...])"},
      {"image:[1,3,64,64]", kDet.string() + ": fix_shapes: 'image' is neither an input nor an output of the model"},
      {"x:[1,3,64]", kDet.string() + ": fix_shapes: input 'x' is given [1,3,64] (rank 3); the model says float["},
      {"x:[1,4,64,64]", kDet.string() + ": fix_shapes: input 'x' is given [1,4,64,64]; the model fixes dim 1 to 3"},
      {"x:[1,3,64,64];sigmoid_0.tmp_0:[1,1,32,32]",
       kDet.string() + ": fix_shapes: output 'sigmoid_0.tmp_0' is given [1,1,32,32]; with the inputs fixed the model "
                       "computes [1,1,64,64]"},
  };
  for (const Case& c : cases) {
    bool written = false;
    CliRun r = tool("fix-shapes", kDet.string(), "--fix-shapes '" + c.shapes + "'", written);
    expect_one_line_error(r, c.error);
    EXPECT_FALSE(written) << c.shapes;
  }
}

TEST_F(ModelToolsCliRealModels, Bf16FormatsAreNamedOrRefused) {
  bool written = false;
  CliRun r = tool("fp32-to-bf16", kResnet.string(), "--format bf16", written);
  EXPECT_EQ(r.code, 3) << r.err;  // asked for what onnxptq does not do
  EXPECT_EQ(r.err.rfind("error: format 'bf16' (every tensor retyped bfloat16) is not built", 0), 0u) << r.err;
  EXPECT_FALSE(written);
  expect_one_line_error(tool("fp32-to-bf16", kResnet.string(), "--format bf17", written),
                        "format 'bf17' is not one of with_cast, customqdq, simulate_bf16, bf16");
  EXPECT_FALSE(written);
}

TEST_F(ModelToolsCliRealModels, DumpModelWritesTheQuantizedTensors) {
  fs::path out = dir_ / "dump";
  CliRun r = onnxptq("dump-model " + at("qdq.onnx") + " --output-dir " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("quantized tensors written to " + out.string()), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out / "input_DequantizeLinear_Output.bin"));
  EXPECT_TRUE(fs::exists(out / "input_DequantizeLinear_Output.txt"));
  EXPECT_FALSE(fs::exists(out / "input_DequantizeLinear_Output_float.bin"));
  // A float model: nothing quantized to dump, unless the floats are asked for.
  expect_one_line_error(onnxptq("dump-model " + kResnet.string() + " --output-dir " + (dir_ / "none").string()),
                        kResnet.string() + ": the model has no DequantizeLinear or FixNeuron node");
  EXPECT_FALSE(fs::exists(dir_ / "none"));
  CliRun floats = onnxptq("dump-model " + kResnet.string() + " --dump-float --output-dir " + (dir_ / "f").string());
  EXPECT_EQ(floats.code, 0) << floats.err;
  EXPECT_EQ(floats.err.rfind("warning: the model has no DequantizeLinear or FixNeuron node", 0), 0u) << floats.err;
  EXPECT_TRUE(fs::exists(dir_ / "f" / "output_float.bin"));
}

}  // namespace
}  // namespace onnxptq
