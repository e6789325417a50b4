// Checks shared by the package and directory verifiers: the packed program against its data.
#pragma once

#include <string>
#include <vector>

#include "ptepack/base/error.h"
#include "ptepack/formats/flat_tensor.h"
#include "ptepack/formats/program.h"
#include "ptepack/formats/pte.h"
#include "ptepack/model/tensor.h"
#include "ptepack/transforms/program_keys.h"

namespace ptepack {

// Runs fn; an Error it throws becomes a problem line instead, so a verifier
// goes on to report everything else. Returns whether fn completed.
template <typename Fn>
bool attempt(std::vector<std::string>& problems, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    problems.emplace_back(e.what());
    return false;
  }
}

// Graph structure, method names, naming rules (immutable keys under their
// method's namespace, mutable keys under state/), every referenced tensor key
// resolvable with the right dtype and size, quantisation dtypes, mutable
// buffer agreement, and no stored data that nothing references.
void check_packed_program(const nb::Program& program, const ProgramKeys& keys,
                          const TensorLookup& data, const std::string& context,
                          std::vector<std::string>& problems);

// A .pte program against the data files it is loaded with: every EXTERNAL
// tensor and every named-data key resolvable in exactly one of them (a key in
// two is a load error), EXTERNAL ones with the exact layout the runtime demands.
// `packed`: also what pack guarantees (no constant bytes or named data left).
struct DataFile {
  std::string name;
  const TensorTable* tensors = nullptr;
};
void check_program_data(const pte::Program& program, const std::string& context,
                        const std::vector<DataFile>& files,
                        const std::vector<std::string>& named_keys, bool packed,
                        std::vector<std::string>& problems);

// Segments of a .ptd that no NamedData points at: valid FlatTensor, never written by ptepack.
void note_unreferenced_segments(const ptd::File& file, std::vector<std::string>& notes);

}  // namespace ptepack
