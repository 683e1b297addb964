#include "accuracy/evaluate_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "onnxptq/error.h"

namespace onnxptq::accuracy {
namespace {

// The output kept for messages: the end of what the command printed.
constexpr size_t kTailBytes = 2000;

std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = text.find_last_of('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

// The end of the output on one line (an error is one line): line breaks become " | ".
std::string tail(const std::string& text) {
  std::string t = text.size() > kTailBytes ? "..." + text.substr(text.size() - kTailBytes) : text;
  size_t end = t.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "(nothing)";
  std::string one_line;
  for (size_t i = 0; i <= end; ++i) {
    if (t[i] == '\r') continue;
    one_line += t[i] == '\n' ? std::string(" | ") : std::string(1, t[i]);
  }
  return "'" + one_line + "'";
}

}  // namespace

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandScore run_evaluate_command(const std::string& command, const std::filesystem::path& model,
                                  double timeout_seconds, const std::string& trial) {
  std::string line = command;
  const std::string quoted = shell_quote(model.string());
  if (line.find("{model}") == std::string::npos) line += " " + quoted;
  for (size_t at; (at = line.find("{model}")) != std::string::npos;) line.replace(at, 7, quoted);
  const std::string what = trial + ": the evaluate command `" + line + "`";

  int out[2];
  if (pipe(out) != 0) throw Error(what + " cannot start: " + std::strerror(errno));
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    throw Error(what + " cannot start: " + std::strerror(errno));
  }
  if (pid == 0) {
    // Its own process group, so that a timeout kills what the shell started too. Standard error
    // joins standard output: the message on failure shows both.
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // also here: whichever runs first
  close(out[1]);

  std::string output;
  bool timed_out = false;
  char buffer[4096];
  for (;;) {
    int wait_ms = -1;
    if (timeout_seconds > 0) {
      double left = timeout_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(left * 1000) + 1;
    }
    pollfd p{out[0], POLLIN, 0};
    int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the loop's head sees the time is up
    ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of output: the command (and whatever kept the pipe) has finished
    output.append(buffer, static_cast<size_t>(n));
    if (output.size() > 4 * kTailBytes) output.erase(0, output.size() - 2 * kTailBytes);
  }
  close(out[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (timed_out) {
    std::ostringstream limit;
    limit << timeout_seconds;
    throw Error(what + " ran past its limit of " + limit.str() + " s and was stopped; its last output: " + tail(output));
  }
  if (WIFSIGNALED(status))
    throw Error(what + " died by signal " + std::to_string(WTERMSIG(status)) + "; its last output: " + tail(output));
  if (WEXITSTATUS(status) != 0)
    throw Error(what + " failed with exit status " + std::to_string(WEXITSTATUS(status)) +
                "; its last output: " + tail(output));
  std::string last = last_line(output);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(last.c_str(), &end);
  if (last.empty() || end != last.c_str() + last.size() || errno == ERANGE || !std::isfinite(value))
    throw Error(what + " printed no number as its last line; its last output: " + tail(output));
  return {value, seconds};
}

}  // namespace onnxptq::accuracy
