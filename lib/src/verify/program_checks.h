// Checks of a packed program against its data, shared by the package and directory verifiers.
#pragma once

#include <string>
#include <vector>

#include "ptepack/formats/program.h"
#include "ptepack/model/tensor.h"
#include "ptepack/transforms/program_keys.h"

namespace ptepack {

// Graph structure, method names, naming rules (immutable keys under their
// method's namespace, mutable keys under state/), every referenced tensor key
// resolvable with the right dtype and size, quantisation dtypes, mutable
// buffer agreement, and no stored data that nothing references.
void check_packed_program(const nb::ProgramT& program, const ProgramKeys& keys, const TensorTable& data,
                          const std::string& context, std::vector<std::string>& problems);

}  // namespace ptepack
