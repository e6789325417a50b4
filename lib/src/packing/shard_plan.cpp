// Deterministic first-fit shard planning with conservative file-size bounds.
#include "ptepack/packing/shard_plan.h"

#include "ptepack/base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/formats/flat_tensor.h"
#include "ptepack/formats/safetensors.h"

namespace ptepack {
namespace {

uint64_t add(uint64_t a, uint64_t b) {
  auto sum = checked_add(a, b);
  if (!sum) fail(ErrorCode::conflict, "shard size computation overflows");
  return *sum;
}

uint64_t aligned(uint64_t value, uint64_t alignment) {
  auto out = align_up(value, alignment);
  if (!out) fail(ErrorCode::conflict, "shard size computation overflows");
  return *out;
}

uint64_t fixed_head(const ShardingOptions& options) {
  return options.format == ShardFormat::ptd ? ptd::head_bound_fixed() : safetensors::head_bound_fixed({});
}

}  // namespace

std::string_view shard_format_name(ShardFormat format) {
  return format == ShardFormat::ptd ? "ptd" : "safetensors";
}

std::string_view cap_mode_name(CapMode mode) { return mode == CapMode::file ? "file" : "payload"; }

GroupCost group_cost(const std::vector<StoredTensor>& tensors, const StorageGroup& group,
                     const ShardingOptions& options) {
  GroupCost cost;
  cost.payload = group.nbytes;
  const auto& owner = tensors[group.members[0]];
  if (options.format == ShardFormat::ptd) {
    for (size_t index : group.members) {
      const auto& t = tensors[index];
      cost.head = add(cost.head, ptd::head_bound_entry(t.key.size(), t.data.shape.size()));
    }
    cost.head = add(cost.head, ptd::head_bound_segment());
    cost.data = aligned(group.nbytes, options.alignment);
  } else {
    // Aliases live in the manifest only; the file stores the owner.
    cost.head = safetensors::head_bound_entry(owner.key, owner.data.shape.size());
    cost.data = group.nbytes;
  }
  return cost;
}

uint64_t shard_size_bound(uint64_t head, uint64_t data, const ShardingOptions& options) {
  uint64_t full_head = add(fixed_head(options), head);
  if (options.format == ShardFormat::ptd) full_head = aligned(full_head, options.alignment);
  return add(full_head, data);
}

std::vector<PlannedShard> plan_shards(const std::vector<StoredTensor>& tensors,
                                      const std::vector<StorageGroup>& groups,
                                      const ShardingOptions& options) {
  std::vector<PlannedShard> shards;
  auto fits = [&](const PlannedShard& shard, const GroupCost& cost) {
    if (!options.max_shard_bytes) return true;
    if (options.cap_mode == CapMode::payload) {
      return add(shard.payload_bytes, cost.payload) <= *options.max_shard_bytes;
    }
    return shard_size_bound(add(shard.head_bound, cost.head), add(shard.data_bound, cost.data),
                            options) <= *options.max_shard_bytes;
  };
  auto place = [&](PlannedShard& shard, size_t index, const GroupCost& cost) {
    shard.groups.push_back(index);
    shard.payload_bytes = add(shard.payload_bytes, cost.payload);
    shard.head_bound = add(shard.head_bound, cost.head);
    shard.data_bound = add(shard.data_bound, cost.data);
    shard.size_bound = options.cap_mode == CapMode::payload && options.max_shard_bytes
                           ? shard.payload_bytes
                           : shard_size_bound(shard.head_bound, shard.data_bound, options);
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    auto cost = group_cost(tensors, groups[g], options);
    bool placed = false;
    for (auto& shard : shards) {
      if (fits(shard, cost)) {
        place(shard, g, cost);
        placed = true;
        break;
      }
    }
    if (placed) continue;
    PlannedShard fresh;
    if (!fits(fresh, cost)) {
      const auto& owner = tensors[groups[g].members[0]].key;
      uint64_t need = options.cap_mode == CapMode::payload
                          ? cost.payload
                          : shard_size_bound(cost.head, cost.data, options);
      fail(ErrorCode::conflict,
           "tensor {} needs {} bytes in a shard ({} mode) but --max-shard-bytes is {}",
           quote(owner), need, cap_mode_name(options.cap_mode), *options.max_shard_bytes);
    }
    place(fresh, g, cost);
    shards.push_back(std::move(fresh));
  }
  return shards;
}

}  // namespace ptepack
