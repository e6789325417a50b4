// SHA-256 of many byte ranges on several threads, each range read in bounded chunks.
#pragma once

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

}  // namespace ptepack
