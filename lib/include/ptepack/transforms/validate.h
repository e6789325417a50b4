// Structural checks of a method's graph: SSA scoping, placeholders, list shapes.
#pragma once

#include <string>
#include <vector>

#include "ptepack/formats/program.h"

namespace ptepack {

// Checks the method's top-level graph (with its bindings) and every nested
// GraphArg subgraph, each in its own scope. Returns one line per problem,
// each starting with `context` and naming the method, graph and value.
[[nodiscard]] std::vector<std::string> validate_method_structure(const nb::MethodT& method,
                                                                 const std::string& context);

// Method names: non-empty, no '/', not the reserved "state". Returns the
// problem or an empty string.
[[nodiscard]] std::string method_name_problem(const std::string& name);

}  // namespace ptepack
