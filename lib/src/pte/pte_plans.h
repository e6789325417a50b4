// Reading one execution plan of a .pte: every index checked, Tensor values classified.
#pragma once

#include <cstdint>
#include <string>

#include "ptepack/pte/pte.h"

namespace ptepack::pte::detail {

// Checks plan `plan` of `root` (values, chains and instructions, operators,
// delegates) and appends its delegates and Tensor values to `out`, whose
// segments are already read.
void read_plan(const std::string& name, Program& out, const executorch_flatbuffer::Program& root,
               uint32_t plan);

}  // namespace ptepack::pte::detail
