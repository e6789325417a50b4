// Dump: collect methods, keys, state, shards and dedup figures, then render text or JSON.
#include "ptepack/dump/dump.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "ptepack/formats/json_util.h"

#include "dump_pte.h"
#include "graph_text.h"
#include "ptepack/base/error.h"
#include "ptepack/base/format_util.h"
#include "ptepack/formats/artifact.h"
#include "ptepack/hash/parallel_hash.h"
#include "ptepack/transforms/program_keys.h"
#include "ptepack/transforms/validate.h"

namespace ptepack {
namespace {

using ordered = nlohmann::json;

// One key of the artifact; names point into the artifact and its manifest (a row is a few
// words, so a million keys cost tens of MB, not hundreds).
struct KeyRow {
  const std::string* key = nullptr;
  const TensorData* data = nullptr;
  const std::string* manifest_sha256 = nullptr;  // else the digest computed at the same index
  std::string_view shard;
  std::string_view alias_of;
  bool is_mutable = false;
  bool referenced = true;
};

// Output in chunks: a dump is written as it is rendered, never held whole.
class Sink {
 public:
  explicit Sink(const TextOut& out) : out_(out) {}
  void add(std::string_view text) {
    buffer_ += text;
    if (buffer_.size() >= kChunk) flush();
  }
  void flush() {
    if (!buffer_.empty()) out_(buffer_);
    buffer_.clear();
  }

 private:
  static constexpr size_t kChunk = 1 << 20;
  const TextOut& out_;
  std::string buffer_;
};

std::string shape_text(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

const nb::TensorMetaT* find_meta(const nb::GraphT& graph, const std::string& name) {
  for (const auto& tv : graph.tensor_values) {
    if (tv->name == name) return tv->meta.get();
  }
  return nullptr;
}

std::string shorten(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  size_t head = (width - 3) / 2;
  return text.substr(0, head) + "..." + text.substr(text.size() - (width - 3 - head));
}

ordered method_json(const nb::MethodT& m, bool graph) {
  ordered j;
  j["name"] = m.name;
  ordered inputs = ordered::array();
  for (const auto& name : m.graph->inputs) {
    const auto* meta = find_meta(*m.graph, name);
    inputs.push_back({{"name", name}, {"meta", meta ? describe_meta(*meta) : std::string()}});
  }
  j["inputs"] = inputs;
  ordered outputs = ordered::array();
  for (const auto& name : m.graph->outputs) {
    const auto* meta = find_meta(*m.graph, name);
    outputs.push_back({{"name", name}, {"meta", meta ? describe_meta(*meta) : std::string()}});
  }
  j["outputs"] = outputs;
  ordered specs = ordered::array();
  for (const auto& s : m.output_specs) {
    specs.push_back(
        {{"name", s->name}, {"kind", nb::EnumNameOutputKind(s->kind)}, {"target", s->target}});
  }
  j["output_specs"] = specs;
  ordered constants = ordered::array();
  for (const auto& c : m.constants) {
    constants.push_back({{"name", c->name},
                         {"key", c->data_key},
                         {"kind", nb::EnumNameInputKind(c->kind)},
                         {"mutated", c->mutated},
                         {"meta", describe_meta(*c->meta)},
                         {"quantized", c->meta->quant != nullptr}});
  }
  j["constants"] = constants;
  ordered buffers = ordered::array();
  for (const auto& b : m.mutable_buffers) buffers.push_back({{"name", b->name}, {"key", b->fqn}});
  j["mutable_buffers"] = buffers;
  auto counts = count_nodes(*m.graph);
  j["nodes"] = counts.nodes;
  j["subgraphs"] = counts.subgraphs;
  if (graph) j["graph"] = graph_json(*m.graph);
  return j;
}

}  // namespace

std::string dump_artifact(const std::filesystem::path& path, const DumpOptions& options) {
  std::string text;
  dump_artifact(path, options, [&text](std::string_view chunk) { text += chunk; });
  return text;
}

void dump_artifact(const std::filesystem::path& path, const DumpOptions& options,
                   const TextOut& write) {
  Sink out(write);
  auto artifact = load_artifact(path);
  ProgramKeys keys;
  if (artifact.program) keys = analyze_program_keys(*artifact.program);

  // One row per key with data, plus referenced keys that have none (state buffers).
  std::vector<KeyRow> rows;
  std::vector<ByteRange> ranges;
  for (const auto& [key, data] : artifact.data) {
    KeyRow row{&key,
               &data,
               nullptr,
               {},
               {},
               keys.mutated.count(key) > 0,
               !artifact.program || keys.keys.count(key) > 0};
    if (auto it = artifact.aliases.find(key); it != artifact.aliases.end())
      row.alias_of = it->second;
    if (artifact.manifest) {
      if (auto t = artifact.manifest->tensors.find(key); t != artifact.manifest->tensors.end()) {
        row.manifest_sha256 = &t->second.sha256;
        row.shard = t->second.shard;
        row.is_mutable = row.is_mutable || t->second.is_mutable;
      }
    }
    rows.push_back(row);
    if (!artifact.manifest) ranges.push_back(data.bytes);
  }
  std::vector<Digest> digests;
  if (!artifact.manifest) digests = hash_ranges(ranges, options.jobs);
  ranges = {};
  // A key the manifest does not list (a corrupt directory) has no digest to show.
  auto sha256_of = [&](size_t i) {
    if (rows[i].manifest_sha256 != nullptr) return *rows[i].manifest_sha256;
    return i < digests.size() ? to_hex(digests[i]) : std::string();
  };
  std::set<std::string> state;
  for (const auto& key : keys.mutated) state.insert(key);

  uint64_t referenced_bytes = 0, stored_bytes = 0, unreferenced_bytes = 0, unreferenced_keys = 0;
  for (const auto& r : rows) {
    if (!r.referenced) {
      ++unreferenced_keys;
      unreferenced_bytes += r.data->bytes.size;
      continue;
    }
    referenced_bytes += r.data->bytes.size;
  }
  if (artifact.manifest) {
    for (const auto& s : artifact.manifest->shards) stored_bytes += s.payload_bytes;
  } else {
    // Stored once per distinct byte range (aliases share their owner's range).
    std::vector<std::tuple<const InputFile*, uint64_t, uint64_t>> stored;
    stored.reserve(rows.size());
    for (const auto& r : rows)
      stored.emplace_back(r.data->bytes.file.get(), r.data->bytes.offset, r.data->bytes.size);
    std::sort(stored.begin(), stored.end());
    stored.erase(std::unique(stored.begin(), stored.end()), stored.end());
    for (const auto& range : stored) stored_bytes += std::get<2>(range);
  }
  uint64_t saved = referenced_bytes + unreferenced_bytes > stored_bytes
                       ? referenced_bytes + unreferenced_bytes - stored_bytes
                       : 0;

  ProgramDump programs;
  if (!artifact.pte_programs.empty()) programs = dump_programs(artifact, options);

  if (options.json) {
    ordered j;
    j["artifact"] = artifact.name;
    j["kind"] = artifact_kind_name(artifact.kind);
    if (!artifact.pte_programs.empty()) j["programs"] = programs.json;
    if (artifact.program) {
      ordered methods = ordered::array();
      for (const auto& m : artifact.program->methods)
        methods.push_back(method_json(*m, options.graph));
      j["program"] = {{"version", artifact.program->version}, {"methods", methods}};
    } else {
      j["program"] = nullptr;
    }
    j["state"] = state;
    ordered shards = ordered::array();
    if (artifact.manifest) {
      const auto& m = *artifact.manifest;
      for (const auto& s : m.shards) {
        ordered sj{{"file", s.file},
                   {"size", s.size},
                   {"payload_bytes", s.payload_bytes},
                   {"keys", s.keys.size()}};
        sj["fill"] =
            m.max_shard_bytes
                ? ordered(static_cast<double>(m.cap_mode == "file" ? s.size : s.payload_bytes) /
                          static_cast<double>(*m.max_shard_bytes))
                : ordered(nullptr);
        shards.push_back(sj);
      }
      j["shard_format"] = m.shard_format;
      j["max_shard_bytes"] = m.max_shard_bytes ? ordered(*m.max_shard_bytes) : ordered(nullptr);
      j["cap_mode"] = m.cap_mode;
    }
    j["shards"] = shards;
    j["summary"] = {{"keys", rows.size()},
                    {"referenced_bytes", referenced_bytes},
                    {"stored_bytes", stored_bytes},
                    {"dedup_saved_bytes", saved},
                    {"aliases", artifact.aliases.size()},
                    {"unreferenced_keys", unreferenced_keys},
                    {"unreferenced_bytes", unreferenced_bytes}};
    // "tensors" sorts last among the fields: stream it after the rest instead of
    // building one DOM node per key (a DOM costs ~40x a safetensors header).
    // Rows are in key order already, so the text equals json_text of the whole.
    std::string head = json_text(j);
    head.resize(head.size() - 3);  // "\n}\n"
    out.add(head);
    out.add(rows.empty() ? ",\n  \"tensors\": {}" : ",\n  \"tensors\": {");
    // Each entry as json_text would print it inside the document (fields in name order,
    // indented two levels), formatted directly: a million keys, not a million DOMs.
    auto string_json = [](std::string_view text) { return ordered(text).dump(); };
    std::string entry;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      entry = i == 0 ? "\n    " : ",\n    ";
      entry += string_json(*r.key);
      entry += ": {";
      if (!r.alias_of.empty()) entry += "\n      \"alias_of\": " + string_json(r.alias_of) + ",";
      entry += fmt::format(
          "\n      \"dtype\": \"{}\",\n      \"mutable\": {},\n      \"nbytes\": {},"
          "\n      \"referenced\": {},\n      \"sha256\": \"{}\",\n      \"shape\": ",
          dtype_name(r.data->dtype), r.is_mutable, r.data->bytes.size, r.referenced,
          sha256_of(i));
      if (r.data->shape.empty()) {
        entry += "[]";
      } else {
        entry += fmt::format("[\n        {}\n      ]", fmt::join(r.data->shape, ",\n        "));
      }
      if (!r.shard.empty()) entry += ",\n      \"shard\": " + string_json(r.shard);
      entry += "\n    }";
      out.add(entry);
    }
    out.add(rows.empty() ? "\n}\n" : "\n  }\n}\n");
    out.flush();
    return;
  }

  auto line = [&out](const std::string& text) { out.add(text_line(text)); };
  line(fmt::format("{} ({})", artifact.name, artifact_kind_name(artifact.kind)));
  out.add(programs.text);
  if (artifact.program) {
    line(fmt::format("\nmethods: {}", artifact.program->methods.size()));
    for (const auto& m : artifact.program->methods) {
      auto counts = count_nodes(*m->graph);
      line(fmt::format("  {}  ({} nodes, {} subgraphs, {} constants, {} mutable buffers)", m->name,
                       counts.nodes, counts.subgraphs, m->constants.size(),
                       m->mutable_buffers.size()));
      for (const auto& name : m->graph->inputs) {
        const auto* meta = find_meta(*m->graph, name);
        line(fmt::format("    input   {} {}", name, meta ? describe_meta(*meta) : ""));
      }
      for (const auto& name : m->graph->outputs) {
        const auto* meta = find_meta(*m->graph, name);
        std::string kind;
        for (const auto& s : m->output_specs) {
          if (s->name == name)
            kind = s->target.empty()
                       ? nb::EnumNameOutputKind(s->kind)
                       : fmt::format("{} -> {}", nb::EnumNameOutputKind(s->kind), s->target);
        }
        line(fmt::format("    output  {} {} {}", name, meta ? describe_meta(*meta) : "", kind));
      }
      for (const auto& c : m->constants) {
        line(fmt::format("    binds   {} <- {}{}", c->name, c->data_key,
                         c->mutated ? " (mutated)" : ""));
      }
      for (const auto& b : m->mutable_buffers)
        line(fmt::format("    buffer  {} <- {}", b->name, b->fqn));
      if (options.graph) out.add(graph_text(*m->graph, 6));
    }
  }
  // Columns sized for a terminal: long keys are shortened in the middle, owners
  // of aliases and shard names are listed below (--json has everything whole).
  size_t width = 16;
  for (const auto& r : rows) width = std::max(width, std::min<size_t>(r.key->size(), 44));
  std::map<std::string, size_t> shard_number;
  if (artifact.manifest) {
    for (const auto& s : artifact.manifest->shards)
      shard_number.emplace(s.file, shard_number.size() + 1);
  }
  line(fmt::format("\ntensors: {}", rows.size()));
  if (!rows.empty()) {
    line(fmt::format("  {:<{}}  {:<8} {:<14} {:>11}  {:<12}  {}", "key", width, "dtype", "shape",
                     "bytes", "sha256", "flags"));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    std::vector<std::string> flags;
    if (!r.shard.empty()) {
      flags.push_back(fmt::format("shard {}", shard_number[std::string(r.shard)]));
    }
    if (r.is_mutable) flags.emplace_back("state");
    if (!r.alias_of.empty()) flags.emplace_back("alias");
    if (!r.referenced) flags.emplace_back("unreferenced");
    line(fmt::format("  {:<{}}  {:<8} {:<14} {:>11}  {:<12}  {}", shorten(*r.key, width), width,
                     dtype_name(r.data->dtype), shorten(shape_text(r.data->shape), 14),
                     r.data->bytes.size, sha256_of(i).substr(0, 12), fmt::join(flags, ", ")));
  }
  if (!artifact.aliases.empty()) {
    line(fmt::format("\naliases: {} (bytes stored under the owner)", artifact.aliases.size()));
    for (const auto& [alias, owner] : artifact.aliases)
      line(fmt::format("  {} -> {}", alias, owner));
  }
  if (artifact.program) {
    line(fmt::format("\nstate keys: {}", state.size()));
    for (const auto& k : state)
      line(fmt::format("  {}{}", k, artifact.data.count(k) ? "" : "  (no data: zero-initialised)"));
  }
  if (artifact.manifest) {
    const auto& m = *artifact.manifest;
    line(fmt::format("\nshards: {} ({}, cap {})", m.shards.size(), m.shard_format,
                     m.max_shard_bytes ? fmt::format("{} {} mode", *m.max_shard_bytes, m.cap_mode)
                                       : std::string("none")));
    for (const auto& s : m.shards) {
      uint64_t measured = m.cap_mode == "file" ? s.size : s.payload_bytes;
      line(fmt::format("  #{:<3} {:<36} {:>12} bytes  payload {:>12}  fill {:>6}  {} keys",
                       shard_number[s.file], s.file, s.size, s.payload_bytes,
                       m.max_shard_bytes ? percent(measured, *m.max_shard_bytes) : std::string("-"),
                       s.keys.size()));
    }
  }
  line(fmt::format("\nbytes: {} referenced, {} stored, {} saved by dedup ({} aliases)",
                   human_bytes(referenced_bytes), human_bytes(stored_bytes), human_bytes(saved),
                   artifact.aliases.size()));
  if (unreferenced_keys > 0) {
    line(fmt::format("unreferenced: {} keys, {} (pack drops them)", unreferenced_keys,
                     human_bytes(unreferenced_bytes)));
  }
  out.flush();
}

}  // namespace ptepack
