// Which of a previous release's shards a new release keeps whole.
#include "core/base_reuse.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "base/checked.h"
#include "ptepack/base/error.h"

namespace ptepack {
namespace {

// The dim order with the identity spelled out (manifests leave it out).
std::vector<uint8_t> full_order(const std::vector<uint8_t>& order, size_t rank) {
  if (!order.empty()) return order;
  std::vector<uint8_t> out(rank);
  std::iota(out.begin(), out.end(), uint8_t{0});
  return out;
}

// NEW's tensor may be read where OLD stored `old`: the same bytes and layout,
// and state only where OLD kept it as state (state is never an alias).
bool same_tensor(const StoredTensor& t, const ManifestTensor& old) {
  return t.sha256 == old.sha256 && t.data.bytes.size == old.nbytes && t.data.dtype == old.dtype &&
         t.data.shape == old.shape && t.data.opaque == old.opaque &&
         full_order(t.data.dim_order, t.data.shape.size()) ==
             full_order(old.dim_order, old.shape.size()) &&
         (!t.is_mutable || (old.is_mutable && !old.alias_of));
}

// `name` is "<prefix>-<16 hex digits>.<ext>", as pack names shards.
bool has_prefix(const std::string& name, const std::string& prefix) {
  return name.size() > prefix.size() + 1 && name.compare(0, prefix.size(), prefix) == 0 &&
         name[prefix.size()] == '-';
}

// Stored tensors of an OLD shard as its manifest tells: its keys without the
// aliases OLD records. Stale keys are not counted here (their aliasing is not
// recorded); the caller counts the file's segments once it reads the file.
size_t stored_count(const Manifest& old, const ManifestShard& shard) {
  size_t count = 0;
  for (const auto& key : shard.keys) {
    auto it = old.tensors.find(key);
    if (it == old.tensors.end() || !it->second.alias_of) ++count;
  }
  return count;
}

}  // namespace

std::string shard_over_limits(const std::string& file, uint64_t size, uint64_t payload_bytes,
                              size_t stored, const ShardingOptions& options) {
  if (options.max_shard_bytes) {
    const uint64_t cap = *options.max_shard_bytes;
    const uint64_t measured = cap_measure(options.cap_mode, size, payload_bytes);
    if (measured > cap && !(options.oversize_own_shard && stored == 1)) {
      return fmt::format("its shard {} holds {} {} bytes, over --max-shard-bytes {}", file,
                         measured, cap_mode_name(options.cap_mode), cap);
    }
  }
  if (options.max_shard_tensors && stored > *options.max_shard_tensors) {
    return fmt::format("its shard {} holds {} stored tensors, over --max-shard-tensors {}", file,
                       stored, *options.max_shard_tensors);
  }
  return {};
}

namespace {

size_t find_tensor(const std::vector<StoredTensor>& tensors, std::string_view key) {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), key,
                             [](const StoredTensor& t, std::string_view k) { return t.key < k; });
  return it != tensors.end() && it->key == key ? static_cast<size_t>(it - tensors.begin())
                                               : ReusePlan::npos;
}

// Safetensors aliases are not in their shard's key list (the file holds the
// owner only): OLD's tensors name them, with their owner's shard.
using UnlistedAliases = std::map<std::string_view, std::vector<std::string_view>>;

UnlistedAliases unlisted_aliases(const Manifest& old) {
  UnlistedAliases unlisted;  // shard -> aliases
  if (old.shard_format == ShardFormat::safetensors) {
    for (const auto& [key, t] : old.tensors) {
      if (t.alias_of) unlisted[t.shard].push_back(key);
    }
  }
  return unlisted;
}

// A shard of OLD that may be kept, and the NEW tensors it serves (key order).
struct Candidate {
  ReusedShard kept;
  std::vector<size_t> served;
};

// Whether OLD's shard s can serve NEW as it is: every key NEW needs with the
// same bytes and layout, no stale key NEW needs, aliases with their owners,
// and a stale share within max_stale_percent.
std::optional<Candidate> examine_shard(const std::vector<StoredTensor>& tensors,
                                       const Manifest& old, size_t s,
                                       const UnlistedAliases& unlisted,
                                       unsigned max_stale_percent) {
  const auto& shard = old.shards[s];
  Candidate c;
  auto& kept = c.kept;
  kept.old_index = s;
  uint64_t live_bytes = 0;
  for (const auto& key : shard.keys) {
    const size_t t = find_tensor(tensors, key);
    if (t == ReusePlan::npos) {
      kept.stale.push_back(key);
      continue;
    }
    auto old_entry = old.tensors.find(key);
    if (old_entry == old.tensors.end() || !same_tensor(tensors[t], old_entry->second))
      return std::nullopt;  // needed with other bytes or another layout
    c.served.push_back(t);
    kept.live.push_back(key);
    if (!old_entry->second.alias_of) live_bytes += old_entry->second.nbytes;
  }
  for (const auto& key : shard.stale) {  // keys OLD itself no longer read
    if (find_tensor(tensors, key) != ReusePlan::npos) return std::nullopt;  // bytes unknown
    kept.stale.push_back(key);
  }
  if (kept.live.empty()) return std::nullopt;
  std::sort(kept.live.begin(), kept.live.end());
  // An alias is read through its owner's bytes: only with the owner served too,
  // a stored key of the same shard.
  auto owner_served = [&](const ManifestTensor& t) {
    if (!t.alias_of) return true;
    auto owner = old.tensors.find(*t.alias_of);
    return owner != old.tensors.end() && !owner->second.alias_of &&
           owner->second.shard == shard.file &&
           std::binary_search(kept.live.begin(), kept.live.end(), *t.alias_of);
  };
  for (const auto& key : kept.live) {
    if (!owner_served(old.tensors.at(key))) return std::nullopt;
  }
  if (live_bytes > shard.payload_bytes) return std::nullopt;
  // Safetensors aliases NEW needs with OLD's bytes are served with their owner.
  if (auto it = unlisted.find(shard.file); it != unlisted.end()) {
    for (auto key : it->second) {
      const size_t t = find_tensor(tensors, key);
      const auto& entry = old.tensors.at(std::string(key));
      if (t != ReusePlan::npos && same_tensor(tensors[t], entry) && owner_served(entry))
        c.served.push_back(t);
    }
  }
  kept.stale_bytes = shard.payload_bytes - live_bytes;
  // stale / payload > percent / 100, without overflow.
  auto stale_scaled = checked_mul(kept.stale_bytes, 100);
  auto allowed = checked_mul(shard.payload_bytes, max_stale_percent);
  if (!stale_scaled || !allowed || *stale_scaled > *allowed) return std::nullopt;
  return c;
}

}  // namespace

ReusePlan plan_reuse(const std::vector<StoredTensor>& tensors, const Manifest& old,
                     const ShardingOptions& options, const std::string& prefix,
                     unsigned max_stale_percent) {
  ReusePlan plan;
  plan.served_by.assign(tensors.size(), ReusePlan::npos);
  auto fresh = [&](std::string reason) {
    plan.shards.clear();
    plan.served_by.assign(tensors.size(), ReusePlan::npos);
    plan.fresh_reason = std::move(reason);
    return plan;
  };
  if (old.shard_format != options.format) {
    return fresh(fmt::format("the base holds {} shards and this pack writes {}",
                             shard_format_name(old.shard_format),
                             shard_format_name(options.format)));
  }
  if (old.cap_mode != options.cap_mode) {
    return fresh(fmt::format("the base caps shards in {} mode and this pack in {} mode",
                             cap_mode_name(old.cap_mode), cap_mode_name(options.cap_mode)));
  }
  const auto unlisted = unlisted_aliases(old);
  std::set<std::string_view> claimed;  // every key of the shards reused so far
  for (size_t s = 0; s < old.shards.size(); ++s) {
    const auto& shard = old.shards[s];
    if (!has_prefix(shard.file, prefix)) {
      return fresh(fmt::format("its shard {} is not named with --shard-prefix {}", shard.file,
                               quote(prefix)));
    }
    auto candidate = examine_shard(tensors, old, s, unlisted, max_stale_percent);
    if (!candidate) continue;
    bool clash = false;
    for (const auto& list : {&shard.keys, &shard.stale}) {
      for (const auto& key : *list) clash = clash || claimed.count(key) > 0;
    }
    if (clash) continue;
    if (auto why = shard_over_limits(shard.file, shard.size, shard.payload_bytes,
                                     stored_count(old, shard), options);
        !why.empty()) {
      return fresh(why);
    }
    for (const auto& list : {&shard.keys, &shard.stale}) claimed.insert(list->begin(), list->end());
    auto& kept = candidate->kept;
    std::sort(kept.stale.begin(), kept.stale.end());
    for (size_t t : candidate->served) plan.served_by[t] = plan.shards.size();
    plan.shards.push_back(std::move(kept));
  }
  return plan;
}

std::vector<StorageGroup> unserved_groups(const std::vector<StorageGroup>& groups,
                                          const ReusePlan& reuse) {
  std::vector<StorageGroup> out;
  out.reserve(groups.size());
  for (const auto& g : groups) {
    StorageGroup left{{}, g.nbytes, g.is_mutable};
    for (size_t member : g.members) {
      if (reuse.served_by[member] == ReusePlan::npos) left.members.push_back(member);
    }
    if (!left.members.empty()) out.push_back(std::move(left));
  }
  // Tensor indices follow key order: the owner (first member) orders the groups.
  std::stable_sort(out.begin(), out.end(), [](const StorageGroup& a, const StorageGroup& b) {
    return a.members.front() < b.members.front();
  });
  return out;
}

}  // namespace ptepack
