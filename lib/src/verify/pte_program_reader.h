// The one reader of .pte programs with their data files: strict for dump, diff and pack
// (load_artifact), collecting for verify, which adds its rules on what this reads.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "containers/flat_tensor.h"
#include "ptepack/pte/pte.h"
#include "ptepack/verify/verify.h"
#include "verify/diagnostics.h"

namespace ptepack::detail {

struct PteProgramRead {
  pte::Program program;
  std::optional<std::vector<std::string>> named_keys;  // the manifest's record of its named data
  std::optional<std::string> note;                     // where its data files came from
  std::vector<std::filesystem::path> sources;          // its data files
  std::vector<std::optional<ptd::File>> files;  // parallel to sources; null: missing, unreadable
  bool checked_whole = false;  // the program and its shards checked against their record
};

// Reads `file` as a .pte program, then its data files: `data_paths` (@DATA, each a .ptd or a
// usage error), else with `use_default_data` default_data's. A program its directory's
// manifest lists is checked against that record before its shards are read
// (check_against_record; with `hash` false, by size only), and a manifest beside it that
// cannot be read is manifest_inconsistent. Problems go to `problems`, the check's notes to
// report.notes. Returns false when the program itself could not be read.
bool read_pte_program(const InputFilePtr& file,
                      const std::vector<std::filesystem::path>& data_paths, bool use_default_data,
                      unsigned jobs, bool hash, Diagnostics& problems, VerifyReport& report,
                      PteProgramRead& out);

}  // namespace ptepack::detail
