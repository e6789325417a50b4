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
// `graph`: also each plan's instruction chains; `jobs`: hashing threads.
struct ProgramSet {
  const std::vector<ProgramFile>& programs;
  const TensorTable& data;
  const Manifest* manifest = nullptr;
};

[[nodiscard]] ProgramDump dump_programs(const ProgramSet& set, bool graph, unsigned jobs);

// The tensors a program holds itself, by the keys pack gives them when it moves
// them out (docs/rename-rules.md, ".pte programs" 1-3: `<method>/<name>`, `.v<value>`
// for another layout of one buffer), and its named data by key: what dump and
// verify count and hash for a bare .pte.
[[nodiscard]] TensorTable own_tensors(const pte::Program& program);

}  // namespace ptepack
