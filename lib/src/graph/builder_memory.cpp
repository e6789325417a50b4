#include "graph/builder_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

namespace ptepack::detail {
namespace {

constexpr size_t kMappedFrom = size_t{1} << 20;
// FlatBuffers buffers stay below 2 GiB.
constexpr size_t kMaxReservation = (size_t{1} << 31) - 4096;

uint8_t* mapped_or_throw(void* p) {
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

class PageAllocator final : public flatbuffers::Allocator {
 public:
  uint8_t* allocate(size_t size) override {
    return mapped_or_throw(mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  }

  void deallocate(uint8_t* p, size_t size) override { munmap(p, size); }

  // The builder keeps `in_use_back` bytes at the end of the buffer and
  // `in_use_front` (scratch) at its start; both keep their place relative to
  // their end.
  uint8_t* reallocate_downward(uint8_t* old_p, size_t old_size, size_t new_size, size_t in_use_back,
                               size_t in_use_front) override {
    uint8_t* p = mapped_or_throw(mremap(old_p, old_size, new_size, MREMAP_MAYMOVE));
    std::memmove(p + new_size - in_use_back, p + old_size - in_use_back, in_use_back);
    // Pages between the scratch and the moved bytes hold stale copies: drop them.
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    auto gap_begin = (reinterpret_cast<uintptr_t>(p) + in_use_front + page - 1) & ~(page - 1);
    auto gap_end = (reinterpret_cast<uintptr_t>(p) + new_size - in_use_back) & ~(page - 1);
    if (gap_end > gap_begin) {
      madvise(reinterpret_cast<void*>(gap_begin), gap_end - gap_begin, MADV_DONTNEED);
    }
    return p;
  }
};

}  // namespace

flatbuffers::FlatBufferBuilder reserved_builder(size_t expected_size) {
  if (expected_size < kMappedFrom) {
    return flatbuffers::FlatBufferBuilder(std::max<size_t>(expected_size, 1024));
  }
  auto reservation = std::min(expected_size + expected_size / 2, kMaxReservation);
  return flatbuffers::FlatBufferBuilder(reservation, new PageAllocator, /*own_allocator=*/true);
}

}  // namespace ptepack::detail
