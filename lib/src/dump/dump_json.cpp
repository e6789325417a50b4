// dump --json: the document streamed in json_text's field order.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dump/dump_internal.h"
#include "graph/graph_text.h"
#include "json/json_writer.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "graph/program_access.h"
#include "graph/validate.h"
#include "json/json_util.h"

namespace ptepack::detail {
namespace {

// A tensor's dtype and shape are separate fields (null without a meta); a
// dynamic dimension is {"max", "min"}, max null when unbounded. Fields sort
// between them, so each is written on its own.
void write_dtype(JsonWriter& w, const nb::TensorMeta* meta) {
  w.key("dtype");
  if (meta == nullptr) {
    w.null();
  } else {
    w.value(dtype_name(static_cast<DType>(meta->dtype())));
  }
}

void write_shape(JsonWriter& w, const nb::TensorMeta* meta) {
  w.key("shape");
  if (meta == nullptr) {
    w.null();
    return;
  }
  w.begin_array();
  for (const auto& dim : access::sizes(*meta)) {
    if (dim.min() == dim.max()) {
      w.value(dim.min());
      continue;
    }
    w.begin_object();
    w.key("max");
    if (dim.max() < 0) {
      w.null();
    } else {
      w.value(dim.max());
    }
    w.field("min", dim.min());
    w.end_object();
  }
  w.end_array();
}

// A graph's inputs or outputs: name, dtype and shape of each.
void write_values(JsonWriter& w, const nb::Graph& graph, const access::StringRange& names) {
  w.begin_array();
  const MetaIndex metas(graph);
  for (const std::string_view name : names) {
    const auto* meta = metas.find(name);
    w.begin_object();
    write_dtype(w, meta);
    w.field("name", name);
    write_shape(w, meta);
    w.end_object();
  }
  w.end_array();
}

// One method of dump --json, fields in json_text's order, streamed: a method
// can bind hundreds of thousands of constants. Text goes to `out` as it grows.
void write_method(JsonWriter& w, const nb::Method& m, bool graph, Sink& out) {
  constexpr size_t kDrain = 64 << 10;
  const nb::Graph& g = access::graph(m);
  w.begin_object();
  w.key("constants");
  w.begin_array();
  for (const auto& c : access::constants(m)) {
    w.begin_object();
    write_dtype(w, c.meta());
    w.field("key", access::data_key(c));
    w.field("kind", nb::EnumNameInputKind(c.kind()));
    w.field("mutated", c.mutated());
    w.field("name", access::name(c));
    w.field("quantized", access::quantized(*c.meta()));
    write_shape(w, c.meta());
    w.end_object();
    if (w.pending() >= kDrain) out.add(w.take());
  }
  w.end_array();
  if (graph) {
    w.key("graph");
    w.dom(graph_json(g));
  }
  w.key("inputs");
  write_values(w, g, access::inputs(g));
  w.key("mutable_buffers");
  w.begin_array();
  for (const auto& b : access::mutable_buffers(m)) {
    w.begin_object();
    w.field("key", access::fqn(b));
    w.field("name", access::name(b));
    w.end_object();
  }
  w.end_array();
  w.field("name", access::name(m));
  auto counts = count_nodes(g);
  w.field("nodes", counts.nodes);
  w.key("output_specs");
  w.begin_array();
  for (const auto& spec : access::output_specs(m)) {
    w.begin_object();
    w.field("kind", nb::EnumNameOutputKind(spec.kind()));
    w.field("name", access::name(spec));
    w.field("target", access::target(spec));
    w.end_object();
  }
  w.end_array();
  w.key("outputs");
  write_values(w, g, access::outputs(g));
  w.field("subgraphs", counts.subgraphs);
  w.end_object();
  out.add(w.take());
}

ordered breakdown_json(const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top,
                          const DumpContext& context) {
  auto b = breakdown_of(rows, keys, top, context.key_methods);
  auto tallies = [](const std::map<std::string, Tally>& map) {
    ordered list = ordered::array();
    for (const auto& [name, t] : map)
      list.push_back({{"name", name}, {"keys", t.keys}, {"bytes", t.bytes}});
    return list;
  };
  ordered largest = ordered::array();
  for (const auto* r : b.largest) {
    largest.push_back({{"key", *r->key},
                       {"dtype", dtype_name(r->data->dtype)},
                       {"shape", r->data->shape},
                       {"nbytes", r->data->bytes.size}});
  }
  return {{"tensor_count", rows.size()},
          {"by_method", tallies(b.by_method)},
          {"by_dtype", tallies(b.by_dtype)},
          {"by_shard", tallies(b.by_shard)},
          {"largest", largest}};
}

// "program": the program's methods and version, null without one.
void write_program(JsonWriter& w, const DumpContext& context, Sink& out) {
  const auto& artifact = context.artifact;
  w.key("program");
  if (artifact.program) {
    w.begin_object();
    w.key("methods");
    w.begin_array();
    for (const auto& m : access::methods(artifact.program.root()))
      write_method(w, m, context.options.graph, out);
    w.end_array();
    w.field("version", access::version(artifact.program.root()));
    w.end_object();
  } else {
    w.null();
  }
}

// "shards": the manifest's shards, each with its fill of the cap; empty without one.
void write_shards(JsonWriter& w, const Manifest* manifest) {
  w.key("shards");
  w.begin_array();
  if (manifest) {
    for (const auto& s : manifest->shards) {
      w.begin_object();
      w.field("file", s.file);
      w.key("fill");
      w.dom(manifest->max_shard_bytes
                ? ordered(
                      static_cast<double>(cap_measure(manifest->cap_mode, s.size, s.payload_bytes)) /
                      static_cast<double>(*manifest->max_shard_bytes))
                : ordered(nullptr));
      w.field("key_count", s.keys.size());
      w.field("payload_bytes", s.payload_bytes);
      w.field("size", s.size);
      if (!s.stale.empty()) w.field("stale_key_count", s.stale.size());  // a --base release
      w.end_object();
    }
  }
  w.end_array();
}

void write_summary(JsonWriter& w, const DumpContext& context) {
  w.key("summary");
  w.begin_object();
  w.field("alias_count", context.artifact.aliases.size());
  w.field("dedup_saved_bytes", context.saved);
  w.field("key_count", context.total_keys);
  w.field("referenced_bytes", context.referenced_bytes);
  w.field("stored_bytes", context.stored_bytes);
  w.field("unreferenced_bytes", context.unreferenced_bytes);
  w.field("unreferenced_keys", context.unreferenced_keys);
  w.end_object();
}

void add_string(std::string& to, std::string_view text) {
  if (is_utf8(text)) {
    append_json_string(to, text);
  } else {
    to += ordered(text).dump();  // nlohmann's own error, as json_text gives it
  }
}

// Row `i`'s entry as json_text would print it inside the document (fields in name
// order, indented two levels), formatted directly: a million keys, not a million DOMs.
void format_tensor_entry(std::string& entry, const DumpContext& context, size_t i) {
  const auto& options = context.options;
  const auto& r = context.rows[i];
  auto to = std::back_inserter(entry);
  entry = i == 0 ? "\n    " : ",\n    ";
  add_string(entry, *r.key);
  entry += ": {";
  if (!r.alias_of.empty()) {
    entry += "\n      \"alias_of\": ";
    add_string(entry, r.alias_of);
    entry += ',';
  }
  fmt::format_to(to, "\n      \"dtype\": \"{}\",", dtype_name(r.data->dtype));
  if (options.offsets) {
    entry += "\n      \"file\": ";
    add_string(entry, file_of(r));
    entry += ',';
  }
  fmt::format_to(to, "\n      \"mutable\": {},\n      \"nbytes\": {},", r.is_mutable,
                 r.data->bytes.size);
  if (options.offsets) fmt::format_to(to, "\n      \"offset\": {},", r.data->bytes.offset);
  auto digest = context.sha256_of(i);
  fmt::format_to(to, "\n      \"referenced\": {},\n      \"sha256\": ", r.referenced);
  entry += digest.empty() ? "null" : "\"" + digest + "\"";
  entry += ",\n      \"shape\": ";
  if (r.data->shape.empty()) {
    entry += "[]";
  } else {
    fmt::format_to(to, "[\n        {}\n      ]", fmt::join(r.data->shape, ",\n        "));
  }
  if (!r.shard.empty()) {
    entry += ",\n      \"shard\": ";
    add_string(entry, r.shard);
  }
  entry += "\n    }";
}

// "tensors", last after "version", each entry formatted in place; closes the document.
void write_tensors(const DumpContext& context, Sink& out) {
  const auto& rows = context.rows;
  out.add(rows.empty() ? ",\n  \"tensors\": {}" : ",\n  \"tensors\": {");
  std::string entry;
  for (size_t i = 0; i < rows.size(); ++i) {
    format_tensor_entry(entry, context, i);
    out.add(entry);
  }
  out.add(rows.empty() ? "\n}\n" : "\n  }\n}\n");
}

}  // namespace

void render_json(const DumpContext& context, Sink& out) {
  const auto& artifact = context.artifact;
  const auto& options = context.options;
  // The document's fields in json_text's order (bytewise by name), streamed:
  // the program's methods and the tensors can run to millions of entries.
  // The small parts are DOMs laid out in place.
  JsonWriter w;
  w.begin_object();
  w.field("artifact", artifact.name);
  if (options.summary) {
    w.key("breakdown");
    w.dom(breakdown_json(context.rows, context.keys, options.top, context));
  }
  const auto* manifest = artifact.manifest ? &*artifact.manifest : nullptr;
  if (manifest) w.field("cap_mode", cap_mode_name(manifest->cap_mode));
  w.field("format", kDumpFormat);
  w.field("kind", artifact_kind_name(artifact.kind));
  if (manifest) {
    w.key("max_shard_bytes");
    if (manifest->max_shard_bytes) {
      w.value(*manifest->max_shard_bytes);
    } else {
      w.null();
    }
  }
  if (!artifact.notes.empty()) {  // how its data files were found, when not given
    w.key("notes");
    w.strings(artifact.notes);
  }
  write_program(w, context, out);
  if (!artifact.pte_programs.empty()) {
    w.key("programs");
    w.dom(context.programs.json);
  }
  if (manifest) w.field("shard_format", shard_format_name(manifest->shard_format));
  write_shards(w, manifest);
  w.key("state");
  w.strings(context.state);
  write_summary(w, context);
  w.field("version", kDumpVersion);
  if (options.no_tensors) {
    w.end_object();
    out.add(std::move(w).finish());
    out.flush();
    return;
  }
  out.add(w.take());
  write_tensors(context, out);
  out.flush();
}

}  // namespace ptepack::detail
