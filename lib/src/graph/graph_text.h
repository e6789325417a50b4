// Node listings of a graph and its subgraphs for `dump --graph`.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ptepack/graph/program.h"

namespace ptepack {

struct NodeCounts {
  size_t nodes = 0;      // including nested subgraphs
  size_t subgraphs = 0;  // GraphArg subgraphs at any depth
};

[[nodiscard]] NodeCounts count_nodes(const nb::Graph& graph);

// A graph's tensor values by name, indexed once (a graph may hold many).
class MetaIndex {
 public:
  explicit MetaIndex(const nb::Graph& graph);
  // The meta of the named value, or null.
  [[nodiscard]] const nb::TensorMeta* find(std::string_view name) const;

 private:
  std::map<std::string_view, const nb::TensorMeta*> metas_;
};
// One line per node, `indent` spaces deep; subgraphs indented further.
[[nodiscard]] std::string graph_text(const nb::Graph& graph, size_t indent);
[[nodiscard]] nlohmann::json graph_json(const nb::Graph& graph);

}  // namespace ptepack
