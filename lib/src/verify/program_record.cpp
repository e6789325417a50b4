// A program of a packed directory checked against its manifest's record: the check a device
// makes on the one program it runs, and the reader's before it loads such a program.
#include <fmt/format.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hash/parallel_hash.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/pte/pte.h"
#include "verify/directory_check.h"

namespace ptepack::detail {

namespace fs = std::filesystem;

std::set<fs::path> check_against_record(const InputFilePtr& program,
                                        const DefaultData::Record& record, unsigned jobs, bool hash,
                                        Diagnostics& problems, VerifyReport& report) {
  const auto manifest = record.manifest.string();
  const auto dir = record.manifest.parent_path();
  std::vector<std::pair<InputFilePtr, std::pair<std::string, uint64_t>>> files{
      {program, {record.program.sha256, record.program.size}}};
  std::set<fs::path> missing;
  for (size_t k = 0; k < record.program.shards.size(); ++k) {
    const auto path = dir / record.program.shards[k];
    std::error_code ec;
    if (!record.shards[k]) {
      problems.add({ProblemId::manifest_inconsistent, manifest,
                    fmt::format("{}: {} lists shard {}, which its shards do not", manifest,
                                record.program.file, record.program.shards[k])});
    } else if (!fs::is_regular_file(path, ec)) {
      missing.insert(path);
      problems.add({ProblemId::file_missing, path.string(),
                    fmt::format("{}: missing (listed for {} in {})", path.string(),
                                record.program.file, manifest)});
    } else {
      files.push_back({InputFile::open(path), {record.shards[k]->sha256, record.shards[k]->size}});
    }
  }
  std::vector<ByteRange> whole;
  for (const auto& [file, expected] : files) whole.push_back({file, 0, file->size()});
  const auto digests = hash ? hash_ranges(whole, jobs) : std::vector<Digest>();
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& [file, expected] = files[i];
    if (hash) report.bytes_hashed += file->size();
    if (file->size() != expected.second) {
      problems.add({ProblemId::file_changed, file->name(),
                    size_differs_line(file->name(), file->size(), expected.second)});
    } else if (hash && to_hex(digests[i]) != expected.first) {
      problems.add({ProblemId::file_changed, file->name(), digest_differs_line(file->name())});
    }
  }
  report.notes.push_back(
      fmt::format("{}: checked against {}: the program and its {} data files, "
                  "by size{}",
                  program->name(), manifest, record.program.shards.size(),
                  hash ? " and SHA-256" : " only (not hashed)"));
  return missing;
}

}  // namespace ptepack::detail
