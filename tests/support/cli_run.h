// Test support: run a command (the onnxptq command, or a script) and keep its exit code and output.
#pragma once

#include <filesystem>
#include <string>

namespace onnxptq::cli_test {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

// The whole file, or "" when it cannot be read.
std::string slurp(const std::filesystem::path& path);
// `command` through the shell, standard input from /dev/null.
CliRun run(const std::string& command);
// The onnxptq command built with the tests, with `args`.
CliRun onnxptq(const std::string& args);

// A bad invocation: exit 2, nothing on standard output, and exactly one line on standard error,
// starting with "error: " and `expected_start`.
void expect_one_line_error(const CliRun& r, const std::string& expected_start);

}  // namespace onnxptq::cli_test
