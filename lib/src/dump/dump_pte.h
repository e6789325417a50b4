// The .pte part of dump: one section per program of an artifact.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ptepack/dump/dump.h"
#include "ptepack/formats/artifact.h"

namespace ptepack {

struct ProgramDump {
  std::string text;     // the programs' section of the text dump
  nlohmann::json json;  // "programs" array of dump --json
};

[[nodiscard]] ProgramDump dump_programs(const Artifact& artifact, const DumpOptions& options);

}  // namespace ptepack
