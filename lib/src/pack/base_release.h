// pack --base OLD: the previous release whose shard files a new one keeps whole.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "core/base_reuse.h"
#include "core/directory_plan.h"
#include "ptepack/core/storage.h"
#include "ptepack/io/output_file.h"
#include "ptepack/io/progress.h"
#include "ptepack/pack/pack.h"
#include "pte/externalize.h"
#include "verify/directory_check.h"

namespace ptepack::detail {

class BaseRelease {
 public:
  // What the previous directory is to the output: --base OLD, a release the output follows
  // (notes, the summary's base figures), or a lone packed directory repacked, whose shard
  // layout the output keeps (layout_to_keep in pack.cpp): planned the same way, silently.
  enum class Role { release, layout };

  // Reads OLD (a packed directory or its manifest.json) and checks its
  // structure with verify's directory check, on `jobs` threads: a base of
  // another `version` than the output's kind is a usage error, a damaged one
  // is refused with verify's problem lines (exit 1). Of the shards' tables
  // only what plan() needs is kept: each shard's stored tensor count and
  // whether its segments are on NEW's `alignment`.
  BaseRelease(const std::filesystem::path& path, int version, uint64_t alignment, unsigned jobs,
              Role role = Role::release);
  ~BaseRelease();
  BaseRelease(const BaseRelease&) = delete;
  BaseRelease& operator=(const BaseRelease&) = delete;

  // The keys OLD's programs give their EXTERNAL tensors, with their digests
  // (a directory of programs), so a program NEW packs again keeps them.
  [[nodiscard]] PreviousKeys previous_keys() const;

  // Decides which of OLD's shards NEW keeps (plan_reuse): each must carry its
  // digest in its name (an error naming the file otherwise) and, for .ptd,
  // have segments on NEW's alignment and fit NEW's limits (a note and fresh
  // placement otherwise). Notes go to the summary.
  void plan(const std::vector<StoredTensor>& tensors, const PackOptions& options,
            PackSummary& summary);
  // The plan's decision and the manifest it was made on (plan_directory takes both).
  [[nodiscard]] const ReusePlan& reuse() const { return reuse_; }
  [[nodiscard]] const Manifest& manifest() const { return *old_; }

  // Copies every kept shard into `dir`, hashing it as it is read: a file
  // whose SHA-256 is not OLD's is an error naming it (nothing is committed).
  void copy_kept(const std::filesystem::path& dir, AtomicOutput& output, Progress* progress) const;

  // The summary's base figures from NEW's plan and complete manifest (or, in a
  // dry run, without one: no download figure); none for Role::layout.
  void summarize(const std::vector<StoredTensor>& tensors, const DirectoryPlan& plan,
                 const Manifest* written, PackSummary& summary) const;

  // Every path pack reads from OLD (the output may be none of them).
  void add_read_paths(std::vector<std::filesystem::path>& paths) const;

 private:
  std::filesystem::path dir_;
  Role role_ = Role::release;
  VerifyOptions check_options_;  // the check holds references to these two
  VerifyReport check_report_;
  std::unique_ptr<DirectoryCheck> check_;
  const Manifest* old_ = nullptr;  // the check's
  ReusePlan reuse_;
  std::vector<InputFilePtr> files_;  // per reused shard
  // Per OLD shard: stored tensors (keys sharing bytes count once), and why its
  // segments are not on NEW's alignment (empty when they are).
  struct ShardFacts {
    size_t stored = 0;
    std::string unaligned;
  };
  std::vector<ShardFacts> facts_;
  void read_shard_facts(uint64_t alignment);
};

}  // namespace ptepack::detail
