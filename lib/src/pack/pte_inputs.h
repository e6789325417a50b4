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

// The inputs' chosen methods made one program (pte::merge), read back as the
// one source a merge packs. Held where it stays put: the source points into it.
struct PteMerge {
  pte::Merged merged;
  ProgramFile file;
  ProgramSource source;
};

// What pack reads for a .pte output or a directory of programs.
struct PteInputs {
  DirectoryInputs directories;
  std::vector<Artifact> artifacts;
  std::vector<ProgramSource> sources;
  std::vector<std::optional<std::string>> renames;  // per source: METHOD=
  bool merge = false;  // the inputs become one program (merging, decided once in load_inputs)
  std::vector<std::filesystem::path> paths;         // every file read, for the output check
  std::unique_ptr<PteMerge> merged;                 // a merge: its program, the one source
  ReleaseStamp stamp;                               // the output manifest's release fields
  std::unique_ptr<BaseRelease> base;  // --base, opened and checked before any input is hashed
};

// Whether the inputs become one program (docs/rename-rules.md, "Merging .pte
// programs"): several into a .pte, --merge, or any method renamed or chosen.
[[nodiscard]] bool merging(const PackContext& context, size_t programs,
                           const std::vector<std::optional<std::string>>& renames);
// Reads every input (a .pte program or a directory of them), checks each
// packed directory's structure, and lists the program sources: one per program,
// or the programs a merge takes. Refuses (usage) what cannot be packed together.
void load_inputs(const PackContext& context, PteInputs& in);
// The digests packed directories record, proven by their checks: not hashed again.
void add_proven_digests(const PteInputs& in, RangeDigests& digests);
// The merge of in.sources (their methods chosen and renamed as the options
// say) on `digests`, which hold every range add_merge_ranges names. The
// merged program's own ranges are not added to `digests`.
[[nodiscard]] std::unique_ptr<PteMerge> merge_pte_sources(const PackContext& context,
                                                          const PteInputs& in,
                                                          const RangeDigests& digests);

}  // namespace ptepack::detail
