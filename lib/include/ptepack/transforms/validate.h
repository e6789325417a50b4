// Structural checks of a method's graph: SSA scoping, placeholders, list shapes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ptepack/formats/program.h"
#include "ptepack/model/tensor.h"

namespace ptepack {

// Checks the method's top-level graph (with its bindings) and every nested
// GraphArg subgraph, each in its own scope. Returns one line per problem,
// each starting with `context` and naming the method, graph and value.
[[nodiscard]] std::vector<std::string> validate_method_structure(const nb::MethodT& method,
                                                                 const std::string& context);

// Method names: non-empty, no '/', not the reserved "state". Returns the
// problem or an empty string.
[[nodiscard]] std::string method_name_problem(const std::string& name);

// Data checks against the graph. Each returns the problem, or "" when fine.
// An unquantised constant's data must match its meta: dtype, static dims (a
// dynamic dim must hold the data's dim), and byte length. Quantised constants
// are packed: only presence is checked, elsewhere.
// The data must match `meta` (dtype, rank, static dims, dynamic dims within
// [min, max], byte length); `where` starts the message.
[[nodiscard]] std::string tensor_data_problem(const nb::TensorMetaT& meta, const TensorData& data,
                                              const std::string& where);
[[nodiscard]] std::string constant_data_problem(const nb::NamedTensorRefT& constant,
                                                const TensorData& data, const std::string& method,
                                                const std::string& context);
// AffineGroup scale / zero-point data must have the dtype the group declares.
[[nodiscard]] std::vector<std::string> quant_data_problems(const nb::TensorMetaT& meta,
                                                           const std::string& tensor,
                                                           const TensorLookup& data,
                                                           const std::string& method,
                                                           const std::string& context);

// A mutable buffer's dtype and shape must agree across the methods that declare it.
class BufferDeclarations {
 public:
  // Records `meta` for state key `key` as declared by `method`; returns the
  // problem when an earlier method declared something else.
  [[nodiscard]] std::string add(const std::string& key, const nb::TensorMetaT& meta,
                                const std::string& method);
  // Adds every declaration of the method: mutable constants (keyed through
  // `key_of`) and MutableBufferSpecs (their tensor_values entry).
  template <typename KeyOf>
  void add_method(const nb::MethodT& method, const std::set<std::string>& mutable_keys,
                  KeyOf&& key_of, std::vector<std::string>& problems) {
    for (const auto& c : method.constants) {
      if (!mutable_keys.count(key_of(c->data_key))) continue;
      push(add(key_of(c->data_key), *c->meta, method.name), problems);
    }
    for (const auto& buffer : method.mutable_buffers) {
      for (const auto& tv : method.graph->tensor_values) {
        if (tv->name == buffer->name)
          push(add(key_of(buffer->fqn), *tv->meta, method.name), problems);
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
  std::map<std::string, Decl> decls_;
};

// "FLOAT [1, 2..128, 1..inf]" for a meta, as messages and dump print it.
[[nodiscard]] std::string describe_meta(const nb::TensorMetaT& meta);

}  // namespace ptepack
