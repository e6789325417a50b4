// pack --base OLD: the previous release whose shard files a new one keeps whole.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "core/base_reuse.h"
#include "ptepack/core/storage.h"
#include "ptepack/io/output_file.h"
#include "ptepack/io/progress.h"
#include "ptepack/pack/pack.h"
#include "pte/externalize.h"

namespace ptepack::detail {

class BaseRelease {
 public:
  // Reads OLD's manifest (a packed directory or its manifest.json), which must
  // be of `version` (the output's kind); a usage error otherwise.
  BaseRelease(const std::filesystem::path& path, int version);

  // The keys OLD's programs give their EXTERNAL tensors, with their digests
  // (a directory of programs), so a program NEW packs again keeps them.
  [[nodiscard]] PreviousKeys previous_keys() const;

  // Decides which of OLD's shards NEW keeps (plan_reuse) and opens them: each
  // must have OLD's size and keys (an error naming the file otherwise) and,
  // for .ptd, segments on NEW's alignment (a note and fresh placement
  // otherwise). Notes go to the summary.
  void plan(const std::vector<StoredTensor>& tensors, const PackOptions& options,
            PackSummary& summary);
  // NEW's groups without what the reused shards serve: what goes to new shards.
  [[nodiscard]] std::vector<StorageGroup> groups_to_place(
      const std::vector<StorageGroup>& groups) const;
  // Puts the reused shards first in summary.shards (after lay_out_shards
  // filled it with the new ones) and adds their sizes to output_bytes.
  void add_to_summary(PackSummary& summary) const;
  [[nodiscard]] size_t reused_count() const { return reuse_.shards.size(); }

  // Copies every reused shard into `dir`, hashing it as it is read: a file
  // whose SHA-256 is not OLD's is an error naming it (nothing is committed).
  // Adds the shards (first) and the keys they serve to `manifest`, and marks it
  // "oversize" when a reused shard is over NEW's cap (--oversize own-shard).
  void write(const std::vector<StoredTensor>& tensors, const ShardingOptions& sharding,
             const std::filesystem::path& dir, AtomicOutput& output, Progress* progress,
             Manifest& manifest) const;

  // The summary's base figures from NEW's complete manifest (or, in a dry run,
  // without one: no download figure).
  void summarize(const std::vector<StoredTensor>& tensors, const Manifest* written,
                 PackSummary& summary) const;

  // Every path pack reads from OLD (the output may be none of them).
  void add_read_paths(std::vector<std::filesystem::path>& paths) const;

 private:
  std::filesystem::path dir_;
  std::string manifest_name_;
  Manifest old_;
  ReusePlan reuse_;
  std::vector<InputFilePtr> files_;  // per reused shard
};

}  // namespace ptepack::detail
