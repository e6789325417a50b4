// The one reader of every artifact kind, as dump, diff and pack use it.
#pragma once

#include <filesystem>
#include <vector>

#include "ptepack/artifact/artifact.h"

namespace ptepack {

// How the reader checks an artifact against the manifest that records it.
struct ReadOptions {
  // Files against their recorded SHA-256 (false: their sizes and structure only; a note
  // says so: dump --no-hash).
  bool hash = true;
  unsigned jobs = 0;  // hashing threads (0: every core)
};

// The one reader of every artifact kind (docs/architecture.md, "Decisions taken once": how an
// artifact is read), as dump, diff and pack use it: strict, the first problem raised (ProblemError:
// verify's line for it and its exit code). It switches on identify(path). A packed directory is
// checked as verify checks it and built from what that check read; a program its directory's
// manifest lists, loaded with the shards listed for it, is checked against that record
// first. For a program, `data_paths` (the @DATA list) supplies tensors; when empty and
// `use_default_data`, default_data's files do.
[[nodiscard]] Artifact load_artifact(const std::filesystem::path& path,
                                     const std::vector<std::filesystem::path>& data_paths = {},
                                     bool use_default_data = true,
                                     ProgramForm form = ProgramForm::buffer,
                                     const ReadOptions& read = {});

}  // namespace ptepack
