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

std::atomic<bool> g_line_drawn{false};  // a progress line is on the terminal now

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

void clear_progress_on_interrupt() {
  if (g_line_drawn.exchange(false)) {
    static const char kText[] = "\r\033[Kptepack: interrupted\n";
    (void)!::write(STDERR_FILENO, kText, sizeof kText - 1);
  }
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
        std::fputs(text.c_str(), stderr);
        g_line_drawn = true;
      } else if (now - last_plain >= std::chrono::seconds(5)) {
        last_plain = now;
        auto text = line(elapsed, 200) + "\n";
        std::fputs(text.c_str(), stderr);
      }
    }
  });
}

void Progress::stop() {
  if (!running_) return;
  running_ = false;
  reporter_.join();
  if (g_line_drawn.exchange(false)) std::fputs("\r\033[K", stderr);
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
