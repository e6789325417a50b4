// Visits every place a data key can appear in a method, at any subgraph depth.
#pragma once

#include <string>

#include "ptepack/formats/program.h"

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
  if (!meta.quant || meta.quant->scheme.type != nb::QuantScheme::AffineGroup) return;
  auto* group = meta.quant->scheme.AsAffineGroup();
  fn(group->scale_data_key, KeyRole::scale);
  if (!group->zero_point_data_key.empty()) fn(group->zero_point_data_key, KeyRole::zero_point);
}

template <typename Graph, typename Fn>
void visit_graph_keys(Graph& graph, Fn& fn) {
  for (auto& tv : graph.tensor_values) visit_meta_keys(*tv->meta, fn);
  for (auto& node : graph.nodes) {
    for (auto& input : node->inputs) {
      auto& value = input->arg->value;
      if (value.type == nb::ArgumentValue::GraphArg && value.value != nullptr) {
        visit_graph_keys(*value.AsGraphArg()->graph, fn);
      }
    }
  }
}
}  // namespace detail

// fn(std::string& key, KeyRole role) for every data key reference of the method,
// in a fixed order: constants (data key, then quant keys), mutable buffers,
// mutation targets, then tensor_values of the graph and nested subgraphs.
// Works on const and non-const methods (the key is then const std::string&).
template <typename Method, typename Fn>
void for_each_data_key(Method& method, Fn&& fn) {
  for (auto& c : method.constants) {
    fn(c->data_key, KeyRole::constant);
    detail::visit_meta_keys(*c->meta, fn);
  }
  for (auto& buffer : method.mutable_buffers) fn(buffer->fqn, KeyRole::mutable_buffer);
  for (auto& spec : method.output_specs) {
    if (spec->kind == nb::OutputKind::BUFFER_MUTATION) fn(spec->target, KeyRole::mutation_target);
  }
  detail::visit_graph_keys(*method.graph, fn);
}

// fn(const TensorMeta& meta, const std::string& name) for every TensorMeta of
// the method: constants' metas, then tensor_values of every graph and subgraph.
template <typename Fn>
void for_each_tensor_meta(const nb::MethodT& method, Fn&& fn) {
  for (const auto& c : method.constants) fn(*c->meta, c->name);
  auto visit = [&fn](const nb::GraphT& graph, auto& self) -> void {
    for (const auto& tv : graph.tensor_values) fn(*tv->meta, tv->name);
    for (const auto& node : graph.nodes) {
      for (const auto& input : node->inputs) {
        const auto& value = input->arg->value;
        if (value.type == nb::ArgumentValue::GraphArg && value.value != nullptr) {
          self(*value.AsGraphArg()->graph, self);
        }
      }
    }
  };
  visit(*method.graph, visit);
}

}  // namespace ptepack
