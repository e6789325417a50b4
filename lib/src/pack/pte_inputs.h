// The .pte front end's inputs: read, checked and turned into program sources.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hash/parallel_hash.h"
#include "pack/base_release.h"
#include "pack/pack_internal.h"
#include "pte/externalize.h"
#include "pte/merge.h"
#include "ptepack/artifact/artifact.h"

namespace ptepack::detail {

// What pack reads for a .pte output or a directory of programs.
struct PteInputs {
  DirectoryInputs directories;
  std::vector<Artifact> artifacts;
  std::vector<ProgramSource> sources;
  std::vector<std::optional<std::string>> renames;  // per source: METHOD=
  std::vector<std::filesystem::path> paths;         // every file read, for the output check
  // A merge: the merged program, read back, as the one source.
  std::optional<pte::Merged> merged;
  std::unique_ptr<ProgramFile> merged_file;
  ReleaseStamp stamp;                 // the output manifest's release fields
  std::unique_ptr<BaseRelease> base;  // --base, opened and checked before any input is hashed
};

// Whether the inputs become one program (docs/rename-rules.md, "Merging .pte
// programs"): several into a .pte, --merge, or any method renamed or chosen.
[[nodiscard]] bool merging(const PackOptions& options, size_t programs,
                           const std::vector<std::optional<std::string>>& renames);
// Reads every input (a .pte program or a directory of them), checks each
// packed directory's structure, and lists the program sources: one per program,
// or the programs a merge takes. Refuses (usage) what cannot be packed together.
void load_inputs(const PackOptions& options, PteInputs& in);
// The digests packed directories record, proven by their checks: not hashed again.
void add_proven_digests(const PteInputs& in, RangeDigests& digests);

}  // namespace ptepack::detail
