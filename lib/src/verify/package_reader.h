// The one reader of .ptn packages, for every command: the reader (load_artifact) runs it
// strict, verify collects its problems and adds the program rules and the dedup check.
#pragma once

#include <map>
#include <string>

#include "ptepack/graph/program.h"
#include "ptepack/io/input_file.h"
#include "ptepack/tensors/tensor.h"
#include "verify/diagnostics.h"

namespace ptepack::detail {

// What a package holds, as read.
struct PackageParts {
  ProgramBuffer program;
  uint64_t program_bytes = 0;  // program.ptg's size
  TensorTable data;            // program.safetensors, and each alias as its owner's tensor
  std::map<std::string, std::string> aliases;  // alias key -> owner key
};

// Reads `file` as a package into `out`: every member expected, its CRC-32 right (a note
// for one not 64-byte aligned), program.ptg a valid program, program.safetensors readable,
// aliases.json a non-empty object of alias -> owner where the owner is stored, the
// smallest key of its group, and neither is a state key. Problems go to `problems`;
// returns false when the program could not be read.
bool read_package(const InputFilePtr& file, Diagnostics& problems, VerifyReport& report,
                  PackageParts& out);

}  // namespace ptepack::detail
