// Merging per-method programs into one: state and method namespaces, checks, data binding.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ptepack/formats/program.h"
#include "ptepack/model/tensor.h"

namespace ptepack {

// One input of `pack`: its program, the data its keys resolve in, and the
// METHOD= rename (allowed only for single-method programs).
struct MergeInput {
  std::string name;  // for messages
  ProgramPtr program;
  TensorTable data;
  std::optional<std::string> rename_method;
};

struct KeyRename {
  std::string method;
  std::string from;
  std::string to;
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

// The final name of data key `key` referenced by `method` (DESIGN rules 2-4).
[[nodiscard]] std::string final_key(const std::string& method, const std::string& key,
                                    bool is_mutable);
// "state/K" for K, or K itself when already in that form.
[[nodiscard]] std::string state_key(const std::string& key);

// Applies every rule of the transformation; throws Error (conflict or
// invalid_input) naming the method(s) and key(s) at the first rule broken
// (structural problems are all reported, one per line).
// Methods are validated on `jobs` threads (the result does not depend on it).
// Without list_renames, renames stays empty and renamed_keys counts them.
[[nodiscard]] MergedProgram merge_programs(std::vector<MergeInput> inputs, unsigned jobs = 1,
                                           bool list_renames = true);

}  // namespace ptepack
