// Merging per-method programs into one: state and method namespaces, checks, data binding.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ptepack/core/naming.h"
#include "ptepack/graph/program.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// One input of `pack`: its program, the data its keys resolve in, and the
// METHOD= rename (allowed only for single-method programs).
struct MergeInput {
  std::string name;  // for messages
  ProgramPtr program;
  TensorTable data;
  std::optional<std::string> rename_method;
};

struct MergedProgram {
  ProgramPtr program;              // methods in input order, keys in final form
  TensorTable tensors;             // final key -> data, for every referenced key with data
  std::set<std::string> state;     // every state key, with or without data
  std::vector<KeyRename> renames;  // keys that changed, per method, first-reference order
  uint64_t renamed_keys = 0;       // as many as renames would list
  uint64_t dropped_keys = 0;       // input data no final key references
  uint64_t dropped_bytes = 0;
};

// Applies every rule of the transformation; throws Error (conflict or
// invalid_input) naming the method(s) and key(s) at the first rule broken
// (structural problems are all reported, one per line).
// Methods are validated on `jobs` threads (the result does not depend on it).
// Without list_renames, renames stays empty and renamed_keys counts them.
[[nodiscard]] MergedProgram merge_programs(std::vector<MergeInput> inputs, unsigned jobs = 1,
                                           bool list_renames = true);

}  // namespace ptepack
