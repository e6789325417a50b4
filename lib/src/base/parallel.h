// The one thread pool primitive: an index range over worker threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace ptepack {

// Runs fn(index) for index in [0, count) on `jobs` threads (dynamic assignment).
// After a task throws no new index starts; once all threads stop, the exception
// of the lowest failing index is rethrown: the one a single thread would have
// met first, so the error reported never depends on timing.
void parallel_for(size_t count, unsigned jobs, const std::function<void(size_t)>& fn);

// Number of worker threads for `requested` (0 = all cores).
[[nodiscard]] unsigned effective_jobs(unsigned requested);

// A directory's program at least this large is read, and verified, on a thread
// of its own beside the rest (dump, verify); a smaller one is not worth a thread.
inline constexpr uint64_t kOverlapProgramBytes = uint64_t{4} << 20;

}  // namespace ptepack
