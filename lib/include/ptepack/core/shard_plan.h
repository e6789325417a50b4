// The shard planner: a pure function from storage groups and limits to shard assignments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/core/storage.h"

namespace ptepack {

// ShardFormat and CapMode, as the manifest records them: ptepack/containers/manifest.h.

// A shard's content name: PREFIX-<first 16 hex digits of its SHA-256>.ptd|.safetensors.
[[nodiscard]] std::string shard_file_name(std::string_view prefix, std::string_view sha256_hex,
                                          ShardFormat format);
// The prefix of shard file names when --shard-prefix is not given.
inline constexpr std::string_view kDefaultShardPrefix = "weights";
// The file name extension of a shard format, with its dot.
[[nodiscard]] std::string_view shard_extension(ShardFormat format);

struct ShardingOptions {
  ShardFormat format = ShardFormat::ptd;
  std::optional<uint64_t> max_shard_bytes;  // none: one shard holds everything
  CapMode cap_mode = CapMode::file;
  uint64_t alignment = 128;  // .ptd segment alignment
  // A tensor that cannot fit an empty shard: an error (default), or a shard of its own that
  // may exceed the cap and takes nothing else (Hugging Face's save_pretrained behaviour).
  bool oversize_own_shard = false;
  std::optional<size_t> max_shard_tensors;  // stored tensors per shard (aliases not counted)
};

struct PlannedShard {
  std::vector<size_t> groups;  // indices into the group list, in placement order
  uint64_t payload_bytes = 0;  // unique raw tensor bytes
  uint64_t size_bound = 0;     // upper bound of the file size; exact near the cap
  bool oversize = false;       // one tensor over the cap, alone (oversize_own_shard)
};

// Deterministic first-fit: groups in the given order (owner-key order) each go
// into the first shard, in creation order, with room; a new shard opens only
// when none has. In file mode "room" means the exact file size stays within
// the cap: the planner tracks each shard's size incrementally (exactly for
// safetensors, within a few bytes per group for .ptd) and builds the exact
// layout only when that is not enough to decide, so a group that fits is never
// turned away and planning stays near-linear in the number of groups. Throws
// conflict when a group cannot fit even an empty shard, naming its key, both
// sizes and the remedies that would work (unless oversize_own_shard gives it a
// sealed shard of its own). With max_shard_tensors a shard also counts as full
// once it holds that many groups.
[[nodiscard]] std::vector<PlannedShard> plan_shards(const std::vector<StoredTensor>& tensors,
                                                    const std::vector<StorageGroup>& groups,
                                                    const ShardingOptions& options);

}  // namespace ptepack
