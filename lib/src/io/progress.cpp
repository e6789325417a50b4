// Terminal progress line and the small thread helper the pipeline uses.
#include "ptepack/io/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ptepack {

namespace {

// The reporter thread draws while holding g_draw; the interrupt handler takes it
// (waiting a moment at most) and sets g_silenced, so no line is drawn after
// "ptepack: interrupted".
std::timed_mutex g_draw;
std::atomic<bool> g_silenced{false};
std::atomic<bool> g_line_drawn{false};  // a progress line is on the terminal now

// Writes text to stderr unless interrupted (false then); line_drawn: a
// progress line now stands on the terminal.
bool draw(const std::string& text, bool line_drawn) {
  std::lock_guard lock(g_draw);
  if (g_silenced) return false;
  std::fputs(text.c_str(), stderr);
  g_line_drawn = line_drawn;
  return true;
}

std::string mib(uint64_t bytes) {
  return fmt::format("{:.0f}", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace

size_t terminal_columns(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    long value = std::strtol(columns, nullptr, 10);
    if (value > 0) return static_cast<size_t>(value);
  }
  return 80;
}

void report_interrupt() {
  std::unique_lock lock(g_draw, std::defer_lock);
  // A reporter blocked on a stopped terminal must not stop the exit.
  (void)lock.try_lock_for(std::chrono::milliseconds(200));
  g_silenced = true;
  static const char kClear[] = "\r\033[K";
  static const char kText[] = "ptepack: interrupted\n";
  if (g_line_drawn.exchange(false)) (void)!::write(STDERR_FILENO, kClear, sizeof kClear - 1);
  (void)!::write(STDERR_FILENO, kText, sizeof kText - 1);
}

Progress::~Progress() { stop(); }

void Progress::start(ProgressMode mode) {
  if (mode == ProgressMode::never || running_) return;
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  if (!terminal && mode != ProgressMode::always) return;
  running_ = true;
  reporter_ = std::thread([this, terminal] {
    auto begin = std::chrono::steady_clock::now();
    auto last_plain = begin;
    while (running_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!running_) break;
      auto now = std::chrono::steady_clock::now();
      double elapsed = std::chrono::duration<double>(now - begin).count();
      if (terminal) {
        auto text = "\r" + line(elapsed, terminal_columns(STDERR_FILENO) - 1) + "\033[K";
        if (!draw(text, true)) break;
      } else if (now - last_plain >= std::chrono::seconds(5)) {
        last_plain = now;
        if (!draw(line(elapsed, 200) + "\n", false)) break;
      }
    }
  });
}

void Progress::stop() {
  if (!running_) return;
  running_ = false;
  reporter_.join();
  if (g_line_drawn.exchange(false)) (void)draw("\r\033[K", false);
}

std::string Progress::line(double elapsed, size_t width) {
  const uint64_t hashed = hashed_;
  const uint64_t written = written_;
  const uint64_t hash_total = hash_total_;
  const bool writes = writes_expected_ || write_total_known_;
  const uint64_t write_total = write_total_known_ ? write_total_.load()
                               : writes_expected_ ? hash_total
                                                  : 0;
  const double done = static_cast<double>(hashed + written);
  const double total = static_cast<double>(hash_total + write_total);
  const double rate = elapsed > 0 ? done / elapsed : 0;
  double eta = rate > 0 && total > done ? (total - done) / rate : 0;
  if (eta_restarted_.exchange(false)) shown_eta_ = -1;
  if (shown_eta_ >= 0 && eta > shown_eta_) eta = shown_eta_;  // never back up
  shown_eta_ = eta;
  const int percent = total > 0 ? static_cast<int>(100.0 * done / total) : 0;
  std::string rate_text = fmt::format("{} MiB/s", mib(static_cast<uint64_t>(rate)));
  std::string eta_text = fmt::format("ETA {:.0f}s", eta);
  // Longest first; the first form that fits is drawn, the last is cut to the width.
  std::vector<std::string> forms;
  if (writes) {
    forms.push_back(fmt::format("ptepack: {}%  hashed {}/{} MiB, written {}/{} MiB, {}, {}",
                                percent, mib(hashed), mib(hash_total), mib(written),
                                mib(write_total), rate_text, eta_text));
  } else {
    forms.push_back(fmt::format("ptepack: {}%  hashed {}/{} MiB, {}, {}", percent, mib(hashed),
                                mib(hash_total), rate_text, eta_text));
  }
  forms.push_back(fmt::format("ptepack: {}% {} {}", percent, rate_text, eta_text));
  forms.push_back(fmt::format("{}% {}", percent, eta_text));
  for (const auto& form : forms) {
    if (form.size() <= width) return form;
  }
  return forms.back().substr(0, width);
}

}  // namespace ptepack
