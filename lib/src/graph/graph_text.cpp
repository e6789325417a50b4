// Renders graph nodes as `name = target(args) -> outputs` lines and as JSON.
#include "graph/graph_text.h"

#include "ptepack/base/error.h"
#include "graph/program_access.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ptepack {
namespace {

using access::text;

std::string ref_or(std::string_view ref, std::string value) {
  return ref.empty() ? std::move(value) : std::string(ref);
}

template <typename List>
std::string joined(const List& items) {
  return fmt::format("{}", fmt::join(items.begin(), items.end(), ", "));
}

std::string argument_text(const nb::Argument& arg) {
  switch (arg.value_type()) {
    case nb::ArgumentValue::TensorArg:
      return std::string(text(arg.value_as_TensorArg()->name()));
    case nb::ArgumentValue::NoneArg:
      return "None";
    case nb::ArgumentValue::IntArg: {
      const auto* a = arg.value_as_IntArg();
      return ref_or(text(a->ref()), std::to_string(a->value()));
    }
    case nb::ArgumentValue::FloatArg: {
      const auto* a = arg.value_as_FloatArg();
      return ref_or(text(a->ref()), fmt::format("{}", a->value()));
    }
    case nb::ArgumentValue::BoolArg: {
      const auto* a = arg.value_as_BoolArg();
      return ref_or(text(a->ref()), a->value() ? "True" : "False");
    }
    case nb::ArgumentValue::StringArg:
      return fmt::format("\"{}\"", text(arg.value_as_StringArg()->value()));
    case nb::ArgumentValue::ScalarTypeArg:
      return nb::EnumNameScalarType(arg.value_as_ScalarTypeArg()->value());
    case nb::ArgumentValue::IntListArg: {
      const auto& l = *arg.value_as_IntListArg();
      const auto values = access::values(l);
      const auto refs = access::refs(l);
      std::vector<std::string> items;
      for (size_t i = 0; i < values.size(); ++i) {
        items.push_back(i < refs.size() && !refs[i].empty() ? std::string(refs[i])
                                                            : std::to_string(values[i]));
      }
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    case nb::ArgumentValue::FloatListArg: {
      std::vector<double> values;
      for (double v : access::scalars(arg.value_as_FloatListArg()->values())) values.push_back(v);
      return fmt::format("[{}]", fmt::join(values, ", "));
    }
    case nb::ArgumentValue::BoolListArg: {
      std::vector<std::string> items;
      for (uint8_t b : access::scalars(arg.value_as_BoolListArg()->values()))
        items.emplace_back(b != 0 ? "True" : "False");
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    case nb::ArgumentValue::TensorListArg:
      return fmt::format("[{}]", joined(access::names(*arg.value_as_TensorListArg())));
    case nb::ArgumentValue::OptionalTensorListArg: {
      const auto& l = *arg.value_as_OptionalTensorListArg();
      const auto names = access::names(l);
      const auto has_value = access::has_value(l);
      std::vector<std::string> items;
      for (size_t i = 0; i < names.size(); ++i)
        items.push_back(i < has_value.size() && has_value[i] != 0 ? std::string(names[i]) : "None");
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    case nb::ArgumentValue::GraphArg:
      return fmt::format("<subgraph {}>", text(arg.value_as_GraphArg()->name()));
    default:
      return "?";
  }
}

nlohmann::json string_list(const auto& names) {
  auto list = nlohmann::json::array();
  for (std::string_view name : names) list.push_back(name);
  return list;
}

}  // namespace

MetaIndex::MetaIndex(const nb::Graph& graph) {
  for (const auto& tv : access::tensor_values(graph)) metas_.emplace(access::name(tv), tv.meta());
}

const nb::TensorMeta* MetaIndex::find(std::string_view name) const {
  auto it = metas_.find(name);
  return it == metas_.end() ? nullptr : it->second;
}

NodeCounts count_nodes(const nb::Graph& graph) {
  NodeCounts counts;
  const auto nodes = access::nodes(graph);
  counts.nodes = nodes.size();
  for (const auto& node : nodes) {
    for (const auto& input : access::inputs(node)) {
      const auto* sub = input.arg()->value_as_GraphArg();
      if (sub == nullptr) continue;
      auto inner = count_nodes(*sub->graph());
      counts.nodes += inner.nodes;
      counts.subgraphs += inner.subgraphs + 1;
    }
  }
  return counts;
}

std::string graph_text(const nb::Graph& graph, size_t indent) {
  std::string out;
  std::string pad(indent, ' ');
  for (const auto& node : access::nodes(graph)) {
    std::vector<std::string> args;
    for (const auto& input : access::inputs(node)) {
      auto value = argument_text(*input.arg());
      const std::string_view name = text(input.name());
      args.push_back(name.empty() ? value : fmt::format("{}={}", name, value));
    }
    std::vector<std::string> outs;
    for (const auto& o : access::outputs(node)) {
      const std::string_view alias = text(o.alias_of());
      outs.push_back(alias.empty() ? std::string(text(o.name()))
                                   : fmt::format("{} (alias of {})", text(o.name()), alias));
    }
    switch (node.op_kind()) {
      case nb::OpKind::PLACEHOLDER:
        out += pad + text_line(fmt::format("placeholder {}", text(node.name())));
        break;
      case nb::OpKind::OUTPUT:
        out += pad + text_line(fmt::format("output({})", fmt::join(args, ", ")));
        break;
      default:
        out += pad + text_line(fmt::format("{} = {}({})",
                                           outs.empty() ? std::string(text(node.name()))
                                                        : fmt::format("{}", fmt::join(outs, ", ")),
                                           text(node.target()), fmt::join(args, ", ")));
    }
    for (const auto& input : access::inputs(node)) {
      const auto* sub = input.arg()->value_as_GraphArg();
      if (sub == nullptr) continue;
      const nb::Graph& inner = *sub->graph();
      out += pad +
             text_line(fmt::format("  subgraph {} (inputs: {}; outputs: {})", text(sub->name()),
                                   joined(access::inputs(inner)), joined(access::outputs(inner))));
      out += graph_text(inner, indent + 4);
    }
  }
  return out;
}

nlohmann::json graph_json(const nb::Graph& graph) {
  auto nodes = nlohmann::json::array();
  for (const auto& node : access::nodes(graph)) {
    nlohmann::json n{{"name", text(node.name())},
                     {"op", nb::EnumNameOpKind(node.op_kind())},
                     {"target", text(node.target())}};
    auto args = nlohmann::json::array();
    auto subgraphs = nlohmann::json::array();
    for (const auto& input : access::inputs(node)) {
      args.push_back({{"name", text(input.name())},
                      {"value", argument_text(*input.arg())},
                      {"mutated", input.mutated()}});
      if (const auto* sub = input.arg()->value_as_GraphArg(); sub != nullptr) {
        const nb::Graph& inner = *sub->graph();
        subgraphs.push_back({{"name", text(sub->name())},
                             {"inputs", string_list(access::inputs(inner))},
                             {"outputs", string_list(access::outputs(inner))},
                             {"nodes", graph_json(inner)}});
      }
    }
    n["args"] = args;
    auto outs = nlohmann::json::array();
    for (const auto& o : access::outputs(node)) outs.push_back(text(o.name()));
    n["outputs"] = outs;
    if (!subgraphs.empty()) n["subgraphs"] = subgraphs;
    nodes.push_back(n);
  }
  return nodes;
}

}  // namespace ptepack
