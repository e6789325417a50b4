// Structural checks of a method's graph: SSA scoping, placeholders, list shapes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/core/naming.h"  // method_name_problem
#include "ptepack/graph/program.h"
#include "graph/program_access.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// Checks the method's top-level graph (with its bindings) and every nested
// GraphArg subgraph, each in its own scope. Returns one line per problem,
// each starting with `context` and naming the method, graph and value.
// Each check here takes the object tree or the verified flatbuffer alike.
[[nodiscard]] std::vector<std::string> validate_method_structure(const nb::MethodT& method,
                                                                 const std::string& context);
[[nodiscard]] std::vector<std::string> validate_method_structure(const nb::Method& method,
                                                                 const std::string& context);

// Data checks against the graph. Each returns the problem, or "" when fine.
// The data must match `meta` (dtype, rank, static dims, dynamic dims within
// [min, max], byte length); `where` starts the message.
[[nodiscard]] std::string tensor_data_problem(const nb::TensorMetaT& meta, const TensorData& data,
                                              const std::string& where);
[[nodiscard]] std::string tensor_data_problem(const nb::TensorMeta& meta, const TensorData& data,
                                              const std::string& where);
// An unquantised constant's data must match its meta. Quantised constants
// are packed: only presence is checked, elsewhere.
[[nodiscard]] std::string constant_data_problem(const nb::NamedTensorRefT& constant,
                                                const TensorData& data, std::string_view method,
                                                const std::string& context);
[[nodiscard]] std::string constant_data_problem(const nb::NamedTensorRef& constant,
                                                const TensorData& data, std::string_view method,
                                                const std::string& context);
// AffineGroup scale / zero-point data must have the dtype the group declares.
[[nodiscard]] std::vector<std::string> quant_data_problems(const nb::TensorMetaT& meta,
                                                           std::string_view tensor,
                                                           const TensorLookup& data,
                                                           std::string_view method,
                                                           const std::string& context);
[[nodiscard]] std::vector<std::string> quant_data_problems(const nb::TensorMeta& meta,
                                                           std::string_view tensor,
                                                           const TensorLookup& data,
                                                           std::string_view method,
                                                           const std::string& context);

// "FLOAT [1, 2..128, 1..inf]" for a meta, as messages and dump print it.
[[nodiscard]] std::string describe_meta(const nb::TensorMetaT& meta);
[[nodiscard]] std::string describe_meta(const nb::TensorMeta& meta);

// A mutable buffer's dtype and shape must agree across the methods that declare it.
class BufferDeclarations {
 public:
  // Records `meta` for state key `key` as declared by `method`; returns the
  // problem when an earlier method declared something else.
  template <typename Meta>
  [[nodiscard]] std::string add(std::string_view key, const Meta& meta, std::string_view method) {
    Decl decl{access::dtype(meta), {}, std::string(method), describe_meta(meta)};
    for (const auto& dim : access::sizes(meta)) {
      decl.sizes.emplace_back(access::min(dim), access::max(dim));
    }
    return add(key, std::move(decl));
  }
  // Adds every declaration of the method: constants whose key (through
  // `key_of`) is state by `is_state`, and MutableBufferSpecs (their
  // tensor_values entry).
  template <typename Method, typename IsState, typename KeyOf>
  void add_method(const Method& method, IsState&& is_state, KeyOf&& key_of,
                  std::vector<std::string>& problems) {
    const std::string_view method_name = access::name(method);
    for (const auto& c : access::constants(method)) {
      const auto key = key_of(access::data_key(c));
      if (!is_state(key)) continue;
      push(add(key, access::meta(c), method_name), problems);
    }
    for (const auto& buffer : access::mutable_buffers(method)) {
      for (const auto& tv : access::tensor_values(access::graph(method))) {
        if (access::name(tv) == access::name(buffer))
          push(add(key_of(access::fqn(buffer)), access::meta(tv), method_name), problems);
      }
    }
  }

 private:
  static void push(std::string problem, std::vector<std::string>& problems) {
    if (!problem.empty()) problems.push_back(std::move(problem));
  }
  struct Decl {
    nb::ScalarType dtype;
    std::vector<std::pair<int64_t, int64_t>> sizes;
    std::string method;
    std::string text;  // describe_meta of the declaration, for the message
  };
  [[nodiscard]] std::string add(std::string_view key, Decl decl);
  std::map<std::string, Decl, std::less<>> decls_;
};

}  // namespace ptepack
