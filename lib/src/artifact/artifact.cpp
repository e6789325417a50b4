// Artifact sniffing and loading: packages, directories, programs and data files.
#include "ptepack/artifact/artifact.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>

#include <fmt/ranges.h>

#include "ptepack/base/error.h"
#include "base/parallel.h"
#include "containers/flat_tensor.h"
#include "containers/safetensors.h"
#include "containers/zip.h"
#include "hash/parallel_hash.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/io/progress.h"
#include "json/json_util.h"

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

// Moves every entry of `from` into `into` (nodes relinked, keys not copied).
// A key both hold stays behind in `from`: the smallest is reported.
void merge_table(TensorTable& into, TensorTable&& from, const std::string& source) {
  into.merge(from);
  if (!from.empty()) {
    fail_input("{}: key {} is also provided by another data file", source,
               quote(from.begin()->first));
  }
}

void keep_program(Artifact& a, ProgramBuffer buffer, ProgramForm form) {
  if (form == ProgramForm::tree) {
    a.program_tree = unpack_program(std::move(buffer));
  } else {
    a.program = std::move(buffer);
  }
}

void load_package(Artifact& a, ProgramForm form) {
  auto file = InputFile::open(a.root);
  auto members = zip::read_directory(*file);
  const zip::Member* program = nullptr;
  const zip::Member* weights = nullptr;
  const zip::Member* aliases = nullptr;
  for (const auto& m : members) {
    if (m.name == "program.ptg")
      program = &m;
    else if (m.name == "program.safetensors")
      weights = &m;
    else if (m.name == "aliases.json")
      aliases = &m;
    else
      fail_input("{}: unexpected member {} in package", a.name, quote(m.name));
  }
  if (program == nullptr) fail_input("{}: package has no program.ptg member", a.name);
  if (program->size > Limits::max_program_bytes) {
    fail_input("{}:program.ptg: {} bytes exceeds the program size limit", a.name, program->size);
  }
  auto bytes = file->read_range(program->data_offset, program->size);
  if (zip::crc32_update(0, bytes) != program->crc32) {
    fail_input("{}:program.ptg: CRC-32 does not match the stored bytes (corrupt package)", a.name);
  }
  a.program_file_bytes = bytes.size();
  keep_program(a, read_program_buffer(std::move(bytes), a.name + ":program.ptg"), form);
  if (weights != nullptr) {
    // The package carries no digests, only CRC-32s: check them so a damaged
    // package is never repacked or shown as if whole.
    std::vector<uint8_t> buffer;
    if (!zip::crc_matches(*file, *weights, buffer)) {
      fail_input("{}:program.safetensors: CRC-32 does not match the stored bytes (corrupt package)",
                 a.name);
    }
    a.data = safetensors::read(file, weights->data_offset, weights->size,
                               a.name + ":program.safetensors")
                 .tensors;
  }
  if (aliases == nullptr) return;
  auto context = a.name + ":aliases.json";
  if (aliases->size > Limits::max_header_bytes)
    fail_input("{}: {} bytes exceeds the limit", context, aliases->size);
  auto raw = file->read_range(aliases->data_offset, aliases->size);
  if (zip::crc32_update(0, raw) != aliases->crc32)
    fail_input("{}: CRC-32 does not match the stored bytes", context);
  auto json = parse_json_strict(
      std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()), context);
  if (!json.is_object()) fail_input("{}: expected a JSON object of alias -> owner", context);
  for (const auto& [alias, owner_json] : json.items()) {
    if (!owner_json.is_string())
      fail_input("{}: owner of {} is not a string", context, quote(alias));
    auto owner = owner_json.get<std::string>();
    if (a.data.count(alias))
      fail_input("{}: alias {} is also stored in program.safetensors", context, quote(alias));
    if (json.contains(owner))
      fail_input("{}: owner {} of {} is itself an alias", context, quote(owner), quote(alias));
    auto it = a.data.find(owner);
    if (it == a.data.end())
      fail_input("{}: owner {} of {} is not in program.safetensors", context, quote(owner),
                 quote(alias));
    a.aliases.emplace(alias, owner);
  }
  for (const auto& [alias, owner] : a.aliases) a.data.emplace(alias, a.data.at(owner));
}

void load_graph_program(Artifact& a, const DirectoryPaths& paths, const Manifest& m,
                        const std::string& manifest_name, ProgramForm form);
void load_shards(Artifact& a, const DirectoryPaths& paths, const Manifest& m,
                 const std::string& manifest_name);

void load_directory(Artifact& a, ProgramForm form) {
  auto paths = directory_paths(a.root);
  a.root = paths.dir;
  auto manifest_file = InputFile::open(paths.manifest);
  a.manifest = read_manifest_file(*manifest_file, manifest_file->name());
  const auto& m = *a.manifest;
  if (m.version == kManifestProgramsVersion) {
    a.kind = ArtifactKind::pte_directory;
    for (const auto& entry : m.programs) {
      auto file = open_inside(paths.dir, entry.file, manifest_file->name());
      if (file->size() != entry.size)
        fail_input("{}", size_differs_line(file->name(), file->size(), entry.size));
      if (to_hex(hash_ranges({ByteRange{file, 0, file->size()}}, 0).front()) != entry.sha256)
        fail_input("{}", digest_differs_line(file->name()));
      a.pte_programs.push_back({entry.file, pte::read(file), entry.named_data});
    }
    load_shards(a, paths, m, manifest_file->name());
    return;
  }
  // The program and the shards are independent: read them at once (each a
  // good share of a many-tensor dump; a small program is not worth a thread).
  // Errors are raised program first (parallel_for reports the lowest index's),
  // as when they are read one after the other.
  const unsigned jobs = m.program.size >= kOverlapProgramBytes ? effective_jobs(0) : 1;
  parallel_for(2, jobs, [&](size_t task) {
    if (task == 0) {
      load_graph_program(a, paths, m, manifest_file->name(), form);
    } else {
      load_shards(a, paths, m, manifest_file->name());
    }
  });
}

void load_graph_program(Artifact& a, const DirectoryPaths& paths, const Manifest& m,
                        const std::string& manifest_name, ProgramForm form) {
  auto program_file = open_inside(paths.dir, m.program.file, manifest_name);
  if (program_file->size() > Limits::max_program_bytes) {
    fail_input("{}: program of {} bytes exceeds the limit", program_file->name(),
               program_file->size());
  }
  auto program_bytes = program_file->read_range(0, program_file->size());
  if (program_bytes.size() != m.program.size) {
    fail_input("{}", size_differs_line(program_file->name(), program_bytes.size(), m.program.size));
  }
  if (to_hex(sha256(program_bytes)) != m.program.sha256)
    fail_input("{}", digest_differs_line(program_file->name()));
  a.program_file_bytes = program_bytes.size();
  keep_program(a, read_program_buffer(std::move(program_bytes), program_file->name()), form);
}

void load_shards(Artifact& a, const DirectoryPaths& paths, const Manifest& m,
                 const std::string& manifest_name) {
  for (const auto& shard : m.shards) {
    auto file = open_inside(paths.dir, shard.file, manifest_name);
    TensorTable table =
        m.shard_format == ShardFormat::ptd ? ptd::read_file(file).tensors : safetensors::read(file).tensors;
    for (const auto& key : shard.stale) table.erase(key);  // not part of this release
    merge_table(a.data, std::move(table), file->name());
  }
  for (const auto& [key, t] : m.tensors) {
    if (a.data.count(key)) continue;
    if (!t.alias_of) fail_input("{}: tensor {} is in no shard", manifest_name, quote(key));
    auto owner = a.data.find(*t.alias_of);
    if (owner == a.data.end()) {
      fail_input("{}: tensor {} is an alias of {}, which is in no shard", manifest_name, quote(key),
                 quote(*t.alias_of));
    }
    a.aliases.emplace(key, *t.alias_of);
  }
  for (const auto& [alias, owner] : a.aliases) a.data.emplace(alias, a.data.at(owner));
  for (const auto& [key, t] : m.tensors) {
    if (t.alias_of && !a.aliases.count(key)) a.aliases.emplace(key, *t.alias_of);
    a.data.at(key).expected_sha256 = t.sha256;
  }
}

// A .pte program; its EXTERNAL tensors come from .ptd data files (@DATA, or
// the same-stem .ptd beside it when the program has EXTERNAL tensors).
void load_pte(Artifact& a, const fs::path& path, const std::vector<fs::path>& data_paths,
              bool use_default_data) {
  a.kind = ArtifactKind::pte;
  ProgramFile entry{path.filename().string(), pte::read(InputFile::open(path)), std::nullopt};
  std::vector<fs::path> sources = data_paths;
  if (sources.empty() && use_default_data) {
    auto found = default_program_data(path, entry.program);
    sources = std::move(found.files);
    entry.named_keys = std::move(found.named_keys);
    if (found.note) a.notes.push_back(std::move(*found.note));
  }
  for (const auto& source : sources) {
    if (identify(source) != ArtifactKind::ptd) {
      fail(ErrorCode::usage, "{}: data for a .pte program must be .ptd files", source.string());
    }
    merge_table(a.data, ptd::read_file(InputFile::open(source)).tensors, source.string());
    a.data_files.push_back(source.string());
  }
  a.pte_programs.push_back(std::move(entry));
}

}  // namespace

DefaultProgramData default_program_data(const fs::path& pte_path, const pte::Program& program) {
  DefaultProgramData out;
  std::error_code ec;
  // A link to a program in a packed directory finds that directory's manifest.
  auto real = fs::canonical(pte_path, ec);
  if (ec) real = pte_path;
  const auto dir = real.parent_path().empty() ? fs::path(".") : real.parent_path();
  const auto manifest_path = dir / "manifest.json";
  if (manifest_version_of(manifest_path) == static_cast<uint64_t>(kManifestProgramsVersion)) {
    Manifest m;  // no programs when it cannot be read
    try {
      m = read_manifest_file(*InputFile::open(manifest_path), manifest_path.string());
    } catch (const Error& e) {  // `verify DIR` says what is wrong with it; the program is read alone
      out.note = fmt::format("{} not used: {}", manifest_path.string(), e.what());
      out.manifest_problem = e.what();
    }
    const auto name = real.filename().string();
    const auto size = fs::file_size(real, ec);
    for (const auto& entry : m.programs) {
      if (entry.file != name) continue;
      out.record = DefaultProgramData::Record{manifest_path, entry, {}};
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

Artifact load_artifact(const fs::path& path, const std::vector<fs::path>& data_paths,
                       bool use_default_data, ProgramForm form) {
  Artifact a;
  a.name = path.string();
  a.root = path;
  // A directory's kind comes from its manifest, which load_directory reads.
  const auto kind = names_a_directory(path) ? ArtifactKind::graph_directory : identify(path);
  auto no_data = [&] {
    if (!data_paths.empty()) {
      fail(ErrorCode::usage,
           "{}: @DATA gives a program its data files; this input carries its own data", a.name);
    }
  };
  switch (kind) {
    case ArtifactKind::graph_directory:
    case ArtifactKind::pte_directory:
      no_data();
      a.kind = ArtifactKind::graph_directory;  // load_directory: the manifest's kind
      load_directory(a, form);
      return a;
    case ArtifactKind::safetensors_index:
      a.kind = kind;
      a.data = safetensors::read_index(path);
      return a;
    case ArtifactKind::package:
      no_data();
      a.kind = kind;
      load_package(a, form);
      return a;
    case ArtifactKind::ptd:
      a.kind = kind;
      a.data = ptd::read_file(InputFile::open(path)).tensors;
      return a;
    case ArtifactKind::safetensors:
      a.kind = kind;
      a.data = safetensors::read(InputFile::open(path)).tensors;
      return a;
    case ArtifactKind::pte:
      load_pte(a, path, data_paths, use_default_data);
      return a;
    case ArtifactKind::graph:
      break;
  }
  std::error_code ec;
  a.kind = ArtifactKind::graph;
  keep_program(a, read_program_file_buffer(path, &a.program_file_bytes), form);
  std::vector<fs::path> sources = data_paths;
  if (sources.empty() && use_default_data) {
    auto stem = path;
    stem.replace_extension();
    for (const char* ext : {".safetensors", ".safetensors.index.json"}) {
      auto candidate = fs::path(stem.string() + ext);
      if (fs::exists(candidate, ec)) {
        sources.push_back(candidate);
        break;
      }
    }
  }
  for (const auto& source : sources) {
    merge_table(a.data, load_data_file(source), source.string());
    a.data_files.push_back(source.string());
  }
  return a;
}

}  // namespace ptepack
