// `dump --graph=dot`: the methods of any program artifact as one Graphviz digraph.
#pragma once

#include <string>

#include "ptepack/artifact/artifact.h"

namespace ptepack {

// One cluster per method (per program and method for directories of programs).
// Program graphs: nodes as drawn by --graph, edges carrying named values from
// the node that produces them, placeholders bound to data labelled with their
// key and shape, nested subgraphs as nested clusters. .pte programs:
// instructions in order as nodes (operators by name and overload, delegates as
// boxes naming their backend and blob size), inputs, constants (key and shape)
// and outputs; an edge carries a tensor value from the node that last used it
// to the next. Deterministic: the same artifact gives the same text.
[[nodiscard]] std::string graph_dot(const Artifact& artifact);

}  // namespace ptepack
