// Visits every place a data key can appear in a method, at any subgraph depth.
#pragma once

#include <string>

#include "ptepack/graph/program.h"
#include "graph/program_access.h"

namespace ptepack {

enum class KeyRole {
  constant,         // NamedTensorRef.data_key
  scale,            // AffineGroup.scale_data_key
  zero_point,       // AffineGroup.zero_point_data_key (non-empty only)
  mutable_buffer,   // MutableBufferSpec.fqn
  mutation_target,  // OutputSpec.target of a BUFFER_MUTATION
};

[[nodiscard]] std::string_view key_role_name(KeyRole role);

namespace detail {
template <typename Meta, typename Fn>
void visit_meta_keys(Meta& meta, Fn& fn) {
  auto* group = access::affine_group(meta);
  if (group == nullptr) return;
  fn(access::scale_data_key(*group), KeyRole::scale);
  auto&& zero_point = access::zero_point_data_key(*group);
  if (!zero_point.empty()) fn(zero_point, KeyRole::zero_point);
}

template <typename Graph, typename Fn>
void visit_graph_keys(Graph& graph, Fn& fn) {
  for (auto& tv : access::tensor_values(graph)) visit_meta_keys(access::meta(tv), fn);
  for (auto& node : access::nodes(graph)) {
    for (auto& input : access::inputs(node)) {
      if (auto* sub = access::graph_arg(access::arg(input)); sub != nullptr) {
        visit_graph_keys(access::graph(*sub), fn);
      }
    }
  }
}
}  // namespace detail

// fn(key, KeyRole role) for every data key reference of the method, in a
// fixed order: constants (data key, then quant keys), mutable buffers,
// mutation targets, then tensor_values of the graph and nested subgraphs.
// On an object tree the key is its std::string (renamable when the method is
// not const); on a flatbuffer, a std::string_view into it.
template <typename Method, typename Fn>
void for_each_data_key(Method& method, Fn&& fn) {
  for (auto& c : access::constants(method)) {
    fn(access::data_key(c), KeyRole::constant);
    detail::visit_meta_keys(access::meta(c), fn);
  }
  for (auto& buffer : access::mutable_buffers(method)) {
    fn(access::fqn(buffer), KeyRole::mutable_buffer);
  }
  for (auto& spec : access::output_specs(method)) {
    if (access::kind(spec) == nb::OutputKind::BUFFER_MUTATION)
      fn(access::target(spec), KeyRole::mutation_target);
  }
  detail::visit_graph_keys(access::graph(method), fn);
}

// fn(const Meta& meta, std::string_view name) for every TensorMeta of the
// method: constants' metas, then tensor_values of every graph and subgraph.
template <typename Method, typename Fn>
void for_each_tensor_meta(const Method& method, Fn&& fn) {
  for (const auto& c : access::constants(method)) fn(access::meta(c), access::name(c));
  auto visit = [&fn](const auto& graph, auto& self) -> void {
    for (const auto& tv : access::tensor_values(graph)) fn(access::meta(tv), access::name(tv));
    for (const auto& node : access::nodes(graph)) {
      for (const auto& input : access::inputs(node)) {
        if (const auto* sub = access::graph_arg(access::arg(input)); sub != nullptr) {
          self(access::graph(*sub), self);
        }
      }
    }
  };
  visit(access::graph(method), visit);
}

}  // namespace ptepack
