#include "support/cli_run.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace onnxptq::cli_test {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

CliRun run(const std::string& command) {
  fs::path dir = fs::temp_directory_path();
  std::string tag = std::to_string(getpid());
  fs::path out = dir / ("onnxptq_cli_out_" + tag), err = dir / ("onnxptq_cli_err_" + tag);
  int status = std::system((command + " >" + out.string() + " 2>" + err.string() + " </dev/null").c_str());
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out), slurp(err)};
  fs::remove(out);
  fs::remove(err);
  return r;
}

CliRun onnxptq(const std::string& args) { return run(std::string(ONNXPTQ_CLI) + " " + args); }

void expect_one_line_error(const CliRun& r, const std::string& expected_start) {
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.rfind("error: " + expected_start, 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace onnxptq::cli_test
