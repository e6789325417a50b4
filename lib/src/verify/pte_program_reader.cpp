// The one reader of .pte programs with their data files (pte_program_reader.h).
#include "verify/pte_program_reader.h"

#include <set>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "verify/directory_check.h"
#include "verify/verify_support.h"

namespace ptepack::detail {

namespace fs = std::filesystem;

namespace {

// The program's default data files, and its record checked where its manifest lists it.
// Returns the listed shards that are missing (reported with the record).
std::set<fs::path> default_sources(const InputFilePtr& file, unsigned jobs, bool hash,
                                   Diagnostics& problems, VerifyReport& report,
                                   PteProgramRead& out) {
  auto found = default_data(file->path(), &out.program);
  out.sources = std::move(found.files);
  out.named_keys = std::move(found.named_keys);
  out.note = std::move(found.note);
  if (found.manifest_problem) {  // nothing to check the program against
    problems.add({ProblemId::manifest_inconsistent,
                  (file->path().parent_path() / "manifest.json").string(),
                  *found.manifest_problem});
  }
  if (!found.record) return {};
  out.checked_whole = true;
  return check_against_record(file, *found.record, jobs, hash, problems, report);
}

}  // namespace

bool read_pte_program(const InputFilePtr& file, const std::vector<fs::path>& data_paths,
                      bool use_default_data, unsigned jobs, bool hash, Diagnostics& problems,
                      VerifyReport& report, PteProgramRead& out) {
  if (!attempt(problems, ProblemId::file_unreadable, file->name(),
               [&] { out.program = pte::read(file); }))
    return false;
  std::set<fs::path> missing;
  if (!data_paths.empty()) {
    for (const auto& source : data_paths) {
      if (identify(source) != ArtifactKind::ptd)
        fail(ErrorCode::usage, "{}: data for a .pte program must be .ptd files", source.string());
    }
    out.sources = data_paths;
  } else if (use_default_data) {
    missing = default_sources(file, jobs, hash, problems, report, out);
  }
  out.files.resize(out.sources.size());
  for (size_t i = 0; i < out.sources.size(); ++i) {
    const auto& source = out.sources[i];
    if (missing.count(source)) continue;  // reported with the record
    attempt(problems, ProblemId::file_unreadable, source.string(),
            [&] { out.files[i] = ptd::read_file(InputFile::open(source)); });
  }
  return true;
}

}  // namespace ptepack::detail
