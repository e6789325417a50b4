// SHA-256 of many byte ranges on several threads, each range read in bounded chunks.
#pragma once

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "ptepack/hash/sha256.h"
#include "ptepack/io/input_file.h"
#include "ptepack/io/progress.h"

namespace ptepack {

// Digests of `ranges`, index for index. Identical ranges (same file, offset
// and size) are hashed once. Largest ranges are started first so the threads
// finish together; memory is one chunk buffer per thread.
[[nodiscard]] std::vector<Digest> hash_ranges(const std::vector<ByteRange>& ranges, unsigned jobs,
                                              Progress* progress = nullptr);

inline constexpr size_t kChunkBytes = 1 << 20;
// Hashing reads smaller chunks: each stays in the core's cache from the read's
// copy to the hash, and the threads hold less while a pack writes beside them
// (docs/performance.md).
inline constexpr size_t kHashChunkBytes = 256 << 10;

// A buffer for reading `size` bytes in chunks of at most `chunk`: no larger
// than they are, so small files and tensors cost no large zero-filled allocation.
[[nodiscard]] inline std::vector<uint8_t> chunk_buffer(uint64_t size, size_t chunk = kChunkBytes) {
  return std::vector<uint8_t>(static_cast<size_t>(std::clamp<uint64_t>(size, 1, chunk)));
}

// Digests looked up by range: add every range, compute() once, then ask of().
class RangeDigests {
 public:
  // A range to hash; nothing when its digest is already known (also as the
  // source range of a range of a composed file).
  void add(const ByteRange& range);
  // A digest known without hashing (a manifest's, once proven).
  void set(const ByteRange& range, const Digest& digest);
  // The ranges compute() will hash, in its order.
  [[nodiscard]] std::vector<ByteRange> pending() const;
  // Distinct bytes to hash (for progress totals).
  [[nodiscard]] uint64_t distinct_bytes() const;
  void compute(unsigned jobs, Progress* progress);
  // The digest of a range added before compute(); internal error otherwise.
  [[nodiscard]] const Digest& of(const ByteRange& range) const;

 private:
  using Id = std::tuple<const InputFile*, uint64_t, uint64_t>;
  std::map<Id, ByteRange> pending_;
  std::map<Id, Digest> done_;
};

}  // namespace ptepack
