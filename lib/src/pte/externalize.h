// The .pte front end: which tensors of which programs go to the shards, under which keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ptepack/core/naming.h"
#include "ptepack/core/storage.h"
#include "hash/parallel_hash.h"
#include "ptepack/pte/pte.h"

namespace ptepack {

// One program with the data its artifact carries (its .ptd files, or the
// shards of the directory it was packed into).
struct ProgramSource {
  std::string name;  // for messages: the path as given
  const ProgramFile* file = nullptr;
  const TensorTable* data = nullptr;
};

// Every byte range externalize() and inline_program() look at, for hashing first.
void add_program_ranges(const ProgramSource& source, RangeDigests& digests);

struct ExternalizedProgram {
  pte::Rewrite rewrite;                 // the caller sets the alignment
  std::vector<std::string> keys;        // every key it needs from the shards, sorted
  std::vector<std::string> named_keys;  // those it reads as named data, in program order
  std::vector<KeyRename> renames;       // constants that got a key: method, value, key
};

struct ExternalizedSet {
  std::vector<StoredTensor> tensors;  // sorted by key, each key once
  std::vector<ExternalizedProgram> programs;
};

// The key an earlier release (pack --base) gave a constant of a program:
// (program file name, method, value index) -> its key and SHA-256.
struct PreviousKey {
  std::string key;
  Digest sha256{};
  TensorData layout;  // dtype, shape, dim order (normalised), opaque and byte count
};
using PreviousKeys = std::map<std::tuple<std::string, std::string, uint32_t>, PreviousKey>;

// Moves every stored constant (as EXTERNAL, under a key of docs/rename-rules.md)
// and all named data out of the programs. Conflicts (one named-data or EXTERNAL
// key with different bytes or layouts in two programs) throw naming both files.
// With `previous`, a constant or EXTERNAL tensor whose (file, method, value)
// had a key there with the same bytes and layout keeps that key, and a clash qualifies
// only the others.
[[nodiscard]] ExternalizedSet externalize(const std::vector<ProgramSource>& sources,
                                          const RangeDigests& digests,
                                          const PreviousKeys* previous = nullptr);

// Named data is read by delegates only: a program without a delegate keeps none
// of its own named data nor of its data files' keys that no EXTERNAL tensor
// reads. How many such entries a program has (pack notes them as dropped).
[[nodiscard]] size_t unreadable_named_data(const ProgramSource& source);

// Puts every byte back into the program: constants (EXTERNAL ones included)
// into its constant segment, its data files' other keys into named_data.
[[nodiscard]] pte::Rewrite inline_program(const ProgramSource& source, const RangeDigests& digests);

}  // namespace ptepack
