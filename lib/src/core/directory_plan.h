// The plan of a directory output: every shard it lists, decided before a byte is written.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base_reuse.h"
#include "core/file_content.h"
#include "core/sharing_sets.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/core/shard_plan.h"
#include "ptepack/core/storage.h"

namespace ptepack {

// Who reads the tensors of a directory: its programs (.pte programs; none for
// a program graph's directory, whose one program reads every tensor).
struct ProgramUse {
  size_t programs = 0;
  std::vector<SharingSet> users;  // per tensor, the programs reading it, ascending
  bool by_sharing_set = false;    // place by sharing set, else one first-fit over all
};

// Everything decided about a directory's shards before a byte is written.
// The manifest lists its shards in this order: the kept ones (--base), then
// the new ones.
struct DirectoryPlan {
  // --base: OLD's shards kept whole, as OLD's manifest lists them, with the
  // keys NEW reads from them (`keys`) and those it no longer reads (`stale`).
  std::vector<ManifestShard> kept;
  std::vector<uint64_t> kept_stale_bytes;           // per kept shard: payload only stale keys reach
  std::map<std::string, std::string> kept_aliases;  // served keys OLD stores as aliases -> owner
  // The new shards: the groups they hold (NEW's dedup groups less what kept
  // shards serve), placed by first-fit, each one's exact bytes and the keys
  // readable from it by name (sorted).
  std::vector<StorageGroup> groups;
  std::vector<PlannedShard> placed;
  std::vector<FileContent> contents;
  std::vector<std::vector<std::string>> keys;
  // Per tensor: the shard holding it (an index in manifest order: below
  // kept.size(), a kept shard serving it), or npos.
  std::vector<size_t> shard_of;
  // Per program: the shards it loads (indices in manifest order), ascending.
  std::vector<std::vector<size_t>> program_shards;
  // True when the plan places by sharing set is not the rule for these programs
  // (two or more, --placement single): the manifest records it.
  bool placement_single = false;

  static constexpr size_t npos = static_cast<size_t>(-1);
  [[nodiscard]] size_t shard_count() const { return kept.size() + placed.size(); }
  // A shard's file size and payload, in manifest order.
  [[nodiscard]] uint64_t shard_size(size_t s) const;
  [[nodiscard]] uint64_t shard_payload(size_t s) const;
};

// The one plan of a directory output, for both front ends: the shards `reuse`
// keeps of OLD (plan_reuse over `old`, OLD's manifest; an empty plan and null
// without --base), then NEW's `groups` (owner-key order) less what they serve,
// placed by deterministic first-fit (within sharing sets when
// use.by_sharing_set) and laid out, and each program's shard list. Throws the
// planner's errors (a group no shard can hold), prefixed with "`output`: "
// when `output` is not empty, and the layout's. Pure: no I/O.
[[nodiscard]] DirectoryPlan plan_directory(const std::vector<StoredTensor>& tensors,
                                           const std::vector<StorageGroup>& groups,
                                           const ProgramUse& use, const ShardingOptions& options,
                                           const std::string& output = {},
                                           const ReusePlan& reuse = {},
                                           const Manifest* old = nullptr);

// What a manifest records of a written plan: the shard options (alignment,
// prefix and placement only when not the default), the shards in plan order
// (the new ones named by `digests`, the SHA-256 of each new shard's file),
// total_size, and, when manifest.programs lists the plan's programs, each
// one's shard list and (two or more) each shard's programs. The tensors are
// not entered: describe_tensors hands them over. Pure.
void describe_directory(const DirectoryPlan& plan, const std::vector<Digest>& digests,
                        const ShardingOptions& options, const std::string& prefix,
                        Manifest& manifest);

// Every tensor's manifest entry, in key order (the tensors' own): the file of
// the shard serving it (from `shards`, as describe_directory fills them) and
// its alias (its group's owner; in a kept shard, OLD's). One entry object is
// handed over each time: `each` copies what it keeps. What a manifest writer
// streams (write_manifest_json) without a map of 100,000 entries.
void describe_tensors(const DirectoryPlan& plan, const std::vector<StoredTensor>& tensors,
                      const std::vector<ManifestShard>& shards, const ManifestTensorVisitor& each);

}  // namespace ptepack
