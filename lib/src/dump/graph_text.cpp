// Renders graph nodes as `name = target(args) -> outputs` lines and as JSON.
#include "graph_text.h"

#include "ptepack/base/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ptepack {
namespace {

std::string ref_or(const std::string& ref, const std::string& value) {
  return ref.empty() ? value : ref;
}

std::string argument_text(const nb::ArgumentT& arg) {
  const auto& v = arg.value;
  switch (v.type) {
    case nb::ArgumentValue::TensorArg:
      return v.AsTensorArg()->name;
    case nb::ArgumentValue::NoneArg:
      return "None";
    case nb::ArgumentValue::IntArg:
      return ref_or(v.AsIntArg()->ref, std::to_string(v.AsIntArg()->value));
    case nb::ArgumentValue::FloatArg:
      return ref_or(v.AsFloatArg()->ref, fmt::format("{}", v.AsFloatArg()->value));
    case nb::ArgumentValue::BoolArg:
      return ref_or(v.AsBoolArg()->ref, v.AsBoolArg()->value ? "True" : "False");
    case nb::ArgumentValue::StringArg:
      return fmt::format("\"{}\"", v.AsStringArg()->value);
    case nb::ArgumentValue::ScalarTypeArg:
      return nb::EnumNameScalarType(v.AsScalarTypeArg()->value);
    case nb::ArgumentValue::IntListArg: {
      const auto& l = *v.AsIntListArg();
      std::vector<std::string> items;
      for (size_t i = 0; i < l.values.size(); ++i) {
        items.push_back(i < l.refs.size() && !l.refs[i].empty() ? l.refs[i]
                                                                : std::to_string(l.values[i]));
      }
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    case nb::ArgumentValue::FloatListArg:
      return fmt::format("[{}]", fmt::join(v.AsFloatListArg()->values, ", "));
    case nb::ArgumentValue::BoolListArg: {
      std::vector<std::string> items;
      for (bool b : v.AsBoolListArg()->values) items.emplace_back(b ? "True" : "False");
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    case nb::ArgumentValue::TensorListArg:
      return fmt::format("[{}]", fmt::join(v.AsTensorListArg()->names, ", "));
    case nb::ArgumentValue::OptionalTensorListArg: {
      const auto& l = *v.AsOptionalTensorListArg();
      std::vector<std::string> items;
      for (size_t i = 0; i < l.names.size(); ++i)
        items.push_back(i < l.has_value.size() && l.has_value[i] ? l.names[i] : "None");
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    case nb::ArgumentValue::GraphArg:
      return fmt::format("<subgraph {}>", v.AsGraphArg()->name);
    default:
      return "?";
  }
}

}  // namespace

NodeCounts count_nodes(const nb::GraphT& graph) {
  NodeCounts counts;
  counts.nodes = graph.nodes.size();
  for (const auto& node : graph.nodes) {
    for (const auto& input : node->inputs) {
      if (input->arg->value.type != nb::ArgumentValue::GraphArg) continue;
      auto inner = count_nodes(*input->arg->value.AsGraphArg()->graph);
      counts.nodes += inner.nodes;
      counts.subgraphs += inner.subgraphs + 1;
    }
  }
  return counts;
}

std::string graph_text(const nb::GraphT& graph, size_t indent) {
  std::string out;
  std::string pad(indent, ' ');
  for (const auto& node : graph.nodes) {
    std::vector<std::string> args;
    for (const auto& input : node->inputs) {
      auto text = argument_text(*input->arg);
      args.push_back(input->name.empty() ? text : fmt::format("{}={}", input->name, text));
    }
    std::vector<std::string> outs;
    for (const auto& o : node->outputs)
      outs.push_back(o->alias_of.empty() ? o->name
                                         : fmt::format("{} (alias of {})", o->name, o->alias_of));
    switch (node->op_kind) {
      case nb::OpKind::PLACEHOLDER:
        out += pad + text_line(fmt::format("placeholder {}", node->name));
        break;
      case nb::OpKind::OUTPUT:
        out += pad + text_line(fmt::format("output({})", fmt::join(args, ", ")));
        break;
      default:
        out += pad + text_line(fmt::format(
                         "{} = {}({})",
                         outs.empty() ? node->name : fmt::format("{}", fmt::join(outs, ", ")),
                         node->target, fmt::join(args, ", ")));
    }
    for (const auto& input : node->inputs) {
      if (input->arg->value.type != nb::ArgumentValue::GraphArg) continue;
      const auto& sub = *input->arg->value.AsGraphArg();
      out += pad + text_line(fmt::format("  subgraph {} (inputs: {}; outputs: {})", sub.name,
                                         fmt::join(sub.graph->inputs, ", "),
                                         fmt::join(sub.graph->outputs, ", ")));
      out += graph_text(*sub.graph, indent + 4);
    }
  }
  return out;
}

nlohmann::json graph_json(const nb::GraphT& graph) {
  auto nodes = nlohmann::json::array();
  for (const auto& node : graph.nodes) {
    nlohmann::json n{
        {"name", node->name}, {"op", nb::EnumNameOpKind(node->op_kind)}, {"target", node->target}};
    auto args = nlohmann::json::array();
    auto subgraphs = nlohmann::json::array();
    for (const auto& input : node->inputs) {
      args.push_back({{"name", input->name},
                      {"value", argument_text(*input->arg)},
                      {"mutated", input->mutated}});
      if (input->arg->value.type == nb::ArgumentValue::GraphArg) {
        const auto& sub = *input->arg->value.AsGraphArg();
        subgraphs.push_back({{"name", sub.name},
                             {"inputs", sub.graph->inputs},
                             {"outputs", sub.graph->outputs},
                             {"nodes", graph_json(*sub.graph)}});
      }
    }
    n["args"] = args;
    auto outs = nlohmann::json::array();
    for (const auto& o : node->outputs) outs.push_back(o->name);
    n["outputs"] = outs;
    if (!subgraphs.empty()) n["subgraphs"] = subgraphs;
    nodes.push_back(n);
  }
  return nodes;
}

}  // namespace ptepack
