// Deterministic first-fit shard planning with conservative file-size bounds.
#include "ptepack/packing/shard_plan.h"

#include "ptepack/base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/formats/flat_tensor.h"
#include "ptepack/formats/safetensors.h"
#include "ptepack/packing/shard_layout.h"

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
  return options.format == ShardFormat::ptd ? ptd::head_bound_fixed()
                                            : safetensors::head_bound_fixed({});
}

// How much shard_size_bound can exceed the exact file size of `shard` plus a
// group: the header bounds' over-count (.ptd: under 80 bytes plus 4 per
// segment, measured; safetensors: offsets and dims counted at 20 digits) and
// alignment rounding.
uint64_t bound_slack(const PlannedShard& shard, const GroupCost& cost,
                     const ShardingOptions& options) {
  uint64_t fixed = options.format == ShardFormat::ptd ? 128 + 2 * options.alignment : 16;
  return fixed + shard.slack + cost.slack;
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
    cost.slack = 4;
  } else {
    // Aliases live in the manifest only; the file stores the owner.
    cost.head = safetensors::head_bound_entry(owner.key, owner.data.shape.size());
    cost.data = group.nbytes;
    cost.slack = 48 + 20 * owner.data.shape.size();
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
  // File mode: the cheap bound decides, except near the cap, where the bound's
  // slack could turn away a group that fits; there the exact layout decides.
  auto fits = [&](const PlannedShard& shard, size_t g, const GroupCost& cost) {
    if (!options.max_shard_bytes) return true;
    const uint64_t cap = *options.max_shard_bytes;
    if (options.cap_mode == CapMode::payload) return add(shard.payload_bytes, cost.payload) <= cap;
    uint64_t bound = shard_size_bound(add(shard.head_bound, cost.head),
                                      add(shard.data_bound, cost.data), options);
    if (bound <= cap) return true;
    if (bound - cap > bound_slack(shard, cost, options)) return false;
    auto candidate = shard.groups;
    candidate.push_back(g);
    return layout_shard(tensors, groups, candidate, options).file_size <= cap;
  };
  auto place = [&](PlannedShard& shard, size_t index, const GroupCost& cost) {
    shard.groups.push_back(index);
    shard.payload_bytes = add(shard.payload_bytes, cost.payload);
    shard.head_bound = add(shard.head_bound, cost.head);
    shard.data_bound = add(shard.data_bound, cost.data);
    shard.slack = add(shard.slack, cost.slack);
    shard.size_bound = options.cap_mode == CapMode::payload && options.max_shard_bytes
                           ? shard.payload_bytes
                           : shard_size_bound(shard.head_bound, shard.data_bound, options);
    if (options.max_shard_bytes && shard.size_bound > *options.max_shard_bytes) {
      // Placed on the exact layout: keep the exact size, which is within the cap.
      shard.size_bound = layout_shard(tensors, groups, shard.groups, options).file_size;
    }
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    auto cost = group_cost(tensors, groups[g], options);
    bool placed = false;
    for (auto& shard : shards) {
      if (fits(shard, g, cost)) {
        place(shard, g, cost);
        placed = true;
        break;
      }
    }
    if (placed) continue;
    PlannedShard fresh;
    if (!fits(fresh, g, cost)) {
      const auto& owner = tensors[groups[g].members[0]].key;
      uint64_t need = options.cap_mode == CapMode::payload
                          ? cost.payload
                          : layout_shard(tensors, groups, {g}, options).file_size;
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
