// What an input is (identify, the one sniffer), where a program's data is (default_data),
// and data files read alone. The reader that opens every kind is verify/reader.cpp.
#include "ptepack/artifact/artifact.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>

#include <fmt/ranges.h>

#include "artifact/input_rules.h"
#include "base/parallel.h"
#include "containers/flat_tensor.h"
#include "containers/safetensors.h"
#include "containers/zip.h"
#include "hash/parallel_hash.h"
#include "json/json_util.h"
#include "ptepack/base/error.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/io/progress.h"

namespace ptepack {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string head_of(const fs::path& path) {
  auto file = InputFile::open(path);
  auto n = std::min<uint64_t>(file->size(), 64);
  auto bytes = file->read_range(0, n);
  return {bytes.begin(), bytes.end()};
}

// A program graph's: the same-stem .safetensors or .safetensors.index.json beside it.
DefaultData graph_default_data(const fs::path& path) {
  DefaultData out;
  auto stem = path;
  stem.replace_extension();
  std::error_code ec;
  for (const char* ext : {".safetensors", ".safetensors.index.json"}) {
    auto candidate = fs::path(stem.string() + ext);
    if (fs::exists(candidate, ec)) {
      out.files.push_back(candidate);
      break;
    }
  }
  return out;
}

}  // namespace

void refuse_data(const std::string& name, const std::vector<fs::path>& data_paths) {
  if (!data_paths.empty()) {
    fail(ErrorCode::usage,
         "{}: @DATA gives a program its data files; this input carries its own data", name);
  }
}

void refuse_missing_data(const std::vector<fs::path>& data_paths) {
  std::error_code ec;
  for (const auto& source : data_paths) {
    const auto status = fs::status(source, ec);
    if (!fs::exists(status)) fail(ErrorCode::io, "{}: no such data file", source.string());
    if (!fs::is_regular_file(status))
      fail(ErrorCode::io, "{}: not a regular file", source.string());
  }
}

DefaultData default_data(const fs::path& pte_path, const pte::Program* pte_program) {
  if (pte_program == nullptr) return graph_default_data(pte_path);
  const auto& program = *pte_program;
  DefaultData out;
  std::error_code ec;
  // A link to a program in a packed directory finds that directory's manifest.
  auto real = fs::canonical(pte_path, ec);
  if (ec) real = pte_path;
  const auto dir = real.parent_path().empty() ? fs::path(".") : real.parent_path();
  const auto manifest_path = dir / "manifest.json";
  // A ptepack manifest (it names ptepack's format) of any version but a program graph's is
  // read as the program's record: one it cannot read is a problem, never a reason to read
  // the program alone. Another tool's manifest.json is not looked at.
  const auto version = ptepack_manifest_version_of(manifest_path);
  if (version && *version != static_cast<uint64_t>(kManifestVersion)) {
    Manifest m;  // no programs when it cannot be read
    try {
      m = read_manifest_file(*InputFile::open(manifest_path), manifest_path.string());
    } catch (const Error& e) {  // the program's record is lost: a problem for every command
      out.manifest_problem = e.what();
    }
    const auto name = real.filename().string();
    const auto size = fs::file_size(real, ec);
    for (const auto& entry : m.programs) {
      if (entry.file != name) continue;
      out.record = DefaultData::Record{manifest_path, entry, {}};
      for (const auto& file : entry.shards) {
        auto shard = std::find_if(m.shards.begin(), m.shards.end(),
                                  [&](const ManifestShard& s) { return s.file == file; });
        out.record->shards.push_back(shard == m.shards.end() ? std::nullopt
                                                             : std::optional(*shard));
      }
      // Listed with its size too: a program copied over it is not it.
      if (ec || entry.size != size) break;
      for (const auto& shard : entry.shards) out.files.push_back(dir / shard);
      out.named_keys = entry.named_data;
      out.note = entry.shards.empty()
                     ? fmt::format("no data files listed for it in {}", manifest_path.string())
                     : fmt::format("data files listed for it in {}: {}", manifest_path.string(),
                                   fmt::join(entry.shards, ", "));
      return out;
    }
  }
  const bool external = std::any_of(program.tensors.begin(), program.tensors.end(),
                                    [](const auto& t) { return t.storage == pte::Storage::external; });
  if (external) {
    auto candidate = pte_path;
    candidate.replace_extension(".ptd");
    if (fs::exists(candidate, ec)) out.files.push_back(candidate);
  }
  return out;
}

std::string_view artifact_kind_name(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::package:
      return "ptn package";
    case ArtifactKind::graph_directory:
      return "packed directory";
    case ArtifactKind::graph:
      return "program graph";
    case ArtifactKind::ptd:
      return "ptd data file";
    case ArtifactKind::safetensors:
      return "safetensors file";
    case ArtifactKind::safetensors_index:
      return "safetensors index";
    case ArtifactKind::pte:
      return "pte program";
    case ArtifactKind::pte_directory:
      return "directory of programs";
  }
  return "artifact";
}

DirectoryPaths directory_paths(const fs::path& path) {
  if (fs::is_directory(path)) return {path, path / "manifest.json"};
  auto dir = path.parent_path();
  return {dir.empty() ? fs::path(".") : dir, path};
}

InputFilePtr open_inside(const fs::path& dir, const std::string& name, const std::string& context) {
  if (!is_plain_file_name(name))
    fail_input("{}: {} is not a plain file name", context, quote(name));
  auto path = dir / name;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    fail(ErrorCode::io, "{}: cannot open {}: missing", context, path.string());
  if (S_ISLNK(st.st_mode))
    fail_input("{}: {} is a symbolic link (refused)", context, path.string());
  if (!S_ISREG(st.st_mode)) fail_input("{}: {} is not a regular file", context, path.string());
  return InputFile::open(path);
}

bool names_a_directory(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  return !ec && fs::exists(status) &&
         (fs::is_directory(status) || path.filename() == "manifest.json");
}

ArtifactKind identify(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    fail(ErrorCode::io, "{}: no such file or directory", path.string());
  const auto filename = path.filename().string();
  if (names_a_directory(path)) {
    return manifest_version_of(directory_paths(path).manifest) ==
                   static_cast<uint64_t>(kManifestProgramsVersion)
               ? ArtifactKind::pte_directory
               : ArtifactKind::graph_directory;
  }
  if (ends_with(filename, ".safetensors.index.json")) return ArtifactKind::safetensors_index;
  const auto head = fs::is_regular_file(status) ? head_of(path) : std::string();
  if (head.size() >= 4 && head.compare(0, 4, "PK\x03\x04") == 0) return ArtifactKind::package;
  if (head.size() >= 8 && head.compare(4, 4, "FT01") == 0) return ArtifactKind::ptd;
  if (ends_with(filename, ".safetensors")) return ArtifactKind::safetensors;
  if (pte::looks_like_pte(std::span(reinterpret_cast<const uint8_t*>(head.data()), head.size())) ||
      path.extension() == ".pte") {
    return ArtifactKind::pte;
  }
  return ArtifactKind::graph;
}

TensorTable load_data_file(const fs::path& path) {
  switch (identify(path)) {
    case ArtifactKind::safetensors_index:
      return safetensors::read_index(path);
    case ArtifactKind::ptd:
      return ptd::read_file(InputFile::open(path)).tensors;
    case ArtifactKind::safetensors:
      return safetensors::read(InputFile::open(path)).tensors;
    default:
      break;
  }
  fail(ErrorCode::usage,
       "{}: unknown data file type (expected .safetensors, .safetensors.index.json or .ptd)",
       path.string());
}

}  // namespace ptepack
