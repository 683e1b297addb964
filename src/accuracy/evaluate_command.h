// The user's own metric for the accuracy-target search: a command that scores a model file and
// prints the score as the last line of its standard output (`--evaluate-command 'CMD {model}'`).
#pragma once

#include <filesystem>
#include <string>

namespace onnxptq::accuracy {

struct CommandScore {
  double value = 0;
  double seconds = 0;
};

// Runs `command` through /bin/sh with every "{model}" replaced by `model`, shell-quoted (the path
// is appended after a space when the command has no "{model}"), for at most `timeout_seconds`
// (0: no limit). The last non-empty line of its standard output must be one number. Error, naming
// `trial`, the command and the end of its output, when it cannot start, exits with a non-zero
// status, dies by a signal, runs past the limit (it is killed, with its children) or prints no
// number.
CommandScore run_evaluate_command(const std::string& command, const std::filesystem::path& model,
                                  double timeout_seconds, const std::string& trial);

// `text` quoted for /bin/sh: 'text', with each ' written as '\''.
std::string shell_quote(const std::string& text);

}  // namespace onnxptq::accuracy
