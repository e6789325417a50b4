// `verify`: re-reads an artifact and checks everything `pack` guarantees.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ptepack/io/progress.h"

namespace ptepack {

struct VerifyOptions {
  unsigned jobs = 0;             // hashing threads (0: all cores)
  bool strict = false;           // notes count as problems
  Progress* progress = nullptr;  // bytes hashed are reported here when set
  // A program's data files (PATH@DATA); empty: the same-stem default beside it.
  std::vector<std::filesystem::path> data = {};
};

struct VerifyReport {
  std::string artifact;
  std::string kind;
  std::vector<std::string> problems;  // one line each; empty means the artifact is whole
  // What ptepack itself would have done differently in a well-formed artifact
  // (alignment of a foreign .ptn, an unreferenced .ptd segment).
  std::vector<std::string> notes;
  bool strict = false;
  uint64_t files_checked = 0;
  uint64_t tensors_checked = 0;
  uint64_t bytes_hashed = 0;
  [[nodiscard]] bool ok() const { return problems.empty() && (!strict || notes.empty()); }
};

// Never throws for a bad artifact: every problem found is listed in the
// report. Throws Error (io) only when `path` does not exist.
[[nodiscard]] VerifyReport verify_artifact(const std::filesystem::path& path,
                                           const VerifyOptions& options);

[[nodiscard]] std::string render_verify_text(const VerifyReport& report);
[[nodiscard]] std::string render_verify_json(const VerifyReport& report);

}  // namespace ptepack
