// parallel_for: an index range over worker threads, the lowest index's error rethrown.
#include "base/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ptepack {

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
  // Indices are handed out in order, so when index i fails every lower index has
  // started and runs to its end: the lowest failing index among them is the one a
  // loop on one thread would have stopped at, whatever the timing.
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  size_t error_index = count;
  std::mutex error_mutex;
  auto worker = [&] {
    while (!failed) {
      size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
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
