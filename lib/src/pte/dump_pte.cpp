// dump of .pte programs: methods, operators, delegates, stored tensors, named data, segments.
#include "pte/dump_pte.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "hash/parallel_hash.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack {
namespace {

namespace et = executorch_flatbuffer;
using ordered = nlohmann::json;

std::string layout_text(const pte::TensorInfo& t) {
  std::string text = fmt::format(
      "{} [{}]",
      t.known_type ? std::string(dtype_name(t.dtype)) : fmt::format("type{}", t.scalar_type),
      fmt::join(t.shape, ", "));
  if (!normalized_dim_order(t.dim_order).empty()) {
    text += fmt::format(" dim_order [{}]", fmt::join(t.dim_order, ", "));
  }
  return text;
}

std::string value_text(const et::ExecutionPlan& ep, int32_t index) {
  if (ep.values() == nullptr || index < 0 || static_cast<uint32_t>(index) >= ep.values()->size()) {
    return fmt::format("value {}", index);
  }
  const auto* v = ep.values()->Get(static_cast<uint32_t>(index));
  std::string kind = et::EnumNameKernelTypes(v->val_type());
  if (const auto* t = v->val_as_Tensor()) {
    pte::TensorInfo info;
    info.scalar_type = static_cast<int>(t->scalar_type());
    auto dtype = dtype_from_ptd(info.scalar_type);
    info.known_type = dtype.has_value();
    info.dtype = dtype.value_or(DType::BYTE);
    if (t->sizes()) info.shape.assign(t->sizes()->begin(), t->sizes()->end());
    kind = layout_text(info);
  }
  return fmt::format("value {} {}", index, kind.empty() ? "?" : kind);
}

std::string operator_name(const et::ExecutionPlan& ep, int32_t index) {
  if (ep.operators() == nullptr || index < 0 ||
      static_cast<uint32_t>(index) >= ep.operators()->size()) {
    return "?";
  }
  const auto* op = ep.operators()->Get(static_cast<uint32_t>(index));
  std::string name = op->name() ? op->name()->str() : "?";
  if (op->overload() != nullptr && op->overload()->size() > 0) name += "." + op->overload()->str();
  return name;
}

// One line per instruction: what runs, on which values.
std::vector<std::string> instructions(const et::ExecutionPlan& ep) {
  std::vector<std::string> out;
  for (uint32_t c = 0; ep.chains() && c < ep.chains()->size(); ++c) {
    const auto* chain = ep.chains()->Get(c);
    out.push_back(fmt::format("chain {}", c));
    for (uint32_t i = 0; chain->instructions() && i < chain->instructions()->size(); ++i) {
      const auto* ins = chain->instructions()->Get(i);
      std::string text;
      if (const auto* k = ins->instr_args_as_KernelCall()) {
        text = fmt::format("{} ({})", operator_name(ep, k->op_index()),
                           k->args() ? fmt::format("{}", fmt::join(*k->args(), ", ")) : "");
      } else if (const auto* d = ins->instr_args_as_DelegateCall()) {
        text = fmt::format("delegate {} ({})", d->delegate_index(),
                           d->args() ? fmt::format("{}", fmt::join(*d->args(), ", ")) : "");
      } else if (const auto* m = ins->instr_args_as_MoveCall()) {
        text = fmt::format("move {} -> {}", m->move_from(), m->move_to());
      } else if (const auto* j = ins->instr_args_as_JumpFalseCall()) {
        text =
            fmt::format("jump_false {} -> {}", j->cond_value_index(), j->destination_instruction());
      } else if (const auto* f = ins->instr_args_as_FreeCall()) {
        text = fmt::format("free {}", f->value_index());
      } else {
        text = fmt::format("(instruction type {})", static_cast<int>(ins->instr_args_type()));
      }
      out.push_back(fmt::format("  [{}] {}", i, text));
    }
  }
  return out;
}

std::string where_text(const pte::TensorInfo& t) {
  switch (t.storage) {
    case pte::Storage::external:
      return fmt::format("EXTERNAL {}", t.fqn);
    case pte::Storage::constant_segment:
    case pte::Storage::constant_buffer:
    case pte::Storage::mutable_state:
      return fmt::format("{} [{}]", pte::storage_name(t.storage), t.buffer_index);
    case pte::Storage::none:
      break;
  }
  return "";
}

// One dump of programs in progress: the input, the digests of its stored bytes and
// the output text; every section below appends its lines here.
struct Dumper {
  const ProgramSet& set;
  const RangeDigests& digests;
  ProgramDump& out;
  bool rows = true;  // per-value, per-entry and per-segment lines

  void line(const std::string& text) const { out.text += text_line(text); }
  void row(const std::string& text) const {
    if (rows) line(text);
  }
};

// Tensor bytes a program holds itself and those it loads from data files.
struct ByteTotals {
  uint64_t inside = 0;
  uint64_t external = 0;
};

// The digests of every stored range: tensors held in the programs and named data.
void hash_stored_bytes(const ProgramSet& set, unsigned jobs, RangeDigests& digests) {
  for (const auto& pf : set.programs) {
    for (const auto& t : pf.program.tensors) {
      if (t.storage != pte::Storage::none && t.storage != pte::Storage::external) {
        digests.add(t.bytes);
      }
    }
    for (const auto& nd : pf.program.named_data) digests.add(nd.bytes);
  }
  digests.compute(jobs, nullptr);
}

void dump_header(const Dumper& d, const ProgramFile& pf, ordered& pj) {
  const auto& p = pf.program;
  pj["file"] = pf.file;
  pj["size"] = p.file->size();
  const auto& h = p.header;
  pj["header"] = h.present ? ordered{{"program_size", h.program_size},
                                     {"segment_base_offset", h.segment_base},
                                     {"segment_data_size", h.segment_data_size}}
                           : ordered(nullptr);
  d.line(fmt::format("\nprogram {}: {} bytes, {}", pf.file, p.file->size(),
                     h.present
                         ? fmt::format("eh00 header (program {} bytes, segments at {}, {} bytes)",
                                       h.program_size, h.segment_base, h.segment_data_size)
                         : std::string("no eh00 header")));
  if (!p.not_rewritable.empty()) {
    d.line(fmt::format("  not rewritable: {}", fmt::join(p.not_rewritable, "; ")));
  }
  pj["not_rewritable"] = p.not_rewritable;
}

// One method (execution plan): its signature, operators, delegates and, with
// `graph`, its instructions.
ordered dump_method(const Dumper& d, const pte::Program& p, uint32_t i, bool graph) {
  const auto& ep = *p.root()->execution_plan()->Get(i);
  ordered mj;
  mj["name"] = p.plans[i];
  std::vector<std::string> ins, outs, ops;
  for (uint32_t k = 0; ep.inputs() && k < ep.inputs()->size(); ++k)
    ins.push_back(value_text(ep, ep.inputs()->Get(k)));
  for (uint32_t k = 0; ep.outputs() && k < ep.outputs()->size(); ++k)
    outs.push_back(value_text(ep, ep.outputs()->Get(k)));
  for (uint32_t k = 0; ep.operators() && k < ep.operators()->size(); ++k)
    ops.push_back(operator_name(ep, static_cast<int32_t>(k)));
  mj["inputs"] = ins;
  mj["outputs"] = outs;
  mj["operators"] = ops;
  mj["values"] = ep.values() ? ep.values()->size() : 0;
  d.line(fmt::format("  method {}  ({} values, {} operators, {} delegates)", p.plans[i],
                     ep.values() ? ep.values()->size() : 0, ops.size(),
                     ep.delegates() ? ep.delegates()->size() : 0));
  for (const auto& s : ins) d.line("    input    " + s);
  for (const auto& s : outs) d.line("    output   " + s);
  for (const auto& s : ops) d.line("    operator " + s);
  ordered delegates = ordered::array();
  for (const auto& del : p.delegates) {
    if (del.plan != i) continue;
    delegates.push_back({{"id", del.id},
                         {"bytes", del.size},
                         {"location", del.inline_data ? "inline" : "segment"},
                         {"index", del.index}});
    d.line(fmt::format("    delegate {}  {} bytes  {} {}", del.id, del.size,
                       del.inline_data ? "inline" : "segment", del.index));
  }
  mj["delegates"] = delegates;
  if (graph) {
    auto text = instructions(ep);
    mj["instructions"] = text;
    for (const auto& s : text) d.line("    " + s);
  }
  return mj;
}

ordered dump_stored_tensors(const Dumper& d, const pte::Program& p, ByteTotals& totals) {
  ordered tensors = ordered::array();
  std::vector<const pte::TensorInfo*> shown;
  for (const auto& t : p.tensors) {
    if (t.storage != pte::Storage::none) shown.push_back(&t);
  }
  d.line(fmt::format("  stored tensors: {}", shown.size()));
  for (const auto* t : shown) {
    std::string sha;
    uint64_t nbytes = t->nbytes;
    if (t->storage == pte::Storage::external) {
      // Its size from its layout (the data file's bytes count below when found).
      nbytes = t->known_type ? byte_size(t->dtype, t->shape).value_or(0) : 0;
      auto it = d.set.data.find(t->fqn);
      totals.external += it != d.set.data.end() ? it->second.bytes.size : 0;
    } else {
      sha = to_hex(d.digests.of(t->bytes));
      totals.inside += t->nbytes;
    }
    tensors.push_back({{"method", p.plans[t->plan]},
                       {"value", t->value},
                       {"dtype", t->known_type ? ordered(dtype_name(t->dtype)) : ordered(nullptr)},
                       {"shape", t->shape},
                       {"dim_order", t->dim_order},
                       {"nbytes", nbytes},
                       {"sha256", sha},
                       {"storage", pte::storage_name(t->storage)},
                       {"key", t->storage == pte::Storage::external ? t->fqn : ""}});
    d.row(fmt::format("    {} value {:<5} {:<28} {:>10}  {:<12}  {}", p.plans[t->plan], t->value,
                       layout_text(*t), nbytes, sha.substr(0, 12), where_text(*t)));
  }
  return tensors;
}

ordered dump_named_data(const Dumper& d, const pte::Program& p, ByteTotals& totals) {
  ordered named = ordered::array();
  std::map<uint32_t, std::vector<std::string>> by_segment;
  for (const auto& nd : p.named_data) by_segment[nd.segment].push_back(nd.key);
  d.line(fmt::format("  named data: {}", p.named_data.size()));
  for (const auto& nd : p.named_data) {
    auto sha = to_hex(d.digests.of(nd.bytes));
    std::vector<std::string> shares;
    for (const auto& k : by_segment[nd.segment]) {
      if (k != nd.key) shares.push_back(k);
    }
    totals.inside += nd.bytes.size;
    named.push_back({{"key", nd.key},
                     {"nbytes", nd.bytes.size},
                     {"segment", nd.segment},
                     {"sha256", sha},
                     {"shares_bytes_with", shares}});
    d.row(fmt::format(
        "    {}  {} bytes  segment {}{}", nd.key, nd.bytes.size, nd.segment,
        shares.empty() ? "" : fmt::format("  (shared with {})", fmt::join(shares, ", "))));
  }
  return named;
}

ordered dump_segments(const Dumper& d, const pte::Program& p) {
  ordered segments = ordered::array();
  d.line(fmt::format("  segments: {}", p.segments.size()));
  for (size_t s = 0; s < p.segments.size(); ++s) {
    segments.push_back({{"offset", p.segments[s].offset}, {"size", p.segments[s].size}});
    d.row(fmt::format("    #{:<3} offset {:>10}  {:>10} bytes", s, p.segments[s].offset,
                       p.segments[s].size));
  }
  return segments;
}

// A program of a directory: the data files its manifest entry names, and what
// loading them costs against what the program reads of them.
void dump_data_files(const Dumper& d, const pte::Program& p, const ManifestProgramEntry& entry,
                     ordered& pj) {
  const auto& set = d.set;
  pj["shards"] = entry.shards;      // the manifest's and pack --json's name
  pj["data_files"] = entry.shards;  // deprecated: the old name, one version more
  d.line(fmt::format("  data files (load in this order): {}",
                     entry.shards.empty() ? std::string("none")
                                          : fmt::format("{}", fmt::join(entry.shards, " "))));
  uint64_t loaded = 0;
  for (const auto& file : entry.shards) {
    auto shard = std::find_if(set.manifest->shards.begin(), set.manifest->shards.end(),
                              [&](const ManifestShard& s) { return s.file == file; });
    if (shard != set.manifest->shards.end()) loaded += shard->size;
  }
  std::set<std::tuple<const InputFile*, uint64_t, uint64_t>> used_ranges;
  uint64_t used = 0;
  auto use = [&](const std::string& key) {
    auto data = set.data.find(key);
    if (data == set.data.end()) return;
    const auto& r = data->second.bytes;
    if (used_ranges.emplace(r.file.get(), r.offset, r.size).second) used += r.size;
  };
  for (const auto& t : p.tensors) {
    if (t.storage == pte::Storage::external) use(t.fqn);
  }
  for (const auto& k : entry.named_data) use(k);
  pj["data_bytes_loaded"] = loaded;
  pj["data_bytes_used"] = used;
  d.line(fmt::format("  loads {} of data files for the {} it uses ({} beyond)", human_bytes(loaded),
                     human_bytes(used), percent(loaded - std::min(loaded, used), used)));
}

ordered dump_program(const Dumper& d, const ProgramFile& pf, const ManifestProgramEntry* entry,
                     bool graph) {
  const auto& p = pf.program;
  ordered pj;
  dump_header(d, pf, pj);
  ordered methods = ordered::array();
  for (uint32_t i = 0; i < p.root()->execution_plan()->size(); ++i) {
    methods.push_back(dump_method(d, p, i, graph));
  }
  pj["methods"] = methods;

  ByteTotals totals;
  pj["stored_tensors"] = dump_stored_tensors(d, p, totals);
  pj["named_data"] = dump_named_data(d, p, totals);
  pj["segments"] = dump_segments(d, p);
  // Former named data of a packed program lives in its shards too.
  if (pf.named_keys) {
    for (const auto& k : *pf.named_keys) {
      auto it = d.set.data.find(k);
      if (it != d.set.data.end()) totals.external += it->second.bytes.size;
    }
  }
  pj["bytes_in_program"] = totals.inside;
  pj["bytes_in_data_files"] = totals.external;
  d.line(fmt::format("  tensor bytes: {} in the program, {} in data files",
                     human_bytes(totals.inside), human_bytes(totals.external)));
  if (entry != nullptr) dump_data_files(d, p, *entry, pj);
  return pj;
}

}  // namespace

ProgramDump dump_programs(const ProgramSet& set, const ProgramDumpOptions& options) {
  RangeDigests digests;
  hash_stored_bytes(set, options.jobs, digests);

  ProgramDump out;
  out.json = ordered::array();
  std::map<std::string, const ManifestProgramEntry*> entries;
  if (set.manifest != nullptr) {
    for (const auto& e : set.manifest->programs) entries.emplace(e.file, &e);
  }
  const Dumper d{set, digests, out, options.rows};
  for (const auto& pf : set.programs) {
    auto it = entries.find(pf.file);
    out.json.push_back(
        dump_program(d, pf, it != entries.end() ? it->second : nullptr, options.graph));
  }
  return out;
}

std::string own_tensor_key(const pte::Program& program, const pte::TensorInfo& t) {
  const std::string& plan = program.plans[t.plan];
  std::string name = t.fqn.empty() ? fmt::format("constant_{}", t.buffer_index) : t.fqn;
  return name.starts_with(plan + "/") ? name : plan + "/" + name;
}

StoredRanges stored_ranges(std::vector<ByteRange> ranges) {
  auto place = [](const ByteRange& r) { return std::tuple(r.file.get(), r.offset, r.size); };
  std::sort(ranges.begin(), ranges.end(),
            [&](const ByteRange& a, const ByteRange& b) { return place(a) < place(b); });
  StoredRanges out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && place(ranges[i]) == place(ranges[i - 1])) continue;
    ++out.count;
    out.bytes += ranges[i].size;
  }
  return out;
}

TensorTable own_tensors(const pte::Program& program) {
  TensorTable out;
  for (const auto& t : program.tensors) {
    if (t.storage != pte::Storage::constant_segment && t.storage != pte::Storage::constant_buffer) {
      continue;
    }
    const std::string key = own_tensor_key(program, t);
    TensorData d;
    d.dtype = t.dtype;
    d.shape = t.shape;
    d.bytes = t.bytes;
    d.dim_order = normalized_dim_order(t.dim_order);
    auto [it, fresh] = out.emplace(key, d);
    const auto& first = it->second;
    if (!fresh && (first.dtype != d.dtype || first.shape != d.shape ||
                   first.bytes.offset != d.bytes.offset || first.bytes.size != d.bytes.size)) {
      out.emplace(fmt::format("{}.v{}", key, t.value), d);  // one buffer read another way
    }
  }
  for (const auto& nd : program.named_data) out.emplace(nd.key, opaque_tensor(nd.bytes));
  return out;
}

}  // namespace ptepack
