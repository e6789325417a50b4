// The .pte front end's part of dump: one section per program.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/pte/pte.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

struct ProgramDump {
  std::string text;     // the programs' section of the text dump
  nlohmann::json json;  // "programs" array of dump --json
};

// The programs of an artifact with the data they are loaded with; `manifest`
// (a directory of programs) names each program's data files, else null.
struct ProgramSet {
  const std::vector<ProgramFile>& programs;
  const TensorTable& data;
  const Manifest* manifest = nullptr;
};

// What the programs' section shows: `graph`, each plan's instruction chains;
// `rows`, one text line per stored value, named-data entry and segment (off
// for dump --summary and --no-tensors, which keep their counts; the JSON always
// lists them); `jobs`, hashing threads.
struct ProgramDumpOptions {
  bool graph = false;
  bool rows = true;
  unsigned jobs = 0;
};

[[nodiscard]] ProgramDump dump_programs(const ProgramSet& set, const ProgramDumpOptions& options);

// The key a tensor the program holds itself goes by (own_tensors' rule, without
// the `.v<value>` of another layout of one buffer).
[[nodiscard]] std::string own_tensor_key(const pte::Program& program, const pte::TensorInfo& t);

// The tensors a program holds itself, by the keys pack gives them when it moves
// them out (docs/rename-rules.md, ".pte programs" 1-3: `<method>/<name>`, `.v<value>`
// for another layout of one buffer), and its named data by key: what dump and
// verify count and hash for a bare .pte.
[[nodiscard]] TensorTable own_tensors(const pte::Program& program);

// The bytes `ranges` hold once each: ranges that are the same bytes of the same file (keys
// of one buffer, deduplicated named data) are stored once. How many distinct ranges there
// are, and their bytes: dump's figures of an artifact without a manifest, and pack's
// summary of a .pte output, read back from what it writes.
struct StoredRanges {
  size_t count = 0;
  uint64_t bytes = 0;
};
[[nodiscard]] StoredRanges stored_ranges(std::vector<ByteRange> ranges);

}  // namespace ptepack
