// Node listings of a graph and its subgraphs for `dump --graph`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ptepack/formats/program.h"

namespace ptepack {

struct NodeCounts {
  size_t nodes = 0;      // including nested subgraphs
  size_t subgraphs = 0;  // GraphArg subgraphs at any depth
};

[[nodiscard]] NodeCounts count_nodes(const nb::GraphT& graph);
// One line per node, `indent` spaces deep; subgraphs indented further.
[[nodiscard]] std::string graph_text(const nb::GraphT& graph, size_t indent);
[[nodiscard]] nlohmann::json graph_json(const nb::GraphT& graph);

}  // namespace ptepack
