// A packed directory's files by name and digest, and the download between two releases.
#include "ptepack/core/release_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "containers/safetensors.h"
#include "ptepack/base/error.h"
#include "ptepack/hash/sha256.h"

namespace ptepack {

std::vector<ReleaseFile> release_files(const Manifest& manifest) {
  std::vector<ReleaseFile> files;
  if (manifest.version == kManifestProgramsVersion) {
    for (const auto& p : manifest.programs) files.push_back({p.file, p.sha256, p.size});
  } else {
    files.push_back({manifest.program.file, manifest.program.sha256, manifest.program.size});
  }
  for (const auto& s : manifest.shards) files.push_back({s.file, s.sha256, s.size});
  if (manifest.shard_format == ShardFormat::safetensors) {
    const auto index = safetensors::index_json(manifest.total_size, weight_map_of(manifest));
    files.push_back(
        {"model.safetensors.index.json", to_hex(sha256(std::string_view(index))), index.size()});
  }
  std::sort(files.begin(), files.end(),
            [](const ReleaseFile& x, const ReleaseFile& y) { return x.file < y.file; });
  return files;
}

std::optional<size_t> find_program(const Manifest& manifest, std::string_view name) {
  for (size_t p = 0; p < manifest.programs.size(); ++p) {
    std::string_view file = manifest.programs[p].file;
    if (file == name || (file.ends_with(".pte") && file.substr(0, file.size() - 4) == name))
      return p;
  }
  return std::nullopt;
}

std::vector<ReleaseFile> program_files(const Manifest& manifest,
                                       const std::vector<std::string>& programs,
                                       const std::string& manifest_name) {
  if (manifest.version != kManifestProgramsVersion) {
    fail(ErrorCode::usage, "{}: --program applies to a directory of .pte programs",
         manifest_name);
  }
  std::map<std::string_view, const ManifestShard*> shards;
  for (const auto& s : manifest.shards) shards.emplace(s.file, &s);
  std::map<std::string, ReleaseFile> files;
  for (const auto& name : programs) {
    const auto p = find_program(manifest, name);
    if (!p) {
      std::vector<std::string_view> names;
      for (const auto& entry : manifest.programs) names.push_back(entry.file);
      fail(ErrorCode::usage, "{}: --program {}: no such program (its programs: {})",
           manifest_name, quote(name), fmt::join(names, ", "));
    }
    const auto& entry = manifest.programs[*p];
    files[entry.file] = {entry.file, entry.sha256, entry.size};
    for (const auto& shard : entry.shards) {
      if (auto it = shards.find(shard); it != shards.end())
        files[shard] = {shard, it->second->sha256, it->second->size};
    }
  }
  std::vector<ReleaseFile> out;
  for (auto& [name, file] : files) out.push_back(std::move(file));
  return out;
}

FileDelta file_delta(const std::vector<ReleaseFile>& old_files,
                     const std::vector<ReleaseFile>& new_files) {
  std::map<std::string_view, std::string_view> old_digest;
  for (const auto& f : old_files) old_digest.emplace(f.file, f.sha256);
  std::map<std::string_view, std::string_view> new_digest;
  for (const auto& f : new_files) new_digest.emplace(f.file, f.sha256);
  FileDelta delta;
  for (const auto& f : new_files) {
    auto it = old_digest.find(f.file);
    if (it != old_digest.end() && it->second == f.sha256) {
      delta.unchanged.push_back(f);
    } else {
      delta.added.push_back(f);
      delta.download_bytes += f.size;
    }
  }
  for (const auto& f : old_files) {
    auto it = new_digest.find(f.file);
    if (it == new_digest.end() || it->second != f.sha256) delta.removed.push_back(f);
  }
  return delta;
}

}  // namespace ptepack
