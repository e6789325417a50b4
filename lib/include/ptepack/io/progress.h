// Progress of long work (bytes hashed and written), drawn on a terminal only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace ptepack {

// Counters are updated from worker threads; when enabled, a reporter thread
// redraws one stderr line a few times per second and clears it at the end.
class Progress {
 public:
  Progress() = default;
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts drawing if `enabled` and stderr is a terminal.
  void start(bool enabled);
  void stop();
  void set_hash_total(uint64_t bytes) { hash_total_ = bytes; }
  void set_write_total(uint64_t bytes) { write_total_ = bytes; }
  void add_hashed(uint64_t n) { hashed_.fetch_add(n, std::memory_order_relaxed); }
  void add_written(uint64_t n) { written_.fetch_add(n, std::memory_order_relaxed); }

 private:
  void draw(double elapsed) const;
  std::atomic<uint64_t> hashed_{0};
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> hash_total_{0};
  std::atomic<uint64_t> write_total_{0};
  std::atomic<bool> running_{false};
  std::thread reporter_;
};

// Runs fn(index) for index in [0, count) on `jobs` threads (dynamic assignment).
// The first exception thrown by any task is rethrown after all threads stop.
void parallel_for(size_t count, unsigned jobs, const std::function<void(size_t)>& fn);

// Number of worker threads for `requested` (0 = all cores).
[[nodiscard]] unsigned effective_jobs(unsigned requested);

}  // namespace ptepack
