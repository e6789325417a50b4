// The program-graph front end's part of verify: a packed program against its data.
#pragma once

#include <string>
#include <vector>

#include "ptepack/graph/program.h"
#include "graph/program_keys.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// Graph structure, method names, naming rules (immutable keys under their
// method's namespace, mutable keys under state/), every referenced tensor key
// resolvable with the right dtype and size, quantisation dtypes, mutable
// buffer agreement, and no stored data that nothing references.
void check_packed_program(const nb::Program& program, const ProgramKeys& keys,
                          const TensorLookup& data, const std::string& context,
                          std::vector<std::string>& problems);

}  // namespace ptepack
