// verify --program: a device that holds only the files of the programs it runs checks
// those, and every other file it happens to hold (docs/dump-and-verify.md).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "json/json_util.h"
#include "ptepack/base/error.h"
#include "ptepack/core/release_files.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/trust/signature.h"
#include "verify/directory_state.h"

namespace ptepack::detail {

void DirectoryCheck::State::select_programs() {
  subset = !options.programs.empty();
  wanted_program.assign(m.programs.size(), subset ? 0 : 1);
  wanted_shard.assign(m.shards.size(), subset ? 0 : 1);
  if (!subset) return;
  std::set<std::string> wanted;  // throws Error(usage) for a name that is not a program
  for (const auto& f : ptepack::program_files(m, options.programs, mname)) wanted.insert(f.file);
  for (size_t p = 0; p < m.programs.size(); ++p) {
    wanted_program[p] = wanted.count(m.programs[p].file) ? 1 : 0;
  }
  for (size_t i = 0; i < m.shards.size(); ++i) {
    wanted_shard[i] = wanted.count(m.shards[i].file) ? 1 : 0;
  }
}

bool DirectoryCheck::State::skipped(const std::string& file, bool wanted) const {
  if (wanted) return false;
  std::error_code ec;
  return !fs::exists(fs::symlink_status(paths.dir / file, ec));
}

// The programs asked for, each with its files and their bytes as the manifest records them
// (every one of them is checked against that record).
void DirectoryCheck::State::report_programs() {
  std::set<size_t> reported;  // a program named twice is reported once
  for (const auto& name : options.programs) {
    const auto p = find_program(m, name);
    if (!p || !subset || !reported.insert(*p).second) continue;
    const auto files = ptepack::program_files(m, {name}, mname);
    ProgramCheck check{m.programs[*p].file, files.size(), 0};
    for (const auto& f : files) check.bytes += f.size;
    report.programs.push_back(std::move(check));
  }
}

}  // namespace ptepack::detail

namespace ptepack {

namespace fs = std::filesystem;

DeviceFiles device_files(const std::filesystem::path& dir,
                         const std::vector<std::string>& programs) {
  const auto paths = directory_paths(dir);
  const auto mname = paths.manifest.string();
  std::error_code ec;
  if (!fs::is_directory(paths.dir, ec)) fail(ErrorCode::usage, "{}: not a directory", mname);
  const auto manifest_file = InputFile::open(paths.manifest);
  const auto manifest = read_manifest_file(*manifest_file, mname);
  std::vector<std::string> names = programs;
  if (names.empty()) {
    for (const auto& entry : manifest.programs) names.push_back(entry.file);
  }
  DeviceFiles out{paths.dir.string(), {}, program_files(manifest, names, mname)};
  for (const auto& name : names) {
    out.programs.push_back(manifest.programs[*find_program(manifest, name)].file);
  }
  auto on_disk = [&](const std::string& name, const InputFile& file) {
    auto bytes = file.read_range(0, file.size());
    out.files.push_back({name, to_hex(sha256(std::span<const uint8_t>(bytes))), file.size()});
  };
  on_disk("manifest.json", *manifest_file);
  const auto signature = paths.dir / kSignatureFileName;
  if (fs::is_regular_file(signature, ec)) {
    on_disk(std::string(kSignatureFileName), *InputFile::open(signature));
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const ReleaseFile& a, const ReleaseFile& b) { return a.file < b.file; });
  return out;
}

std::string render_files_text(const DeviceFiles& files) {
  std::string out;
  for (const auto& f : files.files) out += f.file + '\n';
  return out;
}

std::string render_files_json(const DeviceFiles& files) {
  auto list = nlohmann::json::array();
  uint64_t total = 0;
  for (const auto& f : files.files) {
    list.push_back({{"file", f.file}, {"size", f.size}, {"sha256", f.sha256}});
    total += f.size;
  }
  return json_text({{"format", "ptepack.files"},
                    {"version", 1},
                    {"directory", files.directory},
                    {"programs", files.programs},
                    {"files", std::move(list)},
                    {"bytes", total}});
}

}  // namespace ptepack
