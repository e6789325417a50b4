// One plan for every directory output: kept shards, new shards, each program's list.
#include "core/directory_plan.h"

#include <algorithm>

#include "core/shard_layout.h"
#include "ptepack/base/error.h"

namespace ptepack {
namespace {

constexpr size_t npos = DirectoryPlan::npos;

// OLD's shards `reuse` keeps, as the new manifest lists them, and what they serve.
void keep_shards(const ReusePlan& reuse, const Manifest& old,
                 const std::vector<StoredTensor>& tensors, DirectoryPlan& plan) {
  for (const auto& r : reuse.shards) {
    const auto& s = old.shards[r.old_index];
    plan.kept.push_back({s.file, s.sha256, s.size, s.payload_bytes, r.live, r.stale});
    plan.kept_stale_bytes.push_back(r.stale_bytes);
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (reuse.served_by[t] == ReusePlan::npos) continue;
    const auto& alias_of = old.tensors.at(tensors[t].key).alias_of;
    if (alias_of) plan.kept_aliases.emplace(tensors[t].key, *alias_of);
  }
}

// The new shards placed: by sharing set, or one first-fit over every group.
std::vector<PlannedShard> place(const std::vector<StoredTensor>& tensors,
                                const std::vector<StorageGroup>& groups, const ProgramUse& use,
                                const ShardingOptions& options) {
  if (!use.by_sharing_set) return plan_shards(tensors, groups, options);
  return plan_shards_by_set(tensors, groups, sharing_sets(tensors, groups, use.users), options);
}

// Every new shard's exact bytes and keys.
void lay_out(const std::vector<StoredTensor>& tensors, const ShardingOptions& options,
             DirectoryPlan& plan) {
  plan.contents.resize(plan.placed.size());
  plan.keys.resize(plan.placed.size());
  for (size_t s = 0; s < plan.placed.size(); ++s) {
    auto layout = layout_shard(tensors, plan.groups, plan.placed[s].groups, options);
    auto& content = plan.contents[s];
    content.size = layout.file_size;
    content.pieces.push_back({0, std::move(layout.head), {}});
    for (const auto& p : layout.placements)
      content.pieces.push_back({p.offset, {}, tensors[p.tensor].data.bytes});
    plan.keys[s] = std::move(layout.keys);
    if (options.max_shard_bytes && options.cap_mode == CapMode::file && !plan.placed[s].oversize &&
        content.size > *options.max_shard_bytes) {
      fail(ErrorCode::internal, "shard {} of {} bytes exceeds the planned cap {}", s + 1,
           content.size, *options.max_shard_bytes);
    }
  }
}

// The shard holding each tensor: the kept shard serving it, else the new
// shard its group was placed in.
void locate_tensors(size_t tensor_count, const ReusePlan& reuse, DirectoryPlan& plan) {
  plan.shard_of.assign(tensor_count, npos);
  if (!plan.kept.empty()) {
    for (size_t t = 0; t < tensor_count; ++t) {
      if (reuse.served_by[t] != ReusePlan::npos) plan.shard_of[t] = reuse.served_by[t];
    }
  }
  for (size_t s = 0; s < plan.placed.size(); ++s) {
    for (size_t g : plan.placed[s].groups) {
      for (size_t member : plan.groups[g].members) plan.shard_of[member] = plan.kept.size() + s;
    }
  }
}

// Each program's shards: those holding a tensor it reads.
void list_program_shards(const std::vector<StoredTensor>& tensors, const ProgramUse& use,
                         DirectoryPlan& plan) {
  if (use.programs == 0) return;
  plan.program_shards.resize(use.programs);
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (plan.shard_of[t] == npos) {
      fail(ErrorCode::internal, "{}: no planned shard holds it", quote(tensors[t].key));
    }
    for (uint32_t p : use.users[t]) plan.program_shards[p].push_back(plan.shard_of[t]);
  }
  for (auto& shards : plan.program_shards) {
    std::sort(shards.begin(), shards.end());
    shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  }
}

}  // namespace

uint64_t DirectoryPlan::shard_size(size_t s) const {
  return s < kept.size() ? kept[s].size : contents[s - kept.size()].size;
}

uint64_t DirectoryPlan::shard_payload(size_t s) const {
  return s < kept.size() ? kept[s].payload_bytes : placed[s - kept.size()].payload_bytes;
}

DirectoryPlan plan_directory(const std::vector<StoredTensor>& tensors,
                             const std::vector<StorageGroup>& groups, const ProgramUse& use,
                             const ShardingOptions& options, const std::string& output,
                             const ReusePlan& reuse, const Manifest* old) {
  DirectoryPlan plan;
  if (old != nullptr && !reuse.shards.empty()) {
    keep_shards(reuse, *old, tensors, plan);
    plan.groups = unserved_groups(groups, reuse);
  } else {
    plan.groups = groups;
  }
  try {
    plan.placed = place(tensors, plan.groups, use, options);
  } catch (const Error& e) {
    if (output.empty()) throw;
    throw Error(e.code(), output + ": " + e.what());  // the output named in the message
  }
  lay_out(tensors, options, plan);
  locate_tensors(tensors.size(), reuse, plan);
  list_program_shards(tensors, use, plan);
  plan.placement_single = use.programs > 1 && !use.by_sharing_set;
  return plan;
}

namespace {

// The shard options a manifest records (docs/manifest.md).
void describe_options(const DirectoryPlan& plan, const ShardingOptions& options,
                      const std::string& prefix, Manifest& manifest) {
  manifest.shard_format = options.format;
  manifest.max_shard_bytes = options.max_shard_bytes;
  manifest.cap_mode = options.cap_mode;
  // The options a lone repack takes (apply_recorded_options), when not the default.
  if (options.format == ShardFormat::ptd && options.alignment != ShardingOptions{}.alignment)
    manifest.alignment = options.alignment;
  if (prefix != kDefaultShardPrefix) manifest.shard_prefix = prefix;
  manifest.placement_single = plan.placement_single;
  manifest.max_shard_tensors = options.max_shard_tensors;
  // Recorded only when a shard is over the cap, so outputs without one stay the same.
  manifest.oversize_own_shard =
      std::any_of(plan.placed.begin(), plan.placed.end(),
                  [](const PlannedShard& s) { return s.oversize; }) ||
      std::any_of(plan.kept.begin(), plan.kept.end(), [&](const ManifestShard& s) {
        return options.max_shard_bytes &&  // admitted alone by plan_reuse (--oversize own-shard)
               cap_measure(options.cap_mode, s.size, s.payload_bytes) > *options.max_shard_bytes;
      });
}

}  // namespace

void describe_directory(const DirectoryPlan& plan, const std::vector<Digest>& digests,
                        const ShardingOptions& options, const std::string& prefix,
                        Manifest& manifest) {
  if (digests.size() != plan.placed.size()) {
    fail(ErrorCode::internal, "{} shard digests for {} planned shards", digests.size(),
         plan.placed.size());
  }
  describe_options(plan, options, prefix, manifest);
  for (const auto& s : plan.kept) {
    manifest.shards.push_back(s);
    manifest.total_size += s.payload_bytes;
  }
  for (size_t s = 0; s < plan.placed.size(); ++s) {
    auto hex = to_hex(digests[s]);
    auto name = shard_file_name(prefix, hex, options.format);
    manifest.shards.push_back(
        {name, hex, plan.contents[s].size, plan.placed[s].payload_bytes, plan.keys[s]});
    manifest.total_size += plan.placed[s].payload_bytes;
  }
  if (manifest.programs.size() != plan.program_shards.size()) return;
  for (size_t p = 0; p < manifest.programs.size(); ++p) {
    for (size_t s : plan.program_shards[p]) {
      manifest.programs[p].shards.push_back(manifest.shards[s].file);
      // With two or more programs each shard names the programs that list it.
      if (manifest.programs.size() > 1)
        manifest.shards[s].programs.push_back(manifest.programs[p].file);
    }
  }
}

void describe_tensors(const DirectoryPlan& plan, const std::vector<StoredTensor>& tensors,
                      const std::vector<ManifestShard>& shards, const ManifestTensorVisitor& each) {
  std::vector<size_t> owner_of(tensors.size(), npos);  // new shards' aliases: their group owner
  for (const auto& shard : plan.placed) {
    for (size_t g : shard.groups) {
      const auto& members = plan.groups[g].members;
      for (size_t k = 1; k < members.size(); ++k) owner_of[members[k]] = members[0];
    }
  }
  ManifestTensor entry;  // reused: its strings and vectors keep their capacity
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t s = plan.shard_of[t];
    if (s == npos) continue;
    const auto& x = tensors[t];
    entry.shard = shards[s].file;
    entry.sha256 = x.sha256;
    entry.nbytes = x.data.bytes.size;
    entry.dtype = x.data.dtype;
    entry.shape = x.data.shape;
    entry.is_mutable = x.is_mutable;
    entry.dim_order = x.data.dim_order;
    entry.opaque = x.data.opaque;
    const std::string* alias = nullptr;
    if (owner_of[t] != npos) {
      alias = &tensors[owner_of[t]].key;
    } else if (s < plan.kept.size()) {
      if (auto it = plan.kept_aliases.find(x.key); it != plan.kept_aliases.end())
        alias = &it->second;
    }
    if (alias != nullptr) {
      entry.alias_of = *alias;
    } else {
      entry.alias_of.reset();
    }
    each(x.key, entry);
  }
}

}  // namespace ptepack
