// `dump --graph=dot`: any program as a Graphviz digraph, one cluster per method.
#include "dump/graph_dot.h"

#include "graph/graph_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "ptepack/base/error.h"
#include "graph/program_access.h"
#include "graph/validate.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack {
namespace {

namespace et = executorch_flatbuffer;

// A DOT string of lines: names from files escaped first (control characters
// and invalid UTF-8 shown as \xNN), then quotes and backslashes, lines joined
// by DOT's line break. Empty lines are left out.
std::string label(std::initializer_list<std::string_view> lines) {
  std::string out = "\"";
  bool first = true;
  for (auto line : lines) {
    if (line.empty()) continue;
    if (!first) out += "\\n";
    first = false;
    for (char c : escaped(line)) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
  }
  return out + "\"";
}

std::string dot_string(std::string_view text) { return label({text}); }

class Dot {
 public:
  explicit Dot(std::string_view title) {
    out_ = fmt::format(
        "digraph ptepack {{\n"
        "  graph [label={}, labelloc=t, fontname=\"Helvetica\", compound=true];\n"
        "  node [fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [fontname=\"Helvetica\", fontsize=9];\n",
        dot_string(title));
  }
  void open_cluster(const std::string& id, std::string_view title) {
    out_ += fmt::format("{}subgraph \"cluster_{}\" {{\n{}  label={};\n", pad(), id, pad(),
                        dot_string(title));
    ++depth_;
  }
  void close_cluster() {
    --depth_;
    out_ += pad() + "}\n";
  }
  void node(const std::string& id, const std::string& text, std::string_view attributes) {
    out_ += fmt::format("{}\"{}\" [label={}{}{}];\n", pad(), id, text,
                        attributes.empty() ? "" : ", ", attributes);
  }
  void edge(const std::string& from, const std::string& to, std::string_view text) {
    out_ += fmt::format("{}\"{}\" -> \"{}\" [label={}];\n", pad(), from, to, dot_string(text));
  }
  std::string finish() { return out_ + "}\n"; }

 private:
  [[nodiscard]] std::string pad() const { return std::string(2 * (depth_ + 1), ' '); }
  std::string out_;
  size_t depth_ = 0;
};

constexpr std::string_view kInput = "shape=invhouse";
constexpr std::string_view kOutput = "shape=house";
constexpr std::string_view kConstant = "shape=note, style=filled, fillcolor=\"#eeeeee\"";
constexpr std::string_view kDelegate = "shape=box3d, style=filled, fillcolor=\"#dde8f5\"";
constexpr std::string_view kCall = "shape=box, style=rounded";

// ---------------------------------------------------------------- program graphs

// A placeholder bound to data: its key, and its meta when the binding has one.
struct Binding {
  std::string_view key;
  const nb::TensorMeta* meta = nullptr;
};

void draw_graph(Dot& dot, const nb::Graph& graph, const std::string& id,
                const std::map<std::string_view, Binding>& bound) {
  std::map<std::string_view, std::string> producer;  // value name -> node id
  const MetaIndex metas(graph);
  size_t n = 0;
  for (const auto& node : access::nodes(graph)) {
    const std::string node_id = fmt::format("{}_n{}", id, n++);
    const std::string_view name = access::name(node);
    const auto* meta = metas.find(name);
    const std::string shape = meta ? describe_meta(*meta) : std::string();
    switch (node.op_kind()) {
      case nb::OpKind::PLACEHOLDER:
        if (auto b = bound.find(name); b != bound.end()) {
          const auto* m = b->second.meta != nullptr ? b->second.meta : meta;
          dot.node(node_id, label({b->second.key, m ? describe_meta(*m) : std::string()}),
                   kConstant);
        } else {
          dot.node(node_id, label({"input " + std::string(name), shape}), kInput);
        }
        producer[name] = node_id;
        break;
      case nb::OpKind::OUTPUT:
        dot.node(node_id, label({"output"}), kOutput);
        break;
      default:
        dot.node(node_id, label({access::target(node), name}), kCall);
        producer[name] = node_id;
        for (const auto& o : access::outputs(node)) producer[access::name(o)] = node_id;
    }
    auto use = [&](std::string_view value) {
      auto it = producer.find(value);
      if (it != producer.end()) dot.edge(it->second, node_id, value);
    };
    size_t sub = 0;
    for (const auto& input : access::inputs(node)) {
      const nb::Argument& arg = access::arg(input);
      if (const auto* t = arg.value_as_TensorArg()) use(access::name(*t));
      if (const auto* l = arg.value_as_TensorListArg()) {
        for (std::string_view v : access::names(*l)) use(v);
      }
      if (const auto* l = arg.value_as_OptionalTensorListArg()) {
        for (std::string_view v : access::names(*l)) use(v);
      }
      if (const auto* g = arg.value_as_GraphArg()) {
        const std::string sub_id = fmt::format("{}_s{}", node_id, sub++);
        dot.open_cluster(sub_id, fmt::format("subgraph {} of {}", access::text(g->name()), name));
        draw_graph(dot, *g->graph(), sub_id, {});
        dot.close_cluster();
      }
    }
  }
}

void draw_program_graph(Dot& dot, const nb::Program& program) {
  size_t m = 0;
  for (const auto& method : access::methods(program)) {
    const std::string id = fmt::format("m{}", m++);
    std::map<std::string_view, Binding> bound;  // placeholder -> data key
    for (const auto& c : access::constants(method))
      bound[access::name(c)] = {access::data_key(c), c.meta()};
    for (const auto& b : access::mutable_buffers(method))
      bound[access::name(b)] = {access::fqn(b), nullptr};
    dot.open_cluster(id, fmt::format("method {}", access::name(method)));
    draw_graph(dot, access::graph(method), id, bound);
    dot.close_cluster();
  }
}

// ---------------------------------------------------------------- .pte programs

std::string tensor_shape(const pte::TensorInfo& t) {
  return fmt::format("{} [{}]", dtype_name(t.dtype), fmt::join(t.shape, ", "));
}

// Instructions in order; an edge carries a value from the instruction (or
// input, or constant) that last used it to the next one that does.
// A program's Tensor values and delegates, grouped by plan once.
struct PlanParts {
  std::map<uint32_t, const pte::TensorInfo*> tensors;  // value index -> tensor
  std::vector<const pte::Delegate*> delegates;         // in the plan's order
};

std::vector<PlanParts> parts_of(const pte::Program& p) {
  std::vector<PlanParts> parts(p.plans.size());
  for (const auto& t : p.tensors) parts[t.plan].tensors[t.value] = &t;
  for (const auto& d : p.delegates) parts[d.plan].delegates.push_back(&d);
  return parts;
}

void draw_plan(Dot& dot, const pte::Program& p, uint32_t plan, const PlanParts& parts,
               const std::string& id) {
  const auto& ep = *p.root()->execution_plan()->Get(plan);
  const auto& tensors = parts.tensors;
  auto describe = [&](uint32_t v) {
    auto it = tensors.find(v);
    return it == tensors.end() ? fmt::format("v{}", v)
                               : fmt::format("v{} {}", v, tensor_shape(*it->second));
  };
  std::map<uint32_t, std::string> last;  // value -> node that last used it
  const auto* inputs = ep.inputs();
  for (uint32_t i = 0; inputs != nullptr && i < inputs->size(); ++i) {
    const auto v = static_cast<uint32_t>(inputs->Get(i));
    const std::string node_id = fmt::format("{}_in{}", id, i);
    dot.node(node_id, label({fmt::format("input {}", i), describe(v)}), kInput);
    last[v] = node_id;
  }
  for (const auto& [v, t] : tensors) {
    if (t->storage == pte::Storage::none || last.count(v)) continue;
    const std::string node_id = fmt::format("{}_k{}", id, v);
    const std::string key = t->fqn.empty() ? fmt::format("constant v{}", v) : t->fqn;
    dot.node(node_id, label({key, tensor_shape(*t)}), kConstant);
    last[v] = node_id;
  }
  const auto& delegates = parts.delegates;
  auto touch = [&](const std::string& node_id, const flatbuffers::Vector<int32_t>* args) {
    for (uint32_t k = 0; args != nullptr && k < args->size(); ++k) {
      const auto v = static_cast<uint32_t>(args->Get(k));
      const auto* value = ep.values()->Get(v);
      if (value->val_type() != et::KernelTypes::Tensor &&
          value->val_type() != et::KernelTypes::TensorList &&
          value->val_type() != et::KernelTypes::OptionalTensorList) {
        continue;  // scalars and lists of numbers are arguments, not data flow
      }
      auto it = last.find(v);
      if (it != last.end() && it->second != node_id) dot.edge(it->second, node_id, describe(v));
      last[v] = node_id;
    }
  };
  const auto* chains = ep.chains();
  for (uint32_t c = 0; chains != nullptr && c < chains->size(); ++c) {
    const auto* instructions = chains->Get(c)->instructions();
    for (uint32_t i = 0; instructions != nullptr && i < instructions->size(); ++i) {
      const auto* ins = instructions->Get(i);
      const std::string node_id = fmt::format("{}_c{}_i{}", id, c, i);
      const std::string at = fmt::format("#{}", i);
      if (const auto* k = ins->instr_args_as_KernelCall()) {
        const auto* op = ep.operators()->Get(static_cast<uint32_t>(k->op_index()));
        std::string name(access::text(op->name()));
        if (op->overload() != nullptr && op->overload()->size() > 0)
          name += "." + op->overload()->str();
        dot.node(node_id, label({name, at}), kCall);
        touch(node_id, k->args());
      } else if (const auto* d = ins->instr_args_as_DelegateCall()) {
        const auto* info = delegates.at(static_cast<size_t>(d->delegate_index()));
        dot.node(node_id, label({"delegate " + info->id, fmt::format("blob {} B", info->size), at}),
                 kDelegate);
        touch(node_id, d->args());
      } else {
        const auto kind = et::EnumNameInstructionArguments(ins->instr_args_type());
        dot.node(node_id, label({kind, at}), "shape=plaintext");
      }
    }
  }
  const auto* outputs = ep.outputs();
  for (uint32_t i = 0; outputs != nullptr && i < outputs->size(); ++i) {
    const auto v = static_cast<uint32_t>(outputs->Get(i));
    const std::string node_id = fmt::format("{}_out{}", id, i);
    dot.node(node_id, label({fmt::format("output {}", i), describe(v)}), kOutput);
    if (auto it = last.find(v); it != last.end()) dot.edge(it->second, node_id, describe(v));
  }
}

}  // namespace

std::string graph_dot(const Artifact& artifact) {
  Dot dot(fmt::format("{} ({})", artifact.name, artifact_kind_name(artifact.kind)));
  if (artifact.program) draw_program_graph(dot, artifact.program.root());
  for (size_t f = 0; f < artifact.pte_programs.size(); ++f) {
    const auto& pf = artifact.pte_programs[f];
    const auto parts = parts_of(pf.program);
    for (uint32_t m = 0; m < pf.program.plans.size(); ++m) {
      const std::string id = fmt::format("p{}_m{}", f, m);
      dot.open_cluster(id, artifact.pte_programs.size() > 1
                               ? fmt::format("{}: method {}", pf.file, pf.program.plans[m])
                               : fmt::format("method {}", pf.program.plans[m]));
      draw_plan(dot, pf.program, m, parts[m], id);
      dot.close_cluster();
    }
  }
  return dot.finish();
}

}  // namespace ptepack
