// The shard planner: a pure function from storage groups and limits to shard assignments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/packing/storage.h"

namespace ptepack {

enum class ShardFormat { ptd, safetensors };
enum class CapMode { file, payload };

[[nodiscard]] std::string_view shard_format_name(ShardFormat format);
[[nodiscard]] std::string_view cap_mode_name(CapMode mode);

struct ShardingOptions {
  ShardFormat format = ShardFormat::ptd;
  std::optional<uint64_t> max_shard_bytes;  // none: one shard holds everything
  CapMode cap_mode = CapMode::file;
  uint64_t alignment = 128;  // .ptd segment alignment
};

struct PlannedShard {
  std::vector<size_t> groups;  // indices into the group list, in placement order
  uint64_t payload_bytes = 0;  // unique raw tensor bytes
  uint64_t size_bound = 0;     // upper bound of the file size; exact when the cap was close
  uint64_t head_bound = 0;     // header part of size_bound
  uint64_t data_bound = 0;     // data part of size_bound
  uint64_t slack = 0;          // how much the header bound may over-count
};

// What one group adds to a shard, in bytes, under the options.
struct GroupCost {
  uint64_t head = 0;     // header bytes (entries, segment records)
  uint64_t data = 0;     // stored bytes including alignment padding
  uint64_t payload = 0;  // raw bytes
  uint64_t slack = 0;    // most the head bound may over-count this group's header bytes
};
[[nodiscard]] GroupCost group_cost(const std::vector<StoredTensor>& tensors,
                                   const StorageGroup& group, const ShardingOptions& options);
// Bound of a shard's file size from its accumulated header and data costs.
[[nodiscard]] uint64_t shard_size_bound(uint64_t head, uint64_t data,
                                        const ShardingOptions& options);

// Deterministic first-fit: groups in the given order (owner-key order) each go
// into the first shard, in creation order, with room; a new shard opens only
// when none has. In file mode "room" is decided on a cheap upper bound of the
// file size, and on the exact layout when that bound is within its slack of
// the cap, so a group that fits is never turned away. Throws conflict when a group cannot fit even
// an empty shard, naming its key and both sizes.
[[nodiscard]] std::vector<PlannedShard> plan_shards(const std::vector<StoredTensor>& tensors,
                                                    const std::vector<StorageGroup>& groups,
                                                    const ShardingOptions& options);

}  // namespace ptepack
