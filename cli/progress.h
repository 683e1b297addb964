// What a long command shows while it works: on a terminal, a progress bar redrawn in place on
// standard error (items done of how many, the rate, the time left), with the log lines printed
// above it; otherwise the log lines and, for each phase that runs over a second, a plain line at
// every tenth done; nothing at all when quiet.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

#include "onnxptq/progress.h"

namespace onnxptq::cli {

class ProgressDisplay {
 public:
  // `terminal`: standard error is one (isatty), so the bar may be redrawn in place.
  ProgressDisplay(bool quiet, bool terminal);
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  void line(const std::string& text);
  void update(const Progress& progress);

 private:
  void clear_bar();

  bool quiet_, terminal_;
  std::mutex mutex_;
  std::string phase_;  // the phase under way, or "" between phases
  std::chrono::steady_clock::time_point start_, last_draw_;
  size_t tenths_ = 0;  // plain lines: the last tenth printed
  bool bar_drawn_ = false;
};

// "1 min 05 s", "42 s", "1 h 05 min".
std::string format_duration(double seconds);

}  // namespace onnxptq::cli
