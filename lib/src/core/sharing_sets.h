// Placement by sharing set: shards that never mix what different sets of programs use.
#pragma once

#include <cstdint>
#include <vector>

#include "ptepack/core/shard_plan.h"
#include "ptepack/core/storage.h"

namespace ptepack {

// The programs (indices, ascending) that use any key of a storage group.
using SharingSet = std::vector<uint32_t>;

struct SharingSets {
  std::vector<SharingSet> sets;  // in placement order (docs/shard-planner.md)
  std::vector<size_t> set_of;    // per group: its set, an index into `sets`
};

// The sharing set of every group, from the programs that use each tensor
// (`users[t]`, parallel to `tensors`, ascending), and the sets in their
// placement order: larger sets first (the foundation every program loads
// comes first), then by their smallest owner key.
[[nodiscard]] SharingSets sharing_sets(const std::vector<StoredTensor>& tensors,
                                       const std::vector<StorageGroup>& groups,
                                       const std::vector<SharingSet>& users);

// Deterministic first-fit within each set, sets one after another: a shard
// never holds groups of two sets. Group indices in the result refer to `groups`.
[[nodiscard]] std::vector<PlannedShard> plan_shards_by_set(
    const std::vector<StoredTensor>& tensors, const std::vector<StorageGroup>& groups,
    const SharingSets& sets, const ShardingOptions& options);

}  // namespace ptepack
