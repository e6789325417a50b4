// Shard reuse across releases (pack --base OLD): which of OLD's shard files a
// new release keeps whole, and which of its keys they serve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/core/shard_plan.h"
#include "ptepack/core/storage.h"

namespace ptepack {

// A shard of OLD kept whole in NEW: same name, same bytes.
struct ReusedShard {
  size_t old_index = 0;            // into the OLD manifest's shards
  std::vector<std::string> live;   // its keys NEW reads, sorted
  std::vector<std::string> stale;  // its keys NEW does not read, sorted
  uint64_t stale_bytes = 0;        // payload only stale keys reach
};

struct ReusePlan {
  std::vector<ReusedShard> shards;  // in OLD's order
  // Per NEW tensor: the index into `shards` of the reused shard it is read
  // from, or npos when it is placed in a new shard.
  std::vector<size_t> served_by;
  static constexpr size_t npos = static_cast<size_t>(-1);
  // Set when nothing is reused for a reason the whole of OLD shares (another
  // shard format, cap mode or prefix; a shard over NEW's cap or tensor limit):
  // one note for the summary, and placement is fresh.
  std::optional<std::string> fresh_reason;
};

// A shard is reused when
//  - every key it holds that NEW needs is needed with OLD's bytes and layout
//    (SHA-256, dtype, shape, dim order, opaque), an alias only together with
//    its owner, a state key only where OLD stored it as state;
//  - it serves NEW at least one key, and its stale payload (bytes only keys
//    NEW no longer needs reach) is at most `max_stale_percent` of its payload;
//  - none of its keys is already in an earlier reused shard.
// Every shard that passes must also fit NEW's cap, cap mode and tensor limit,
// and OLD must share NEW's shard format and prefix; otherwise nothing is
// reused and fresh_reason says why. `tensors` are NEW's, sorted by key.
[[nodiscard]] ReusePlan plan_reuse(const std::vector<StoredTensor>& tensors, const Manifest& old,
                                   const ShardingOptions& options, const std::string& prefix,
                                   unsigned max_stale_percent = 50);

// Why a shard file of `size` bytes holding `payload_bytes` in `stored` stored
// tensors cannot be kept under NEW's cap, cap mode, --oversize and tensor
// limit (one line for the note), or empty when it can.
[[nodiscard]] std::string shard_over_limits(const std::string& file, uint64_t size,
                                            uint64_t payload_bytes, size_t stored,
                                            const ShardingOptions& options);

// NEW's groups without the members a reused shard serves (a group keeps the
// members left, its smallest key the owner), in owner-key order: what is placed
// in new shards. A member left beside a served one is stored again.
[[nodiscard]] std::vector<StorageGroup> unserved_groups(const std::vector<StorageGroup>& groups,
                                                        const ReusePlan& reuse);

}  // namespace ptepack
