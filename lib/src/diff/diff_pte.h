// diff for .pte programs: paired by file name, compared by what the runtime computes with.
#pragma once

#include "ptepack/artifact/artifact.h"
#include "ptepack/diff/diff.h"

namespace ptepack::detail {

// Pairs the programs of two .pte artifacts (a program or a directory of
// programs): by file name, or the only program of each side. Appends to `out`
// the pairs, the methods added, removed or changed, every difference and the
// notes. Throws invalid_input when an EXTERNAL tensor or named data of a
// program cannot be resolved in the data files it loads with.
void diff_programs(const Artifact& a, const Artifact& b, unsigned jobs, ArtifactDiff& out);

// One method of each side (diff_artifacts' `method`): the program of each
// side that has it, its plan and the named data its delegates name.
void diff_method(const Artifact& a, const Artifact& b, const MethodPair& method, unsigned jobs,
                 ArtifactDiff& out);

}  // namespace ptepack::detail
