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

[[nodiscard]] NodeCounts count_nodes(const nb::Graph& graph);
// One line per node, `indent` spaces deep; subgraphs indented further.
[[nodiscard]] std::string graph_text(const nb::Graph& graph, size_t indent);
[[nodiscard]] nlohmann::json graph_json(const nb::Graph& graph);

}  // namespace ptepack
