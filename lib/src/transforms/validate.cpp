// Graph structure validation: every use resolves to an earlier definition in its scope.
#include "ptepack/transforms/validate.h"

#include <map>
#include <string_view>

#include <fmt/ranges.h>

#include "base/view_set.h"
#include "ptepack/base/error.h"

namespace ptepack {
namespace {

// Names of one graph scope. Views into the method being checked (and the
// binding list built for it), which outlive every checker; a flat hashed set,
// because a method can hold hundreds of thousands of names with long common
// prefixes.
using NameSet = detail::ViewSet;

class ScopeChecker {
 public:
  ScopeChecker(std::vector<std::string>& problems, std::string where)
      : problems_(problems), where_(std::move(where)) {}

  // bound: names defined before the first node (graph inputs and, at the top
  // level, the method's bindings).
  void check(const nb::GraphT& graph, const std::vector<std::string_view>& bound, int depth) {
    graph_ = &graph;
    bound_.reserve(bound.size());
    for (auto name : bound) {
      if (!bound_.insert(name))
        report("duplicate SSA name {} among inputs and bindings", std::string(name));
    }
    NameSet defined;
    defined.reserve(bound_.size() + graph.nodes.size());
    bound_.for_each([&defined](std::string_view name) { defined.insert(name); });
    NameSet node_names;
    node_names.reserve(graph.nodes.size());
    for (const auto& node : graph.nodes) {
      if (!node_names.insert(node->name)) report("duplicate node name {}", node->name);
      if (node->op_kind == nb::OpKind::PLACEHOLDER) {
        check_placeholder(*node);
        continue;
      }
      for (const auto& input : node->inputs) check_argument(*node, *input->arg, defined, depth);
      for (const auto& out : node->outputs) {
        if (!out->alias_of.empty()) use(*node, out->alias_of, defined, "alias_of");
        define(out->name, defined);
        for (const auto& name : out->names) define(name, defined);
      }
    }
    for (const auto& name : graph.outputs) {
      if (!defined.contains(name)) report("graph output {} is not defined", name);
    }
    NameSet described;
    described.reserve(graph.tensor_values.size());
    for (const auto& tv : graph.tensor_values) {
      if (!described.insert(tv->name)) report("duplicate tensor_values entry {}", tv->name);
      if (!defined.contains(tv->name)) report("tensor_values entry {} names no value", tv->name);
    }
    defined_ = std::move(defined);
    described_ = std::move(described);
  }

  [[nodiscard]] bool is_defined(const std::string& name) const { return defined_.contains(name); }
  [[nodiscard]] bool is_described(const std::string& name) const {
    return described_.contains(name);
  }

  template <typename... Args>
  void report(fmt::format_string<std::string, Args...> format, const std::string& name,
              Args&&... args) {
    problems_.push_back(where_ + ": " +
                        fmt::format(format, quote(name), std::forward<Args>(args)...));
  }

 private:
  // Every value the graph's nodes define, to tell a forward reference from an
  // unresolved name: needed only once a use fails.
  void collect_definitions() {
    if (collected_) return;
    collected_ = true;
    for (const auto& node : graph_->nodes) {
      if (node->op_kind == nb::OpKind::PLACEHOLDER) continue;
      for (const auto& out : node->outputs) {
        all_definitions_.insert(out->name);
        for (const auto& name : out->names) all_definitions_.insert(name);
      }
    }
  }

  void check_placeholder(const nb::NodeT& node) {
    if (!bound_.contains(node.name)) {
      report("placeholder {} is not bound by a graph input or binding", node.name);
    }
    for (const auto& out : node.outputs) {
      if (out->name != node.name && !bound_.contains(out->name)) {
        report("placeholder output {} is not bound by a graph input or binding", out->name);
      }
    }
  }

  void define(const std::string& name, NameSet& defined) {
    if (!defined.insert(name)) report("duplicate SSA name {}", name);
  }

  void use(const nb::NodeT& node, const std::string& name, const NameSet& defined,
           std::string_view what) {
    if (defined.contains(name)) return;
    collect_definitions();
    if (all_definitions_.contains(name)) {
      report("node {} uses {} ({}) before it is defined (forward reference)", node.name,
             quote(name), what);
    } else {
      report("node {} uses unresolved name {} ({})", node.name, quote(name), what);
    }
  }

  void check_argument(const nb::NodeT& node, const nb::ArgumentT& arg, const NameSet& defined,
                      int depth) {
    const auto& v = arg.value;
    switch (v.type) {
      case nb::ArgumentValue::TensorArg:
        use(node, v.AsTensorArg()->name, defined, "tensor");
        break;
      case nb::ArgumentValue::IntArg:
        if (!v.AsIntArg()->ref.empty()) use(node, v.AsIntArg()->ref, defined, "int ref");
        break;
      case nb::ArgumentValue::FloatArg:
        if (!v.AsFloatArg()->ref.empty()) use(node, v.AsFloatArg()->ref, defined, "float ref");
        break;
      case nb::ArgumentValue::BoolArg:
        if (!v.AsBoolArg()->ref.empty()) use(node, v.AsBoolArg()->ref, defined, "bool ref");
        break;
      case nb::ArgumentValue::IntListArg: {
        const auto& list = *v.AsIntListArg();
        if (!list.refs.empty() && list.refs.size() != list.values.size()) {
          report("node {}: IntListArg has {} refs for {} values", node.name, list.refs.size(),
                 list.values.size());
        }
        for (const auto& ref : list.refs) {
          if (!ref.empty()) use(node, ref, defined, "int list ref");
        }
        break;
      }
      case nb::ArgumentValue::TensorListArg:
        for (const auto& name : v.AsTensorListArg()->names) use(node, name, defined, "tensor list");
        break;
      case nb::ArgumentValue::OptionalTensorListArg: {
        const auto& list = *v.AsOptionalTensorListArg();
        if (list.names.size() != list.has_value.size()) {
          report("node {}: OptionalTensorListArg has {} names for {} has_value flags", node.name,
                 list.names.size(), list.has_value.size());
          break;
        }
        for (size_t i = 0; i < list.names.size(); ++i) {
          if (list.has_value[i]) use(node, list.names[i], defined, "optional tensor list");
        }
        break;
      }
      case nb::ArgumentValue::GraphArg: {
        const auto& sub = *v.AsGraphArg();
        ScopeChecker inner(problems_, fmt::format("{} > subgraph {}", where_, quote(sub.name)));
        const std::vector<std::string_view> inputs(sub.graph->inputs.begin(),
                                                   sub.graph->inputs.end());
        inner.check(*sub.graph, inputs, depth + 1);
        break;
      }
      default:
        break;
    }
  }

  std::vector<std::string>& problems_;
  std::string where_;
  const nb::GraphT* graph_ = nullptr;
  NameSet bound_;
  bool collected_ = false;
  NameSet all_definitions_;
  NameSet defined_;
  NameSet described_;
};

}  // namespace

std::string method_name_problem(const std::string& name) {
  if (name.empty()) return "method name is empty";
  if (name.find('/') != std::string::npos)
    return fmt::format("method name {} contains '/'", quote(name));
  if (name == "state") return "method name 'state' is reserved for state keys";
  return {};
}

std::vector<std::string> validate_method_structure(const nb::MethodT& method,
                                                   const std::string& context) {
  std::vector<std::string> problems;
  ScopeChecker top(problems, fmt::format("{}: method {}", context, quote(method.name)));
  std::vector<std::string_view> bound(method.graph->inputs.begin(), method.graph->inputs.end());
  bound.reserve(bound.size() + method.constants.size() + method.mutable_buffers.size());
  for (const auto& c : method.constants) bound.emplace_back(c->name);
  for (const auto& b : method.mutable_buffers) bound.emplace_back(b->name);
  top.check(*method.graph, bound, 0);
  for (const auto& spec : method.output_specs) {
    if (!top.is_defined(spec->name)) top.report("output spec names undefined value {}", spec->name);
    if (spec->kind == nb::OutputKind::USER_INPUT_MUTATION && !top.is_defined(spec->target)) {
      top.report("user input mutation target {} is not a value", spec->target);
    }
    if (spec->kind == nb::OutputKind::BUFFER_MUTATION && spec->target.empty()) {
      top.report("buffer mutation output {} has no target key", spec->name);
    }
  }
  for (const auto& buffer : method.mutable_buffers) {
    if (!top.is_described(buffer->name)) {
      top.report("mutable buffer {} has no tensor_values entry (shape and dtype unknown)",
                 buffer->name);
    }
  }
  return problems;
}

std::string describe_meta(const nb::TensorMetaT& meta) {
  std::string dims;
  for (const auto& dim : meta.sizes) {
    if (!dims.empty()) dims += ", ";
    if (dim->min == dim->max) {
      dims += std::to_string(dim->min);
    } else {
      dims += fmt::format("{}..{}", dim->min,
                          dim->max < 0 ? std::string("inf") : std::to_string(dim->max));
    }
  }
  return fmt::format("{} [{}]", dtype_name(static_cast<DType>(meta.dtype)), dims);
}

std::string tensor_data_problem(const nb::TensorMetaT& meta, const TensorData& data,
                                const std::string& where) {
  auto declared = static_cast<DType>(meta.dtype);
  if (declared != data.dtype) {
    return fmt::format("{}: graph declares dtype {} but data is {}", where, dtype_name(declared),
                       dtype_name(data.dtype));
  }
  bool shape_ok = meta.sizes.size() == data.shape.size();
  for (size_t i = 0; shape_ok && i < data.shape.size(); ++i) {
    const auto& dim = *meta.sizes[i];
    int64_t actual = data.shape[i];
    shape_ok = dim.min == dim.max ? actual == dim.min
                                  : actual >= dim.min && (dim.max < 0 || actual <= dim.max);
  }
  if (!shape_ok) {
    return fmt::format("{}: graph declares shape {} but data has shape [{}]", where,
                       describe_meta(meta), fmt::join(data.shape, ", "));
  }
  if (!data.dim_order.empty()) {
    return fmt::format("{}: data has dim_order [{}]; program graphs take contiguous data only",
                       where, fmt::join(data.dim_order, ", "));
  }
  auto expected = byte_size(data.dtype, data.shape);
  if (!expected || *expected != data.bytes.size) {
    return fmt::format("{}: data has {} bytes but {} [{}] needs {}", where, data.bytes.size,
                       dtype_name(data.dtype), fmt::join(data.shape, ", "),
                       expected ? *expected : 0);
  }
  return {};
}

std::string constant_data_problem(const nb::NamedTensorRefT& c, const TensorData& data,
                                  const std::string& method, const std::string& context) {
  if (c.meta->quant) return {};
  return tensor_data_problem(*c.meta, data,
                             fmt::format("{}: method {}: constant {} (key {})", context,
                                         quote(method), quote(c.name), quote(c.data_key)));
}

std::vector<std::string> quant_data_problems(const nb::TensorMetaT& meta, const std::string& tensor,
                                             const TensorLookup& data, const std::string& method,
                                             const std::string& context) {
  std::vector<std::string> problems;
  if (!meta.quant || meta.quant->scheme.type != nb::QuantScheme::AffineGroup) return problems;
  const auto& group = *meta.quant->scheme.AsAffineGroup();
  auto check = [&](const std::string& key, nb::ScalarType declared, std::string_view what) {
    const TensorData* found = key.empty() ? nullptr : data.data(key);
    if (found == nullptr) return;
    if (found->dtype != static_cast<DType>(declared)) {
      problems.push_back(
          fmt::format("{}: method {}: tensor {}: {} key {} declares {} but data is {}", context,
                      quote(method), quote(tensor), what, quote(key),
                      dtype_name(static_cast<DType>(declared)), dtype_name(found->dtype)));
    }
  };
  check(group.scale_data_key, group.scale_dtype, "scale");
  check(group.zero_point_data_key, group.zero_point_dtype, "zero point");
  return problems;
}

std::string BufferDeclarations::add(const std::string& key, const nb::TensorMetaT& meta,
                                    const std::string& method) {
  Decl decl{meta.dtype, {}, method, describe_meta(meta)};
  for (const auto& dim : meta.sizes) decl.sizes.emplace_back(dim->min, dim->max);
  auto [it, inserted] = decls_.emplace(key, decl);
  if (inserted || (it->second.dtype == decl.dtype && it->second.sizes == decl.sizes)) return {};
  return fmt::format("mutable buffer {}: method {} declares {} but method {} declares {}",
                     quote(key), quote(it->second.method), it->second.text, quote(method),
                     decl.text);
}

}  // namespace ptepack
