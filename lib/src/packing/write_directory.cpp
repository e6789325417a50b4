// Directory writer: program.ptg, content-named weight shards, index (safetensors) and manifest.
#include <filesystem>

#include <algorithm>

#include "pack_internal.h"
#include "ptepack/base/error.h"
#include "ptepack/formats/manifest.h"
#include "ptepack/formats/safetensors.h"
#include "ptepack/packing/file_content.h"
#include "ptepack/packing/shard_layout.h"

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
  file.finish(bytes.size());
  return sha256(bytes);
}

void check_readable_size(const std::string& display, uint64_t size, uint64_t limit) {
  if (size > limit) {
    fail_input("{}: {} bytes would exceed the limit of {} bytes that readers accept", display, size,
               limit);
  }
}

uint64_t write_manifest(const fs::path& dir, const std::string& display, const Manifest& manifest) {
  auto text = manifest_to_json(manifest);
  check_readable_size(display, text.size(), Limits::max_manifest_bytes);
  write_small_file(dir / "manifest.json", display, text);
  return text.size();
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

void write_shards(const std::vector<StoredTensor>& tensors, const std::vector<StorageGroup>& groups,
                  const std::vector<PlannedShard>& plan, const std::vector<FileContent>& contents,
                  const PackOptions& options, AtomicOutput& output, Progress* progress,
                  PackSummary& summary, Manifest& manifest) {
  const auto& dir = output.temp_path();
  auto display = [&](const std::string& name) { return output.display_name(name); };
  const char* ext = options.sharding.format == ShardFormat::ptd ? "ptd" : "safetensors";
  manifest.shard_format = std::string(shard_format_name(options.sharding.format));
  manifest.max_shard_bytes = options.sharding.max_shard_bytes;
  manifest.cap_mode = std::string(cap_mode_name(options.sharding.cap_mode));
  // Recorded only when a shard is over the cap, so outputs without one stay the same.
  manifest.oversize_own_shard =
      std::any_of(plan.begin(), plan.end(), [](const PlannedShard& s) { return s.oversize; });

  // Shards are independent files: write them in parallel, each hashed as it streams.
  std::vector<Digest> digests(plan.size());
  unsigned jobs = effective_jobs(options.jobs);
  parallel_for(plan.size(), jobs, [&](size_t s) {
    auto temp_name = fmt::format(".shard-{}.tmp", s);
    OutputFile file(dir / temp_name, display(temp_name));
    StreamOptions stream;
    stream.sha256 = true;
    digests[s] = write_content(file, contents[s], stream, progress).sha256;
    file.finish(contents[s].size);
  });
  for (size_t s = 0; s < plan.size(); ++s) {
    auto hex = to_hex(digests[s]);
    auto name = fmt::format("{}-{}.{}", options.shard_prefix, hex.substr(0, 16), ext);
    std::error_code ec;
    fs::rename(dir / fmt::format(".shard-{}.tmp", s), dir / name, ec);
    if (ec) fail(ErrorCode::io, "{}: cannot rename shard: {}", display(name), ec.message());
    summary.shards[s].file = name;
    manifest.shards.push_back(
        {name, hex, contents[s].size, plan[s].payload_bytes, summary.shards[s].keys});
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

void write_directory(PreparedPack& prepared, const PackOptions& options, AtomicOutput* output,
                     Progress* progress, PackSummary& summary) {
  const auto& tensors = prepared.tensors;
  const auto& sharding = options.sharding;
  auto groups =
      group_tensors(tensors, sharding.format == ShardFormat::ptd ? DedupRule::bytes
                                                                 : DedupRule::dtype_shape_bytes);
  summarize_groups(tensors, groups, summary, progress);
  auto plan = plan_for_output(tensors, groups, options);
  summary.output_bytes = prepared.program_bytes().size();
  auto contents = lay_out_shards(tensors, groups, plan, options, summary);
  if (output == nullptr) return;

  const auto& dir = output->temp_path();
  auto display = [&](const std::string& name) { return output->display_name(name); };
  Manifest manifest;
  manifest.program = {"program.ptg",
                      to_hex(write_small_file(dir / "program.ptg", display("program.ptg"),
                                              prepared.program_bytes())),
                      prepared.program_bytes().size()};
  prepared.program = {};  // written: its memory is free for the manifest
  write_shards(tensors, groups, plan, contents, options, *output, progress, summary, manifest);
  manifest.state = summary.state;
  if (sharding.format == ShardFormat::safetensors) {
    auto index = safetensors::index_json(manifest.total_size, weight_map_of(manifest));
    check_readable_size(display("model.safetensors.index.json"), index.size(),
                        Limits::max_header_bytes);
    write_small_file(dir / "model.safetensors.index.json", display("model.safetensors.index.json"),
                     index);
    summary.output_bytes += index.size();
  }
  // The manifest is written last: its presence marks a complete directory.
  summary.output_bytes += write_manifest(dir, display("manifest.json"), manifest);
}

}  // namespace ptepack::detail
