// pack --base OLD: reading the previous release, keeping its shards, and the download.
#include "pack/base_release.h"

#include <algorithm>
#include <set>

#include "base/format_util.h"
#include "base/parallel.h"
#include "core/file_content.h"
#include "pack/pack_internal.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/core/release_files.h"
#include "ptepack/pte/pte.h"

namespace ptepack::detail {

namespace fs = std::filesystem;

namespace {

// Refuses (usage error) a --base that is missing or not a directory or its
// manifest.json, before the base is read or the output checked against it. A
// directory whose manifest is missing is damage, which the check reports as
// every command does (file_missing).
void check_base_path(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) fail(ErrorCode::usage, "--base {}: no such directory", path.string());
  if (!has_checkable_manifest(path)) {
    fail(ErrorCode::usage, "--base {}: not a packed directory (a directory with manifest.json)",
         path.string());
  }
}

}  // namespace

BaseRelease::BaseRelease(const fs::path& path, int version, uint64_t alignment, unsigned jobs,
                         Role role)
    : role_(role) {
  check_base_path(path);
  dir_ = directory_paths(path).dir;
  // OLD is read and checked once, by verify's own directory check (its
  // structure: manifest, files, shard tables, key lists, programs); its bytes
  // are hashed where a reused shard is copied.
  check_options_.jobs = jobs;
  check_options_.tensors = true;  // reuse trusts each tensor's recorded digest
  check_ = std::make_unique<DirectoryCheck>(path, check_options_, check_report_);
  const bool read = check_->structure();
  if (read) check_->program_bytes();
  if (read && check_->manifest()->version != version) {
    const int found = check_->manifest()->version;
    fail(ErrorCode::usage, "--base {}: it holds {}, and this pack writes {}", path.string(),
         found == kManifestProgramsVersion ? ".pte programs" : "a program graph",
         version == kManifestProgramsVersion ? ".pte programs" : "a program graph");
  }
  // A damaged base is refused as verify reports it, and said to be the base.
  if (!check_report_.problems.empty()) {
    auto first = check_report_.problems.front();
    first.text += fmt::format(
        "\n--base {}: the previous release is damaged (ptepack verify {} lists why); nothing "
        "written",
        path.string(), path.string());
    throw ProblemError(first);
  }
  old_ = check_->manifest();
  read_shard_facts(alignment);
  check_->free_tables();  // OLD's tensor tables are not kept for the whole pack
}

void BaseRelease::read_shard_facts(uint64_t alignment) {
  facts_.resize(old_->shards.size());
  for (size_t i = 0; i < old_->shards.size(); ++i) {
    // Stored tensors as the file holds them (keys sharing bytes count once).
    std::set<std::pair<uint64_t, uint64_t>> stored;
    for (const auto& [key, t] : check_->shard_tensors(i)) {
      stored.emplace(t.bytes.offset, t.bytes.size);
      if (old_->shard_format == ShardFormat::ptd && t.bytes.size > 0 &&
          t.bytes.offset % alignment != 0 && facts_[i].unaligned.empty()) {
        facts_[i].unaligned =
            fmt::format("its shard {} has tensor {} at offset {}, not on --alignment {}",
                        old_->shards[i].file, quote(key), t.bytes.offset, alignment);
      }
    }
    facts_[i].stored = stored.size();
  }
}

BaseRelease::~BaseRelease() = default;

PreviousKeys BaseRelease::previous_keys() const {
  PreviousKeys keys;
  for (size_t p = 0; p < old_->programs.size(); ++p) {
    const auto& entry = old_->programs[p];
    auto program = pte::read(check_->program_file(p));
    for (const auto& t : program.tensors) {
      if (t.storage != pte::Storage::external) continue;
      auto it = old_->tensors.find(t.fqn);
      if (it == old_->tensors.end()) continue;  // OLD's verify would refuse it
      const auto& recorded = it->second;
      TensorData layout;
      layout.dtype = recorded.dtype;
      layout.shape = recorded.shape;
      layout.dim_order = normalized_dim_order(recorded.dim_order);
      layout.opaque = recorded.opaque;
      layout.bytes.size = recorded.nbytes;
      keys[{entry.file, program.plans[t.plan], t.value}] = {t.fqn, recorded.sha256, layout};
    }
  }
  return keys;
}

void BaseRelease::plan(const std::vector<StoredTensor>& tensors, const PackOptions& options,
                       PackSummary& summary) {
  reuse_ = plan_reuse(tensors, *old_, options.sharding, options.shard_prefix);
  auto fresh = [&](const std::string& why) {
    if (role_ == Role::release) {
      summary.notes.push_back(fmt::format("--base {}: {}; no shard is reused", dir_.string(), why));
    }
    reuse_ = ReusePlan{{}, std::vector<size_t>(tensors.size(), ReusePlan::npos), why};
    files_.clear();
  };
  if (reuse_.fresh_reason) return fresh(*reuse_.fresh_reason);
  // Each reused file as OLD's manifest describes it: its size and keys now,
  // its bytes when it is copied.
  files_.assign(reuse_.shards.size(), nullptr);
  std::vector<std::string> unfit(reuse_.shards.size());  // why a file cannot be kept
  const auto& sharding = options.sharding;
  parallel_for(reuse_.shards.size(), effective_jobs(options.jobs), [&](size_t r) {
    const size_t index = reuse_.shards[r].old_index;
    const auto& shard = old_->shards[index];
    auto file = check_->shard_file(index);  // read, its size and keys checked, by structure()
    if (!shard.file.ends_with(shard_file_name("", shard.sha256, old_->shard_format))) {
      throw ProblemError(
          {ProblemId::shard_name, file->name(),
           fmt::format("{}: name does not end in its manifest SHA-256's 16 digits (the base is "
                       "damaged)",
                       file->name())});
    }
    // The limits again, on the stored tensors the file holds (stale ones
    // included); its payload is the manifest's, which structure() held the file to.
    unfit[r] = facts_[index].unaligned;
    if (auto why = shard_over_limits(shard.file, shard.size, shard.payload_bytes,
                                     facts_[index].stored, sharding);
        !why.empty()) {
      unfit[r] = std::move(why);
    }
    files_[r] = std::move(file);
  });
  for (const auto& why : unfit) {
    if (!why.empty()) return fresh(why);
  }
}

void BaseRelease::copy_kept(const fs::path& dir, AtomicOutput& output, Progress* progress) const {
  // One read of each file: copied and hashed in the same pass.
  for (size_t r = 0; r < reuse_.shards.size(); ++r) {
    const auto& s = old_->shards[reuse_.shards[r].old_index];
    FileContent content;
    content.size = s.size;
    content.pieces.push_back({0, {}, ByteRange{files_[r], 0, s.size}});
    OutputFile file(dir / s.file, output.display_name(s.file));
    const auto digest = write_hashed(file, content, progress, OutputFile::Durability::at_commit);
    if (to_hex(digest) != s.sha256) {
      throw ProblemError(
          {ProblemId::file_changed, files_[r]->name(),
           fmt::format("{}: SHA-256 differs from the manifest (the base is damaged); nothing "
                       "written",
                       files_[r]->name())});
    }
  }
}

void BaseRelease::summarize(const std::vector<StoredTensor>& tensors, const DirectoryPlan& plan,
                            const Manifest* written, PackSummary& summary) const {
  if (role_ == Role::layout) {
    // The shards are the input's own: listed as any pack lists its shards, not as reused.
    for (auto& shard : summary.shards) {
      shard.reused = false;
      shard.stale_bytes = 0;
    }
    uint64_t stale = 0;
    for (const auto& r : reuse_.shards) stale += r.stale_bytes;
    if (stale > 0) {
      summary.notes.push_back(fmt::format(
          "{}: shard layout kept, with {} of stale bytes in its shards (any shard option, "
          "such as the recorded --max-shard-bytes, plans afresh without them)",
          dir_.string(), human_bytes(stale)));
    }
    return;
  }
  BaseSummary b;
  b.path = dir_.string();
  b.fresh_reason = reuse_.fresh_reason;
  b.shards_reused = reuse_.shards.size();
  b.shards_new = plan.placed.size();
  for (const auto& r : reuse_.shards) b.stale_bytes += r.stale_bytes;
  // Keys placed again beside a copy a reused shard keeps under another key.
  std::set<Digest> in_reused;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (reuse_.served_by[t] != ReusePlan::npos) in_reused.insert(tensors[t].sha256);
  }
  for (const auto& r : reuse_.shards) {
    for (const auto& key : r.stale) {
      if (auto it = old_->tensors.find(key); it != old_->tensors.end())
        in_reused.insert(it->second.sha256);
    }
  }
  std::set<Digest> again;
  std::set<Digest> changed;  // the content of keys whose (key, SHA-256) OLD lacks
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto& nt = tensors[t];
    if (reuse_.served_by[t] == ReusePlan::npos && in_reused.count(nt.sha256)) {
      ++b.stored_again_keys;
      if (again.insert(nt.sha256).second) b.stored_again_bytes += nt.data.bytes.size;
    }
    auto old = old_->tensors.find(nt.key);
    if ((old == old_->tensors.end() || old->second.sha256 != nt.sha256) &&
        changed.insert(nt.sha256).second) {
      b.changed_bytes += nt.data.bytes.size;
    }
  }
  if (written != nullptr) {
    const auto files = release_files(*written);
    auto delta = file_delta(release_files(*old_), files);
    b.download_bytes = delta.download_bytes;
    std::set<std::string> shard_files;
    for (const auto& s : written->shards) shard_files.insert(s.file);
    for (const auto& f : delta.added) {
      // Program files OLD lacks count as changed bytes whole; the index is derived.
      if (!shard_files.count(f.file) && f.file != "model.safetensors.index.json")
        b.changed_bytes += f.size;
    }
    for (const auto& f : files) b.release_bytes += f.size;
  }
  summary.base = std::move(b);
}

void BaseRelease::add_read_paths(std::vector<fs::path>& paths) const {
  paths.push_back(dir_);
  for (const auto& s : old_->shards) paths.push_back(dir_ / s.file);
}

}  // namespace ptepack::detail
