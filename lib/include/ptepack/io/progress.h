// Progress of long work (bytes hashed and written) on stderr.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace ptepack {

// --progress: automatic draws on a terminal only; always also prints plain lines (at most one
// every 5 s) when stderr is not a terminal, for CI logs; never draws nothing.
enum class ProgressMode { never, automatic, always };

// Counters are updated from worker threads; a reporter thread redraws one stderr line a few
// times per second (fitted to the terminal width, never wrapping) and clears it at the end.
// The ETA covers the whole job: until set_write_total() the writes are assumed as large as
// the bytes to hash (their upper bound), so the estimate only ever comes down. On SIGINT or
// SIGTERM the line is replaced by "ptepack: interrupted".
class Progress {
 public:
  Progress() = default;
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void start(ProgressMode mode);
  void start(bool enabled) { start(enabled ? ProgressMode::automatic : ProgressMode::never); }
  void stop();
  void set_hash_total(uint64_t bytes) { hash_total_ = bytes; }
  // The job also writes: bytes to write are estimated until set_write_total().
  void expect_writes() { writes_expected_ = true; }
  void set_write_total(uint64_t bytes) {
    write_total_ = bytes;
    write_total_known_ = true;
  }
  void add_hashed(uint64_t n) { hashed_.fetch_add(n, std::memory_order_relaxed); }
  void add_written(uint64_t n) { written_.fetch_add(n, std::memory_order_relaxed); }
  // The output is written again from the start (a package whose predicted plan failed).
  void restart_writes() {
    written_.store(0, std::memory_order_relaxed);
    eta_restarted_ = true;  // the ETA may go up again
  }

  // The text of one report after `elapsed` seconds, at most `width` columns (for tests).
  [[nodiscard]] std::string line(double elapsed, size_t width);

 private:
  std::atomic<uint64_t> hashed_{0};
  std::atomic<uint64_t> written_{0};
  std::atomic<bool> eta_restarted_{false};
  std::atomic<uint64_t> hash_total_{0};
  std::atomic<uint64_t> write_total_{0};
  std::atomic<bool> write_total_known_{false};
  std::atomic<bool> writes_expected_{false};
  std::atomic<bool> running_{false};
  double shown_eta_ =
      -1;  // the reporter thread's last ETA (never shown larger, but after restart_writes)
  std::thread reporter_;
};

// Columns of the terminal on `fd` (TIOCGWINSZ, else $COLUMNS, else 80).
[[nodiscard]] size_t terminal_columns(int fd);

// Called by the interrupt handler: writes the one line "ptepack: interrupted"
// to stderr (over the progress line when one is drawn), after which no
// progress is drawn again, whether stderr is a terminal or not.
void report_interrupt();

}  // namespace ptepack
