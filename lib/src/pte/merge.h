// Several .pte programs (or some methods of one) made one multi-method program
// (docs/rename-rules.md, "Merging .pte programs").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hash/parallel_hash.h"
#include "ptepack/pte/pte.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack::pte {

struct MergeInput {
  std::string name;  // for messages: the input as given
  std::string stem;  // its file name without .pte: the @<stem> of a clashing EXTERNAL key
  const Program* program = nullptr;
  const TensorTable* data = nullptr;  // its data files (EXTERNAL keys, named data)
  // Keys of `data` that are this program's named data (a program packed in a
  // directory); nullopt: every key of its data files is its own.
  const std::optional<std::vector<std::string>>* named_keys = nullptr;
  std::vector<uint32_t> plans;     // kept execution plans, in output order
  std::vector<std::string> names;  // their names in the merged program
};

// Decides `plans` and `names` of each input. `renames` (one per input, METHOD=)
// renames the one method that has instructions (its training companions
// `__et_training_*_<method>` follow it); `keep` (--method, names in the output)
// keeps only those methods, plus every constant-only method and the kept
// methods' training companions; empty keeps all. Usage errors (exit 2): a rename
// of a program with several methods that have instructions, or of a method
// whose delegate finds its data by the method name (QNN, Core ML, AOTI named
// data `<method>_so_blob`); a --method that names no method (listing those there are).
void choose_methods(std::vector<MergeInput>& inputs,
                    const std::vector<std::optional<std::string>>& renames,
                    const std::vector<std::string>& keep);

// Every byte range merge() compares by digest (named data, delegate data, data
// files, stored constants) of one input: add them before digests.compute().
void add_merge_ranges(const Program& program, const TensorTable& data, RangeDigests& digests);

struct MergedMethod {
  std::string name;    // in the merged program
  size_t input = 0;    // index into the inputs
  std::string source;  // its name in that input
};

struct Merged {
  InputFilePtr file;  // the merged program: a composed file (nothing copied)
  TensorTable data;   // the data files' keys it reads, EXTERNAL keys under their merged names
  std::vector<MergedMethod> methods;
  std::vector<std::string> notes;  // constant-only methods kept once, EXTERNAL keys qualified
  uint64_t named_data_shared = 0;  // named-data entries stored once for several inputs
  uint64_t delegate_blobs_shared = 0;
};

// Merges the inputs' chosen plans into one program named `name`: one constant
// segment, one mutable data segment, identical delegate blobs and named data
// stored once, every index remapped; delegate blobs stay byte-identical.
// Conflicts (exit 4): one method name twice (unless both are constant-only and
// return the same values), one named-data key with different bytes, one
// trainable EXTERNAL key with different data. Refusals (exit 3): other
// Program.version values, fields the merge cannot carry.
//
// With `share_state`, mutable buffers of one name are one state of every method
// (docs/rename-rules.md, "Shared state"); without, each method keeps its own and
// a note names the buffers two or more methods mutate.
//
// Constants are laid out at `constant_alignment` when it is not 0, else at the
// largest constant alignment of the inputs (Program::tensor_alignment).
struct MergeOptions {
  bool share_state = false;
  uint64_t constant_alignment = 0;
};
[[nodiscard]] Merged merge(const std::vector<MergeInput>& inputs, const RangeDigests& digests,
                           const std::string& name, const MergeOptions& options = {});

}  // namespace ptepack::pte
