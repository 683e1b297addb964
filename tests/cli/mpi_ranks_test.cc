// Calibration shared by processes: `mpirun -np N onnxptq calibrate|quantize|sensitivity` and the
// shard files of `calibrate --shard i/N --save-stats` with `merge-stats` give the bytes one
// process gives, for every method; a failing rank ends the job naming itself and the sample;
// bad shard files are refused in one line naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_run.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using cli_test::CliRun;
using cli_test::expect_one_line_error;
using cli_test::onnxptq;
using cli_test::run;
using cli_test::slurp;

// Each method's options, and whether it scores candidates in a second pass over the first merged
// (its shards then run twice: first passes, merged, then second passes on that).
struct RanksMethod {
  const char* options;
  bool one_pass;
};
const std::vector<RanksMethod> kRanksMethods = {
    {"--method MinMax", true},
    {"--method MinMax --moving-average", true},
    {"--method Entropy", true},
    {"--method Percentile", true},
    {"--method Percentile --symmetric false", true},
    {"--method Distribution", true},
    {"--method Distribution --scenario p3", true},
    {"--method NonOverflow", true},
    {"--method NonOverflow --moving-average", true},
    {"--method MinMSE", false},
    {"--method MinMSE --symmetric false", false},
    {"--method MinMSE --minmse-mode MostCommon", true},
    {"--method LayerWisePercentile", false},
};

class CalibrationRanks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("onnxptq_ranks_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "samples");
    // Seven samples (three ranks take 3, 2, 2) of heavy-tailed values growing from sample to
    // sample, so that ranges, moving averages and histogram grids differ between the shares.
    std::ofstream(dir_ / "make.py") << R"(import numpy as np, onnx, sys
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
rng = np.random.default_rng(7)
w1 = rng.normal(size=(64, 32)).astype(np.float32) * 0.3
b1 = rng.normal(size=(32,)).astype(np.float32)
w2 = rng.normal(size=(32, 16)).astype(np.float32) * 0.3
g = helper.make_graph([
    helper.make_node('MatMul', ['x', 'w1'], ['h']), helper.make_node('Add', ['h', 'b1'], ['a']),
    helper.make_node('Relu', ['a'], ['r']), helper.make_node('MatMul', ['r', 'w2'], ['m']),
    helper.make_node('Tanh', ['m'], ['t']), helper.make_node('Mul', ['t', 'm'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [8, 64])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [8, 16])],
    [numpy_helper.from_array(w1, 'w1'), numpy_helper.from_array(b1, 'b1'), numpy_helper.from_array(w2, 'w2')])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/m.onnx')
g.node[5].op_type = 'Add'
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), d + '/other.onnx')
for i in range(7):
    np.save(d + '/samples/s%02d.npy' % i, rng.standard_t(3, size=(8, 64)).astype(np.float32) * (1 + i))
)";
    ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir_ / "make.py").string() + " " + dir_.string()).c_str()), 0);
    model_ = (dir_ / "m.onnx").string();
    samples_ = (dir_ / "samples").string();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string path(const std::string& name) { return (dir_ / name).string(); }

  // `args` of onnxptq under mpirun with `ranks` processes on this machine (--oversubscribe: more
  // ranks than cores; --bind-to none: the ranks share the cores; as root, OpenMPI wants
  // --allow-run-as-root), ended after 60 s so that a hang fails the test (exit 124). Run again
  // once when OpenMPI's launcher reports a rank "with PID 0" exiting improperly: its false report
  // on a loaded machine, after the ranks finalized (open-mpi/ompi issues 9389 and 12607).
  static CliRun over_ranks(int ranks, const std::string& args) {
#ifdef ONNXPTQ_CLI_WITH_MPI
    const std::string root = geteuid() == 0 ? " --allow-run-as-root" : "";
    const std::string command = "timeout 60 " ONNXPTQ_MPIEXEC " --oversubscribe --bind-to none" + root + " -np " +
                                std::to_string(ranks) + " " ONNXPTQ_CLI " " + args;
    CliRun r = run(command);
    if (r.code != 0 && r.err.find("with PID 0 on") != std::string::npos &&
        r.err.find("exiting improperly") != std::string::npos)
      r = run(command);
    return r;
#else
    return {-1, "", "built without MPI"};
#endif
  }

  // The ranges one process writes with `options`.
  static std::string one_process(const std::string& options) {
    CliRun r = onnxptq("calibrate " + model_ + " --calib-data " + samples_ + " --quiet -o " + path("one.json") + " " +
                       options);
    EXPECT_EQ(r.code, 0) << options << "\n" << r.err;
    return slurp(path("one.json"));
  }

  static fs::path dir_;
  static std::string model_, samples_;
};

fs::path CalibrationRanks::dir_;
std::string CalibrationRanks::model_, CalibrationRanks::samples_;

#ifdef ONNXPTQ_CLI_WITH_MPI
constexpr bool kRanksBuiltWithMpi = true;
#else
constexpr bool kRanksBuiltWithMpi = false;
#endif
// Tests of mpirun are skipped, saying so, when the command was built without MPI.
#define SKIP_WITHOUT_MPI() \
  if (!kRanksBuiltWithMpi) GTEST_SKIP() << "onnxptq was built without MPI (libopenmpi-dev)"

// Every method over 2 and 3 ranks (one engine thread each): the ranges one process writes, byte
// for byte; rank 0 alone says how many ranks ran how many samples.
TEST_F(CalibrationRanks, EveryMethodOverTwoAndThreeRanksGivesTheOneProcessBytes) {
  SKIP_WITHOUT_MPI();
  for (const RanksMethod& m : kRanksMethods) {
    const std::string want = one_process(m.options);
    ASSERT_FALSE(want.empty()) << m.options;
    for (int ranks : {2, 3}) {
      fs::remove(path("ranks.json"));
      CliRun r = over_ranks(ranks, "calibrate " + model_ + " --calib-data " + samples_ + " --threads 1 -o " +
                                       path("ranks.json") + " " + m.options);
      ASSERT_EQ(r.code, 0) << m.options << " over " << ranks << " ranks\n" << r.err;
      EXPECT_EQ(slurp(path("ranks.json")), want) << m.options << " over " << ranks << " ranks";
      const std::string line = ranks == 2 ? "calibration over 2 ranks: samples per rank 4, 3; statistics "
                                          : "calibration over 3 ranks: samples per rank 3, 2, 2; statistics ";
      const size_t at = r.err.find(line);
      EXPECT_NE(at, std::string::npos) << r.err;
      EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << "said by more than rank 0:\n" << r.err;
    }
  }
}

// quantize and sensitivity over ranks: the model and the report one process writes.
TEST_F(CalibrationRanks, QuantizeAndSensitivityOverRanksGiveTheOneProcessBytes) {
  SKIP_WITHOUT_MPI();
  const std::string data = " --calib-data " + samples_ + " --threads 1 --calibrate-method MinMSE ";
  ASSERT_EQ(onnxptq("quantize " + model_ + data + "--quiet -o " + path("q1.onnx")).code, 0);
  CliRun q = over_ranks(3, "quantize " + model_ + data + "-o " + path("q3.onnx"));
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(slurp(path("q3.onnx")), slurp(path("q1.onnx")));
  EXPECT_NE(q.err.find("calibration over 3 ranks: samples per rank 3, 2, 2"), std::string::npos) << q.err;

  ASSERT_EQ(onnxptq("sensitivity " + model_ + data + "--quiet --json " + path("s1.json")).code, 0);
  CliRun s = over_ranks(2, "sensitivity " + model_ + data + "--quiet --json " + path("s2.json"));
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(slurp(path("s2.json")), slurp(path("s1.json")));

  // Fast finetune trains in one process: refused by name, not run N times.
  CliRun ft = over_ranks(2, "quantize " + model_ + data + "--quiet --include-fast-ft -o " + path("ft.onnx"));
  EXPECT_NE(ft.code, 0);
  EXPECT_NE(ft.code, 124) << "a hang";
  EXPECT_NE(ft.err.find("error: include_fast_ft: fast finetune trains in one process"), std::string::npos) << ft.err;
  EXPECT_FALSE(fs::exists(path("ft.onnx")));
}

// A sample that does not fit the model, in rank 1's share (samples 3 and 4 of 7 over 3 ranks):
// the job ends (MPI_Abort; the 60 s timeout fails the test on a hang) with the rank and the
// sample named, and nothing written.
TEST_F(CalibrationRanks, AFailingRankEndsTheJobNamingRankAndSample) {
  SKIP_WITHOUT_MPI();
  fs::create_directories(dir_ / "bad");
  for (const auto& e : fs::directory_iterator(dir_ / "samples"))
    fs::copy_file(e.path(), dir_ / "bad" / e.path().filename(), fs::copy_options::overwrite_existing);
  ASSERT_EQ(run("/usr/bin/python3 -c \"import numpy as np; np.save('" + path("bad/s04.npy") +
                "', np.zeros((8, 5), np.float32))\"")
                .code,
            0);
  CliRun r =
      over_ranks(3, "calibrate " + model_ + " --calib-data " + path("bad") + " --threads 1 -o " + path("bad.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "a hang";
  EXPECT_NE(r.err.find("rank 1 of 3: error: calibration sample 4 of folder " + path("bad") +
                       " (7 files): input 'x': expected shape float[8,64], got [8,5]"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("bad.json")));
}

// Commands that do not share samples refuse to run N times; so do shard files under mpirun.
TEST_F(CalibrationRanks, CommandsThatDoNotShareRefuseToRunOverRanks) {
  SKIP_WITHOUT_MPI();
  CliRun r = over_ranks(2, "inspect " + model_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("error: onnxptq inspect does not share its work over MPI ranks, and 2 processes were "
                       "started"),
            std::string::npos)
      << r.err;
  CliRun shard = over_ranks(
      2, "calibrate " + model_ + " --calib-data " + samples_ + " --shard 0/2 --save-stats " + path("s.stats"));
  EXPECT_NE(shard.code, 0);
  EXPECT_NE(shard.err.find("error: --shard and --save-stats run one share apart"), std::string::npos) << shard.err;
  EXPECT_FALSE(fs::exists(path("s.stats")));
}

// The launcher's process count is read without MPI too: a command that does not share samples
// refuses before starting MPI (and a build without MPI refuses every command under mpirun).
TEST_F(CalibrationRanks, UnderALauncherOfSeveralProcessesOthersRefuse) {
  expect_one_line_error(run("OMPI_COMM_WORLD_SIZE=3 " ONNXPTQ_CLI " inspect " + model_),
                        "onnxptq inspect does not share its work over MPI ranks, and 3 processes were started");
#ifndef ONNXPTQ_CLI_WITH_MPI
  expect_one_line_error(run("PMI_SIZE=2 " ONNXPTQ_CLI " calibrate " + model_ + " --calib-data " + samples_),
                        "this onnxptq was built without MPI");
#endif
}

// Shard files: each shard run apart, merged in any order, gives the one process's bytes, for
// every method; those that score candidates after merging run each shard twice, the second time
// on the first passes merged.
TEST_F(CalibrationRanks, ShardFilesMergedGiveTheOneProcessBytes) {
  for (const RanksMethod& m : kRanksMethods) {
    const std::string want = one_process(m.options);
    auto run_shards = [&](const std::string& prefix, const std::string& extra) {
      for (size_t i = 0; i < 3; ++i) {
        const std::string file = path(prefix + std::to_string(i) + ".stats");
        fs::remove(file);
        CliRun r = onnxptq("calibrate " + model_ + " --calib-data " + samples_ + " --quiet --shard " +
                           std::to_string(i) + "/3 --save-stats " + file + " " + extra + m.options);
        ASSERT_EQ(r.code, 0) << m.options << "\n" << r.err;
      }
    };
    const std::string shuffled = " " + path("s2.stats") + " " + path("s0.stats") + " " + path("s1.stats");
    fs::remove(path("merged.json"));
    run_shards("s", "");
    if (m.one_pass) {
      CliRun merged = onnxptq("merge-stats" + shuffled + " --quiet -o " + path("merged.json"));
      ASSERT_EQ(merged.code, 0) << m.options << "\n" << merged.err;
    } else {
      fs::remove(path("first.stats"));
      CliRun first = onnxptq("merge-stats" + shuffled + " -o " + path("first.stats"));
      ASSERT_EQ(first.code, 0) << m.options << "\n" << first.err;
      EXPECT_NE(first.err.find("next, each shard's second pass"), std::string::npos) << first.err;
      run_shards("t", "--first-pass " + path("first.stats") + " ");
      CliRun merged = onnxptq("merge-stats --first-pass " + path("first.stats") + " " + path("t1.stats") + " " +
                              path("t2.stats") + " " + path("t0.stats") + " --quiet -o " + path("merged.json"));
      ASSERT_EQ(merged.code, 0) << m.options << "\n" << merged.err;
      // The passes out of turn: one line naming the file.
      expect_one_line_error(onnxptq("merge-stats " + path("t0.stats") + " " + path("t1.stats") + " " +
                                    path("t2.stats") + " -o " + path("x.json")),
                            path("t0.stats") + ": a second pass: give the merged first pass it ran on");
      expect_one_line_error(onnxptq("merge-stats " + path("first.stats") + " -o " + path("x.json")),
                            path("first.stats") + ": the merged first pass of 3 shards, not a shard");
      expect_one_line_error(onnxptq("merge-stats" + shuffled), "these are first passes");
      expect_one_line_error(onnxptq("merge-stats --first-pass " + path("first.stats") + " " + path("t0.stats") + " " +
                                    path("s1.stats") + " " + path("t2.stats") + " -o " + path("x.json")),
                            path("s1.stats") + ": a first pass, unlike " + path("t0.stats"));
      EXPECT_FALSE(fs::exists(path("x.json")));
    }
    EXPECT_EQ(slurp(path("merged.json")), want) << m.options;
  }
}

// Shard files that do not belong together, or are not whole: one line naming the file; nothing
// written.
TEST_F(CalibrationRanks, BadShardFilesAreRefusedNamingTheFile) {
  auto shard = [&](const std::string& file, const std::string& which, const std::string& options,
                   const std::string& model) {
    CliRun r = onnxptq("calibrate " + model + " --calib-data " + samples_ + " --quiet --shard " + which +
                       " --save-stats " + path(file) + " " + options);
    ASSERT_EQ(r.code, 0) << r.err;
  };
  for (int i = 0; i < 3; ++i) shard("p" + std::to_string(i), std::to_string(i) + "/3", "--method Entropy", model_);
  shard("other_method", "1/3", "--method Percentile", model_);
  shard("other_model", "1/3", "--method Entropy", path("other.onnx"));
  shard("other_count", "1/2", "--method Entropy", model_);
  const std::string p0 = path("p0"), p1 = path("p1"), p2 = path("p2"), out = path("bad_merge.json");
  auto merge = [&](const std::string& files) { return onnxptq("merge-stats " + files + " -o " + out); };

  expect_one_line_error(merge(p0 + " " + p1), "merge-stats: shard 2 of 3 is missing (2 files given)");
  expect_one_line_error(merge(p0 + " " + p1 + " " + p2 + " " + p1), p1 + ": shard 1 of 3 again (also " + p1 + ")");
  expect_one_line_error(merge(p0 + " " + path("other_method") + " " + p2),
                        path("other_method") + ": other calibration options");
  expect_one_line_error(merge(p0 + " " + path("other_model") + " " + p2), path("other_model") + ": another model");
  expect_one_line_error(merge(p0 + " " + path("other_count") + " " + p2),
                        path("other_count") + ": one of 2 shards, unlike " + p0);

  const std::string bytes = slurp(p1);
  std::ofstream(path("truncated"), std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  expect_one_line_error(merge(p0 + " " + path("truncated") + " " + p2), path("truncated") + ": ");
  EXPECT_NE(merge(p0 + " " + path("truncated") + " " + p2).err.find("truncated"), std::string::npos);
  std::string flipped = bytes;
  flipped[flipped.size() - 3] = static_cast<char>(flipped[flipped.size() - 3] ^ 0x10);
  std::ofstream(path("corrupt"), std::ios::binary) << flipped;
  expect_one_line_error(merge(p0 + " " + path("corrupt") + " " + p2),
                        path("corrupt") + ": the statistics do not match their digest: the file is corrupt");
  std::string newer = bytes;
  newer.replace(newer.find("\"version\":1"), 11, "\"version\":9");
  std::ofstream(path("newer"), std::ios::binary) << newer;
  expect_one_line_error(merge(p0 + " " + path("newer") + " " + p2),
                        path("newer") + ": a shard file of version 9; this onnxptq reads version 1");
  std::ofstream(path("ranges.json")) << "{}\n";
  expect_one_line_error(merge(path("ranges.json")), path("ranges.json") + ": not a calibration shard file");
  EXPECT_FALSE(fs::exists(out));

  const std::string calibrate = "calibrate " + model_ + " --calib-data " + samples_ + " ";
  expect_one_line_error(onnxptq(calibrate + "--shard 3/3 --save-stats " + path("x")),
                        "--shard 3/3: shards are numbered 0 to N-1 (0 to 2)");
  expect_one_line_error(onnxptq(calibrate + "--shard 1of3 --save-stats " + path("x")),
                        "--shard must be i/N (shard i of N, from 0), got '1of3'");
  expect_one_line_error(onnxptq(calibrate + "--shard 1/3"), "--shard runs one share of the samples: it needs");
  expect_one_line_error(onnxptq(calibrate + "--save-stats " + path("x")), "--save-stats writes one shard's");
  EXPECT_FALSE(fs::exists(path("x")));
}

}  // namespace
}  // namespace onnxptq
