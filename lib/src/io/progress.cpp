// Terminal progress line and the small thread helper the pipeline uses.
#include "ptepack/io/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace ptepack {

Progress::~Progress() { stop(); }

void Progress::start(bool enabled) {
  if (!enabled || ::isatty(STDERR_FILENO) == 0 || running_) return;
  running_ = true;
  reporter_ = std::thread([this] {
    auto begin = std::chrono::steady_clock::now();
    while (running_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!running_) break;
      draw(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    }
  });
}

void Progress::stop() {
  if (!running_) return;
  running_ = false;
  reporter_.join();
  std::fputs("\r\033[K", stderr);
}

void Progress::draw(double elapsed) const {
  constexpr double kMiB = 1024.0 * 1024.0;
  double done = static_cast<double>(hashed_ + written_);
  double total = static_cast<double>(hash_total_ + write_total_);
  double rate = elapsed > 0 ? done / elapsed : 0;
  double eta = rate > 0 && total > done ? (total - done) / rate : 0;
  auto line = fmt::format(
      "\rptepack: hashed {:.0f}/{:.0f} MiB, written {:.0f}/{:.0f} MiB, {:.0f} MiB/s, ETA "
      "{:.0f}s\033[K",
      static_cast<double>(hashed_) / kMiB, static_cast<double>(hash_total_) / kMiB,
      static_cast<double>(written_) / kMiB, static_cast<double>(write_total_) / kMiB, rate / kMiB,
      eta);
  std::fputs(line.c_str(), stderr);
}

unsigned effective_jobs(unsigned requested) {
  if (requested != 0) return requested;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

void parallel_for(size_t count, unsigned jobs, const std::function<void(size_t)>& fn) {
  unsigned threads = static_cast<unsigned>(std::min<size_t>(jobs == 0 ? 1 : jobs, count));
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    while (!failed) {
      size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ptepack
