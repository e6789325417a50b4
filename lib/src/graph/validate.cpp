// Graph structure validation: every use resolves to an earlier definition in its scope.
#include "graph/validate.h"

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

template <typename Graph>
class ScopeChecker {
 public:
  ScopeChecker(std::vector<std::string>& problems, std::string where)
      : problems_(problems), where_(std::move(where)) {}

  // bound: names defined before the first node (graph inputs and, at the top
  // level, the method's bindings).
  void check(const Graph& graph, const std::vector<std::string_view>& bound, int depth) {
    graph_ = &graph;
    const auto& nodes = access::nodes(graph);
    bound_.reserve(bound.size());
    for (auto name : bound) {
      if (!bound_.insert(name)) report("duplicate SSA name {} among inputs and bindings", name);
    }
    NameSet defined;
    defined.reserve(bound_.size() + nodes.size());
    bound_.for_each([&defined](std::string_view name) { defined.insert(name); });
    NameSet node_names;
    node_names.reserve(nodes.size());
    for (const auto& node : nodes) {
      if (!node_names.insert(access::name(node)))
        report("duplicate node name {}", access::name(node));
      if (access::op_kind(node) == nb::OpKind::PLACEHOLDER) {
        check_placeholder(node);
        continue;
      }
      for (const auto& input : access::inputs(node))
        check_argument(node, access::arg(input), defined, depth);
      for (const auto& out : access::outputs(node)) {
        if (!access::alias_of(out).empty()) use(node, access::alias_of(out), defined, "alias_of");
        define(access::name(out), defined);
        for (std::string_view name : access::names(out)) define(name, defined);
      }
    }
    for (std::string_view name : access::outputs(graph)) {
      if (!defined.contains(name)) report("graph output {} is not defined", name);
    }
    const auto& values = access::tensor_values(graph);
    NameSet described;
    described.reserve(values.size());
    for (const auto& tv : values) {
      if (!described.insert(access::name(tv)))
        report("duplicate tensor_values entry {}", access::name(tv));
      if (!defined.contains(access::name(tv)))
        report("tensor_values entry {} names no value", access::name(tv));
    }
    defined_ = std::move(defined);
    described_ = std::move(described);
  }

  [[nodiscard]] bool is_defined(std::string_view name) const { return defined_.contains(name); }
  [[nodiscard]] bool is_described(std::string_view name) const { return described_.contains(name); }

  template <typename... Args>
  void report(fmt::format_string<std::string, Args...> format, std::string_view name,
              Args&&... args) {
    problems_.push_back(where_ + ": " +
                        fmt::format(format, quote(name), std::forward<Args>(args)...));
  }

 private:
  using Node = std::remove_cvref_t<decltype(*access::nodes(std::declval<const Graph&>()).begin())>;
  using Argument = std::remove_cvref_t<decltype(access::arg(
      *access::inputs(std::declval<const Node&>()).begin()))>;

  // Every value the graph's nodes define, to tell a forward reference from an
  // unresolved name: needed only once a use fails.
  void collect_definitions() {
    if (collected_) return;
    collected_ = true;
    for (const auto& node : access::nodes(*graph_)) {
      if (access::op_kind(node) == nb::OpKind::PLACEHOLDER) continue;
      for (const auto& out : access::outputs(node)) {
        all_definitions_.insert(access::name(out));
        for (std::string_view name : access::names(out)) all_definitions_.insert(name);
      }
    }
  }

  void check_placeholder(const Node& node) {
    if (!bound_.contains(access::name(node))) {
      report("placeholder {} is not bound by a graph input or binding", access::name(node));
    }
    for (const auto& out : access::outputs(node)) {
      if (access::name(out) != access::name(node) && !bound_.contains(access::name(out))) {
        report("placeholder output {} is not bound by a graph input or binding", access::name(out));
      }
    }
  }

  void define(std::string_view name, NameSet& defined) {
    if (!defined.insert(name)) report("duplicate SSA name {}", name);
  }

  void use(const Node& node, std::string_view name, const NameSet& defined, std::string_view what) {
    if (defined.contains(name)) return;
    collect_definitions();
    if (all_definitions_.contains(name)) {
      report("node {} uses {} ({}) before it is defined (forward reference)", access::name(node),
             quote(name), what);
    } else {
      report("node {} uses unresolved name {} ({})", access::name(node), quote(name), what);
    }
  }

  void check_argument(const Node& node, const Argument& arg, const NameSet& defined, int depth) {
    switch (access::type(arg)) {
      case nb::ArgumentValue::TensorArg:
        use(node, access::name(*access::tensor_arg(arg)), defined, "tensor");
        break;
      case nb::ArgumentValue::IntArg:
        if (!access::ref(*access::int_arg(arg)).empty())
          use(node, access::ref(*access::int_arg(arg)), defined, "int ref");
        break;
      case nb::ArgumentValue::FloatArg:
        if (!access::ref(*access::float_arg(arg)).empty())
          use(node, access::ref(*access::float_arg(arg)), defined, "float ref");
        break;
      case nb::ArgumentValue::BoolArg:
        if (!access::ref(*access::bool_arg(arg)).empty())
          use(node, access::ref(*access::bool_arg(arg)), defined, "bool ref");
        break;
      case nb::ArgumentValue::IntListArg: {
        const auto& list = *access::int_list_arg(arg);
        const auto& refs = access::refs(list);
        const size_t values = access::values(list).size();
        if (!refs.empty() && refs.size() != values) {
          report("node {}: IntListArg has {} refs for {} values", access::name(node), refs.size(),
                 values);
        }
        for (std::string_view ref : refs) {
          if (!ref.empty()) use(node, ref, defined, "int list ref");
        }
        break;
      }
      case nb::ArgumentValue::TensorListArg:
        for (std::string_view name : access::names(*access::tensor_list_arg(arg)))
          use(node, name, defined, "tensor list");
        break;
      case nb::ArgumentValue::OptionalTensorListArg: {
        const auto& list = *access::optional_tensor_list_arg(arg);
        const auto& names = access::names(list);
        const auto& has_value = access::has_value(list);
        if (names.size() != has_value.size()) {
          report("node {}: OptionalTensorListArg has {} names for {} has_value flags",
                 access::name(node), names.size(), has_value.size());
          break;
        }
        for (size_t i = 0; i < names.size(); ++i) {
          if (has_value[i]) use(node, names[i], defined, "optional tensor list");
        }
        break;
      }
      case nb::ArgumentValue::GraphArg: {
        const auto& sub = *access::graph_arg(arg);
        const auto& inner_graph = access::graph(sub);
        ScopeChecker inner(problems_,
                           fmt::format("{} > subgraph {}", where_, quote(access::name(sub))));
        const auto& sub_inputs = access::inputs(inner_graph);
        const std::vector<std::string_view> inputs(sub_inputs.begin(), sub_inputs.end());
        inner.check(inner_graph, inputs, depth + 1);
        break;
      }
      default:
        break;
    }
  }

  std::vector<std::string>& problems_;
  std::string where_;
  const Graph* graph_ = nullptr;
  NameSet bound_;
  bool collected_ = false;
  NameSet all_definitions_;
  NameSet defined_;
  NameSet described_;
};

template <typename Method>
std::vector<std::string> validate_structure(const Method& method, const std::string& context) {
  using Graph = std::remove_cvref_t<decltype(access::graph(method))>;
  std::vector<std::string> problems;
  ScopeChecker<Graph> top(problems,
                          fmt::format("{}: method {}", context, quote(access::name(method))));
  const auto& graph = access::graph(method);
  const auto& graph_inputs = access::inputs(graph);
  const auto& constants = access::constants(method);
  const auto& buffers = access::mutable_buffers(method);
  std::vector<std::string_view> bound(graph_inputs.begin(), graph_inputs.end());
  bound.reserve(bound.size() + constants.size() + buffers.size());
  for (const auto& c : constants) bound.emplace_back(access::name(c));
  for (const auto& b : buffers) bound.emplace_back(access::name(b));
  top.check(graph, bound, 0);
  for (const auto& spec : access::output_specs(method)) {
    const std::string_view target = access::target(spec);
    if (!top.is_defined(access::name(spec)))
      top.report("output spec names undefined value {}", access::name(spec));
    if (access::kind(spec) == nb::OutputKind::USER_INPUT_MUTATION && !top.is_defined(target)) {
      top.report("user input mutation target {} is not a value", target);
    }
    if (access::kind(spec) == nb::OutputKind::BUFFER_MUTATION && target.empty()) {
      top.report("buffer mutation output {} has no target key", access::name(spec));
    }
  }
  for (const auto& buffer : buffers) {
    if (!top.is_described(access::name(buffer))) {
      top.report("mutable buffer {} has no tensor_values entry (shape and dtype unknown)",
                 access::name(buffer));
    }
  }
  return problems;
}

template <typename Meta>
std::string describe(const Meta& meta) {
  std::string dims;
  for (const auto& dim : access::sizes(meta)) {
    if (!dims.empty()) dims += ", ";
    const int64_t min = access::min(dim);
    const int64_t max = access::max(dim);
    if (min == max) {
      dims += std::to_string(min);
    } else {
      dims += fmt::format("{}..{}", min, max < 0 ? std::string("inf") : std::to_string(max));
    }
  }
  return fmt::format("{} [{}]", dtype_name(static_cast<DType>(access::dtype(meta))), dims);
}

template <typename Meta>
std::string data_problem(const Meta& meta, const TensorData& data, const std::string& where) {
  auto declared = static_cast<DType>(access::dtype(meta));
  if (declared != data.dtype) {
    return fmt::format("{}: graph declares dtype {} but data is {}", where, dtype_name(declared),
                       dtype_name(data.dtype));
  }
  const auto& sizes = access::sizes(meta);
  bool shape_ok = sizes.size() == data.shape.size();
  size_t i = 0;
  for (auto dim = sizes.begin(); shape_ok && dim != sizes.end(); ++dim, ++i) {
    const int64_t min = access::min(*dim);
    const int64_t max = access::max(*dim);
    const int64_t actual = data.shape[i];
    shape_ok = min == max ? actual == min : actual >= min && (max < 0 || actual <= max);
  }
  if (!shape_ok) {
    return fmt::format("{}: graph declares shape {} but data has shape [{}]", where, describe(meta),
                       fmt::join(data.shape, ", "));
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

template <typename Constant>
std::string constant_problem(const Constant& c, const TensorData& data, std::string_view method,
                             const std::string& context) {
  const auto& meta = access::meta(c);
  if (access::quantized(meta)) return {};
  return data_problem(meta, data,
                      fmt::format("{}: method {}: constant {} (key {})", context, quote(method),
                                  quote(access::name(c)), quote(access::data_key(c))));
}

template <typename Meta>
std::vector<std::string> quant_problems(const Meta& meta, std::string_view tensor,
                                        const TensorLookup& data, std::string_view method,
                                        const std::string& context) {
  std::vector<std::string> problems;
  const auto* group = access::affine_group(meta);
  if (group == nullptr) return problems;
  auto check = [&](std::string_view key, nb::ScalarType declared, std::string_view what) {
    const TensorData* found = key.empty() ? nullptr : data.data(key);
    if (found == nullptr) return;
    if (found->dtype != static_cast<DType>(declared)) {
      problems.push_back(
          fmt::format("{}: method {}: tensor {}: {} key {} declares {} but data is {}", context,
                      quote(method), quote(tensor), what, quote(key),
                      dtype_name(static_cast<DType>(declared)), dtype_name(found->dtype)));
    }
  };
  check(access::scale_data_key(*group), access::scale_dtype(*group), "scale");
  check(access::zero_point_data_key(*group), access::zero_point_dtype(*group), "zero point");
  return problems;
}

}  // namespace

std::vector<std::string> validate_method_structure(const nb::MethodT& method,
                                                   const std::string& context) {
  return validate_structure(method, context);
}
std::vector<std::string> validate_method_structure(const nb::Method& method,
                                                   const std::string& context) {
  return validate_structure(method, context);
}

std::string describe_meta(const nb::TensorMetaT& meta) { return describe(meta); }
std::string describe_meta(const nb::TensorMeta& meta) { return describe(meta); }

std::string tensor_data_problem(const nb::TensorMetaT& meta, const TensorData& data,
                                const std::string& where) {
  return data_problem(meta, data, where);
}
std::string tensor_data_problem(const nb::TensorMeta& meta, const TensorData& data,
                                const std::string& where) {
  return data_problem(meta, data, where);
}

std::string constant_data_problem(const nb::NamedTensorRefT& c, const TensorData& data,
                                  std::string_view method, const std::string& context) {
  return constant_problem(c, data, method, context);
}
std::string constant_data_problem(const nb::NamedTensorRef& c, const TensorData& data,
                                  std::string_view method, const std::string& context) {
  return constant_problem(c, data, method, context);
}

std::vector<std::string> quant_data_problems(const nb::TensorMetaT& meta, std::string_view tensor,
                                             const TensorLookup& data, std::string_view method,
                                             const std::string& context) {
  return quant_problems(meta, tensor, data, method, context);
}
std::vector<std::string> quant_data_problems(const nb::TensorMeta& meta, std::string_view tensor,
                                             const TensorLookup& data, std::string_view method,
                                             const std::string& context) {
  return quant_problems(meta, tensor, data, method, context);
}

std::string BufferDeclarations::add(std::string_view key, Decl decl) {
  auto it = decls_.find(key);
  if (it == decls_.end()) {
    decls_.emplace(std::string(key), std::move(decl));
    return {};
  }
  if (it->second.dtype == decl.dtype && it->second.sizes == decl.sizes) return {};
  return fmt::format("mutable buffer {}: method {} declares {} but method {} declares {}",
                     quote(key), quote(it->second.method), it->second.text, quote(decl.method),
                     decl.text);
}

}  // namespace ptepack
