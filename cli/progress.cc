#include "cli/progress.h"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace onnxptq::cli {

std::string format_duration(double seconds) {
  const long s = std::lround(seconds);
  std::ostringstream out;
  if (s >= 3600)
    out << s / 3600 << " h " << std::setw(2) << std::setfill('0') << (s % 3600) / 60 << " min";
  else if (s >= 60)
    out << s / 60 << " min " << std::setw(2) << std::setfill('0') << s % 60 << " s";
  else
    out << s << " s";
  return out.str();
}

ProgressDisplay::ProgressDisplay(bool quiet, bool terminal) : quiet_(quiet), terminal_(terminal && !quiet) {}

ProgressDisplay::~ProgressDisplay() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bar_drawn_) std::cerr << "\n";
}

void ProgressDisplay::clear_bar() {
  if (!bar_drawn_) return;
  std::cerr << "\r\033[K";
  bar_drawn_ = false;
}

void ProgressDisplay::line(const std::string& text) {
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  clear_bar();
  std::cerr << (terminal_ ? "onnxptq: " : "") << text << "\n";
}

void ProgressDisplay::update(const Progress& p) {
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (p.phase != phase_ || p.done == 0) {
    phase_ = p.phase;
    start_ = now;
    tenths_ = 0;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const bool finished = p.total > 0 && p.done >= p.total;
  std::ostringstream text;
  text << p.phase;
  if (p.total > 0) {
    constexpr size_t kWidth = 24;
    const size_t filled = std::min(kWidth, p.done * kWidth / p.total);
    text << " [" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "]";
  }
  text << " " << p.done;
  if (p.total > 0) text << "/" << p.total;
  text << " " << p.unit;
  if (p.done > 0 && elapsed > 0) {
    const double rate = static_cast<double>(p.done) / elapsed;
    text << ", " << std::fixed << std::setprecision(rate < 10 ? 2 : 0) << rate << "/s";
    if (p.total > p.done) text << ", " << format_duration(static_cast<double>(p.total - p.done) / rate) << " left";
    if (finished) text << ", " << format_duration(elapsed);
  }
  if (terminal_) {
    // At most ten redraws a second: thousands of samples a second would flood the terminal.
    if (!finished && p.done > 0 && bar_drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    clear_bar();
    std::cerr << text.str();
    bar_drawn_ = true;
    if (finished) {
      std::cerr << "\n";
      bar_drawn_ = false;
      phase_.clear();
    }
    std::cerr << std::flush;
    return;
  }
  // Plain lines: each tenth once, and the end, once the phase has run a second (a short one
  // leaves the log as it was).
  if (p.total == 0 || p.done == 0 || elapsed < 1.0) return;
  const size_t tenth = p.done * 10 / p.total;
  if (tenth > tenths_) {
    tenths_ = tenth;
    std::cerr << text.str() << "\n";
  }
  if (finished) phase_.clear();
}

}  // namespace onnxptq::cli
