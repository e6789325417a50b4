// Directory writer: program.ptg, content-named weight shards, index (safetensors) and manifest.
#include <filesystem>

#include <algorithm>

#include "pack/base_release.h"
#include "pack/pack_internal.h"
#include "ptepack/sign/sign.h"
#include "ptepack/base/error.h"
#include "base/parallel.h"
#include "ptepack/containers/manifest.h"
#include "containers/safetensors.h"
#include "core/file_content.h"
#include "core/shard_layout.h"

namespace ptepack::detail {
namespace {

namespace fs = std::filesystem;

// The bytes of one planned shard file.
FileContent shard_content(const std::vector<StoredTensor>& tensors,
                          const std::vector<StorageGroup>& groups, const PlannedShard& shard,
                          const ShardingOptions& options, std::vector<std::string>& keys) {
  auto layout = layout_shard(tensors, groups, shard.groups, options);
  FileContent content;
  content.size = layout.file_size;
  content.pieces.push_back({0, std::move(layout.head), {}});
  for (const auto& p : layout.placements)
    content.pieces.push_back({p.offset, {}, tensors[p.tensor].data.bytes});
  keys = std::move(layout.keys);
  return content;
}

}  // namespace

Digest write_small_file(const fs::path& path, const std::string& display, std::string_view bytes) {
  OutputFile file(path, display);
  file.write_at(0, bytes);
  file.finish(bytes.size(), OutputFile::Durability::at_commit);  // a directory output's file
  return sha256(bytes);
}

void check_readable_size(const std::string& display, uint64_t size, uint64_t limit) {
  if (size > limit) {
    fail_input("{}: {} bytes would exceed the limit of {} bytes that readers accept", display, size,
               limit);
  }
}

ReleaseStamp release_stamp(const PackOptions& options,
                           const std::vector<const Manifest*>& input_manifests) {
  ReleaseStamp stamp;
  if (!options.release) {
    if (input_manifests.size() == 1 && input_manifests.front() != nullptr && !options.base) {
      stamp.release = input_manifests.front()->release;  // a repack carries both unchanged
      stamp.base_manifest_sha256 = input_manifests.front()->base_manifest_sha256;
    }
    return stamp;
  }
  stamp.release = options.release;
  if (options.base) {
    const auto manifest_path = directory_paths(*options.base).manifest;
    auto file = InputFile::open(manifest_path);
    if (file->size() > Limits::max_manifest_bytes) {
      fail_input("{}: manifest too large", manifest_path.string());
    }
    auto bytes = file->read_range(0, file->size());
    const std::string text(bytes.begin(), bytes.end());
    const auto old = parse_manifest(text, manifest_path.string());
    if (old.release && *options.release <= *old.release) {
      fail(ErrorCode::usage, "--release {} must be greater than --base {}'s release {}",
           *options.release, options.base->string(), *old.release);
    }
    stamp.base_manifest_sha256 = to_hex(sha256(std::string_view(text)));
  }
  return stamp;
}

uint64_t write_manifest(const PackOptions& options, const fs::path& dir, const std::string& display,
                        Manifest& manifest, const ReleaseStamp& stamp) {
  manifest.release = stamp.release;
  manifest.base_manifest_sha256 = stamp.base_manifest_sha256;
  auto text = manifest_to_json(manifest);
  check_readable_size(display, text.size(), Limits::max_manifest_bytes);
  write_small_file(dir / "manifest.json", display, text);
  if (!options.sign_key) return text.size();
  const auto key = SigningKey::load(*options.sign_key, options.sign_password);
  const auto bundle = sign_manifest(key, options.output.filename().string(), manifest, text);
  write_small_file(dir / std::string(kSignatureFileName), display, bundle);
  return text.size() + bundle.size();
}

std::vector<PlannedShard> plan_for_output(const std::vector<StoredTensor>& tensors,
                                          const std::vector<StorageGroup>& groups,
                                          const PackOptions& options) {
  try {
    return plan_shards(tensors, groups, options.sharding);
  } catch (const Error& e) {
    throw Error(e.code(),
                options.output.string() + ": " + e.what());  // name the output in the message
  }
}

std::vector<FileContent> lay_out_shards(const std::vector<StoredTensor>& tensors,
                                        const std::vector<StorageGroup>& groups,
                                        const std::vector<PlannedShard>& plan,
                                        const PackOptions& options, PackSummary& summary) {
  const auto& sharding = options.sharding;
  std::vector<FileContent> contents(plan.size());
  summary.shards.resize(plan.size());
  for (size_t s = 0; s < plan.size(); ++s) {
    contents[s] = shard_content(tensors, groups, plan[s], sharding, summary.shards[s].keys);
    if (sharding.max_shard_bytes && sharding.cap_mode == CapMode::file && !plan[s].oversize &&
        contents[s].size > *sharding.max_shard_bytes) {
      fail(ErrorCode::internal, "shard {} of {} bytes exceeds the planned cap {}", s + 1,
           contents[s].size, *sharding.max_shard_bytes);
    }
    summary.shards[s].size = contents[s].size;
    summary.shards[s].payload_bytes = plan[s].payload_bytes;
    summary.output_bytes += contents[s].size;
  }
  return contents;
}

namespace {

// Writes the planned shards in parallel under temporary names; their digests.
std::vector<Digest> write_shard_files(const std::vector<PlannedShard>& plan,
                                      const std::vector<FileContent>& contents,
                                      const PackOptions& options, AtomicOutput& output,
                                      Progress* progress, const std::stop_token& stop = {}) {
  const auto& dir = output.temp_path();
  // Shards are independent files: write them in parallel, each hashed as it streams.
  std::vector<Digest> digests(plan.size());
  parallel_for(plan.size(), effective_jobs(options.jobs), [&](size_t s) {
    auto temp_name = fmt::format(".shard-{}.tmp", s);
    OutputFile file(dir / temp_name, output.display_name(temp_name));
    StreamOptions stream;
    stream.sha256 = true;
    stream.stop = stop;
    digests[s] = write_content(file, contents[s], stream, progress).sha256;
    file.finish(contents[s].size, OutputFile::Durability::at_commit);
  });
  return digests;
}

// Renames written shards to their content names; fills their names into
// summary and the manifest's shard fields, shards and tensors.
void name_shards(const std::vector<StoredTensor>& tensors, const std::vector<StorageGroup>& groups,
                 const std::vector<PlannedShard>& plan, const std::vector<FileContent>& contents,
                 const std::vector<Digest>& digests, const PackOptions& options,
                 AtomicOutput& output, PackSummary& summary, Manifest& manifest, size_t first) {
  const auto& dir = output.temp_path();
  manifest.shard_format = options.sharding.format;
  manifest.max_shard_bytes = options.sharding.max_shard_bytes;
  manifest.cap_mode = options.sharding.cap_mode;
  // The options a lone repack takes (apply_recorded_options), when not the default.
  const ShardingOptions defaults;
  if (options.sharding.format == ShardFormat::ptd && options.sharding.alignment != defaults.alignment)
    manifest.alignment = options.sharding.alignment;
  if (options.shard_prefix != PackOptions{}.shard_prefix) manifest.shard_prefix = options.shard_prefix;
  manifest.max_shard_tensors = options.sharding.max_shard_tensors;
  // Recorded only when a shard is over the cap, so outputs without one stay the same.
  manifest.oversize_own_shard =
      manifest.oversize_own_shard ||  // a reused shard over the cap (--base)
      std::any_of(plan.begin(), plan.end(), [](const PlannedShard& s) { return s.oversize; });
  for (size_t s = 0; s < plan.size(); ++s) {
    auto hex = to_hex(digests[s]);
    auto name = shard_file_name(options.shard_prefix, hex, options.sharding.format);
    std::error_code ec;
    fs::rename(dir / fmt::format(".shard-{}.tmp", s), dir / name, ec);
    if (ec) {
      fail(ErrorCode::io, "{}: cannot rename shard: {}", output.display_name(name), ec.message());
    }
    summary.shards[first + s].file = name;
    manifest.shards.push_back(
        {name, hex, contents[s].size, plan[s].payload_bytes, summary.shards[first + s].keys});
    manifest.total_size += plan[s].payload_bytes;
    for (size_t g : plan[s].groups) {
      const auto& members = groups[g].members;
      const auto& owner = tensors[members[0]];
      for (size_t index : members) {
        const auto& t = tensors[index];
        ManifestTensor mt{name,         t.sha256, t.data.bytes.size, t.data.dtype, t.data.shape,
                          t.is_mutable, {},       t.data.dim_order,  t.data.opaque};
        if (index != members[0]) mt.alias_of = owner.key;
        manifest.tensors.emplace(t.key, std::move(mt));
      }
    }
  }
}

}  // namespace

void write_shards(const std::vector<StoredTensor>& tensors, const std::vector<StorageGroup>& groups,
                  const std::vector<PlannedShard>& plan, const std::vector<FileContent>& contents,
                  const PackOptions& options, AtomicOutput& output, Progress* progress,
                  PackSummary& summary, Manifest& manifest, size_t first) {
  auto digests = write_shard_files(plan, contents, options, output, progress);
  name_shards(tensors, groups, plan, contents, digests, options, output, summary, manifest, first);
}

namespace {

DedupRule directory_rule(const PackOptions& options) {
  return options.sharding.format == ShardFormat::ptd ? DedupRule::bytes
                                                     : DedupRule::dtype_shape_bytes;
}

// Groups, plan and every shard's layout of the tensors' digests; fills `summary`.
// With a base, layout.groups are the groups placed in new shards.
DirectoryLayout lay_out_directory(const PreparedPack& prepared, const PackOptions& options,
                                  Progress* progress, PackSummary& summary,
                                  BaseRelease* base = nullptr) {
  const auto& tensors = prepared.tensors;
  DirectoryLayout layout;
  layout.groups = group_tensors(tensors, directory_rule(options));
  summarize_groups(tensors, layout.groups, summary, progress);
  if (base != nullptr) {
    base->plan(tensors, options, summary);
    layout.groups = base->groups_to_place(layout.groups);
  }
  layout.plan = plan_for_output(tensors, layout.groups, options);
  summary.output_bytes = prepared.program_bytes().size();
  layout.contents = lay_out_shards(tensors, layout.groups, layout.plan, options, summary);
  if (base != nullptr) base->add_to_summary(summary);
  return layout;
}

// program.ptg and the shards under temporary names. The program is freed once
// written, unless it may be needed again (a prediction not yet confirmed).
WrittenFiles write_files(PreparedPack& prepared, const DirectoryLayout& layout,
                         const PackOptions& options, AtomicOutput& output, Progress* progress,
                         bool keep_program, const std::stop_token& stop = {}) {
  WrittenFiles files;
  files.program = write_small_file(output.temp_path() / "program.ptg",
                                   output.display_name("program.ptg"), prepared.program_bytes());
  files.program_size = prepared.program_bytes().size();
  if (!keep_program) prepared.program = {};  // its memory is free for the manifest
  files.shards = write_shard_files(layout.plan, layout.contents, options, output, progress, stop);
  return files;
}

// Names the written shards by their digests, then writes the index and, last,
// the manifest (its presence marks a complete directory).
void finish_directory(const PreparedPack& prepared, const DirectoryLayout& layout,
                      const WrittenFiles& files, const PackOptions& options, AtomicOutput& output,
                      PackSummary& summary, const BaseRelease* base = nullptr,
                      Progress* progress = nullptr) {
  const auto& tensors = prepared.tensors;
  const auto& dir = output.temp_path();
  auto display = [&](const std::string& name) { return output.display_name(name); };
  Manifest manifest;
  manifest.program = {"program.ptg", to_hex(files.program), files.program_size};
  if (base != nullptr) base->write(tensors, options.sharding, dir, output, progress, manifest);
  name_shards(tensors, layout.groups, layout.plan, layout.contents, files.shards, options, output,
              summary, manifest, base != nullptr ? base->reused_count() : 0);
  manifest.state = summary.state;
  if (options.sharding.format == ShardFormat::safetensors) {
    auto index = safetensors::index_json(manifest.total_size, weight_map_of(manifest));
    check_readable_size(display("model.safetensors.index.json"), index.size(),
                        Limits::max_header_bytes);
    write_small_file(dir / "model.safetensors.index.json", display("model.safetensors.index.json"),
                     index);
    summary.output_bytes += index.size();
  }
  summary.output_bytes +=
      write_manifest(options, dir, display("manifest.json"), manifest, prepared.stamp);
  if (base != nullptr) base->summarize(tensors, &manifest, summary);
}

}  // namespace

void write_directory(PreparedPack& prepared, const PackOptions& options, AtomicOutput* output,
                     Progress* progress, PackSummary& summary) {
  BaseRelease* kept = prepared.base.get();
  auto layout = lay_out_directory(prepared, options, progress, summary, kept);
  if (output == nullptr) {
    if (kept != nullptr) kept->summarize(prepared.tensors, nullptr, summary);
    return;
  }
  auto files = write_files(prepared, layout, options, *output, progress, false);
  finish_directory(prepared, layout, files, options, *output, summary, kept, progress);
}

std::optional<DirectorySpeculation> write_directory_while_hashing(
    PreparedPack& prepared, const PackOptions& options, AtomicOutput& output, Progress* progress,
    const PackSummary& summary, const std::function<void()>& hash) {
  predict_digests(prepared.tensors);
  DirectorySpeculation speculation;
  speculation.summary.output = summary.output;
  try {
    speculation.layout = lay_out_directory(prepared, options, progress, speculation.summary);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::internal) throw;  // a bug, on any groups
    return std::nullopt;  // the real plan decides, once the inputs are hashed
  }
  write_beside_hashing(
      [&](const std::stop_token& stop) {
        speculation.files =
            write_files(prepared, speculation.layout, options, output, progress, true, stop);
      },
      hash, speculation.write_error);
  return speculation;
}

bool confirm_directory(PreparedPack& prepared, DirectorySpeculation& speculation,
                       const PackOptions& options, AtomicOutput& output, Progress* progress,
                       PackSummary& summary) {
  auto groups = group_tensors(prepared.tensors, directory_rule(options));
  if (!same_groups(groups, speculation.layout.groups)) return false;
  if (speculation.write_error) std::rethrow_exception(speculation.write_error);
  prepared.program = {};
  summarize_groups(prepared.tensors, groups, summary, progress);
  summary.shards = std::move(speculation.summary.shards);
  summary.output_bytes = speculation.summary.output_bytes;
  finish_directory(prepared, speculation.layout, speculation.files, options, output, summary);
  summary.written_while_hashing = true;
  return true;
}

}  // namespace ptepack::detail
