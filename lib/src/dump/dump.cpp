// Dump: collect methods, keys, state, shards and dedup figures, then render text or JSON.
#include "ptepack/dump/dump.h"

#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <functional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "json/json_writer.h"
#include "ptepack/json/json_util.h"

#include "pte/dump_pte.h"
#include "dump/graph_dot.h"
#include "graph/graph_text.h"
#include "dump/text_wrap.h"
#include "ptepack/base/error.h"
#include "ptepack/base/format_util.h"
#include "ptepack/base/ordered_cursor.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/hash/parallel_hash.h"
#include "ptepack/io/progress.h"
#include "ptepack/graph/program_keys.h"
#include "ptepack/graph/validate.h"

namespace ptepack {
namespace {

using ordered = nlohmann::json;

// One key of the artifact; names point into the artifact and its manifest (a row is a few
// words, so a million keys cost tens of MB, not hundreds).
struct KeyRow {
  const std::string* key = nullptr;
  const TensorData* data = nullptr;
  const Digest* manifest_sha256 = nullptr;  // else the digest computed at the same index
  std::string_view shard;
  std::string_view alias_of;
  bool is_mutable = false;
  bool referenced = true;
};

// Output in chunks: a dump is written as it is rendered, never held whole. With
// a width, every line longer than it is wrapped (text_wrap.h).
class Sink {
 public:
  Sink(const TextOut& out, size_t width) : out_(out), width_(width) {}
  void add(std::string_view text) {
    if (width_ == 0) {
      buffer_ += text;
    } else {
      pending_ += text;
      size_t start = 0;
      for (size_t end = pending_.find('\n'); end != std::string::npos;
           end = pending_.find('\n', start)) {
        buffer_ += detail::wrap_line(std::string_view(pending_).substr(start, end - start), width_);
        start = end + 1;
      }
      pending_.erase(0, start);
    }
    if (buffer_.size() >= kChunk) emit();
  }
  void flush() {
    if (!pending_.empty()) buffer_ += detail::wrap_line(pending_, width_);
    pending_.clear();
    emit();
  }

 private:
  void emit() {
    if (!buffer_.empty()) out_(buffer_);
    buffer_.clear();
  }

  static constexpr size_t kChunk = 1 << 20;
  const TextOut& out_;
  size_t width_;
  std::string buffer_;
  std::string pending_;  // the start of a line not yet complete
};

std::string shape_text(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Hashing this many bytes draws progress on a terminal.
constexpr uint64_t kProgressBytes = 256ULL << 20;

std::string file_of(const KeyRow& r) {
  return r.data->bytes.file ? r.data->bytes.file->name() : std::string();
}

using detail::columns_of;

// `natural` order: runs of digits compare as numbers (layers.2 before layers.10).
bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0;
  size_t j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ei = i;
      size_t ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      auto x = a.substr(i, ei - i);
      auto y = b.substr(j, ej - j);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;
}

// The rows --key, --method and --shard keep, in --sort order.
std::vector<KeyRow> select_rows(std::vector<KeyRow> rows, const DumpOptions& o,
                                const ProgramKeys& keys, bool has_program) {
  std::string method_prefix = o.method + "/";
  std::erase_if(rows, [&](const KeyRow& r) {
    const std::string& key = *r.key;
    if (!o.keys.empty() && std::none_of(o.keys.begin(), o.keys.end(), [&](const std::string& g) {
          return ::fnmatch(g.c_str(), key.c_str(), 0) == 0;
        })) {
      return true;
    }
    if (!o.method.empty()) {
      if (has_program) {
        const auto* use = keys.find(key);
        if (use == nullptr || !keys.referenced_by(*use, o.method)) return true;
      } else if (!key.starts_with(method_prefix)) {
        return true;
      }
    }
    return !o.shard.empty() && r.shard != o.shard;
  });
  if (o.sort == DumpSort::size) {
    std::stable_sort(rows.begin(), rows.end(), [](const KeyRow& a, const KeyRow& b) {
      return a.data->bytes.size > b.data->bytes.size;
    });
  } else if (o.sort == DumpSort::natural) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const KeyRow& a, const KeyRow& b) { return natural_less(*a.key, *b.key); });
  }
  return rows;
}

struct Tally {
  size_t keys = 0;
  uint64_t bytes = 0;
};

struct Breakdown {
  std::map<std::string, Tally> by_method;
  std::map<std::string, Tally> by_dtype;
  std::map<std::string, Tally> by_shard;
  std::vector<const KeyRow*> largest;
};

// Counts and bytes of the shown rows per method, dtype and shard, and the `top` largest.
Breakdown breakdown_of(const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top) {
  Breakdown b;
  auto count = [](Tally& t, uint64_t bytes) {
    ++t.keys;
    t.bytes += bytes;
  };
  for (const auto& r : rows) {
    uint64_t bytes = r.data->bytes.size;
    count(b.by_dtype[std::string(dtype_name(r.data->dtype))], bytes);
    if (const auto* use = keys.find(*r.key); use != nullptr) {
      for (const auto m : keys.methods(*use)) count(b.by_method[std::string(m)], bytes);
    }
    if (!r.shard.empty()) count(b.by_shard[std::string(r.shard)], bytes);
    b.largest.push_back(&r);
  }
  auto larger = [](const KeyRow* x, const KeyRow* y) {
    if (x->data->bytes.size != y->data->bytes.size)
      return x->data->bytes.size > y->data->bytes.size;
    return *x->key < *y->key;
  };
  size_t n = std::min(top, b.largest.size());
  std::partial_sort(b.largest.begin(), b.largest.begin() + static_cast<ptrdiff_t>(n),
                    b.largest.end(), larger);
  b.largest.resize(n);
  return b;
}

ordered breakdown_json(const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top) {
  auto b = breakdown_of(rows, keys, top);
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

std::string breakdown_text(const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top) {
  auto b = breakdown_of(rows, keys, top);
  std::string out = text_line(fmt::format("\nsummary of {} tensors", rows.size()));
  auto section = [&out](std::string_view title, const std::map<std::string, Tally>& map) {
    if (map.empty()) return;
    size_t width = 8;
    for (const auto& entry : map) width = std::max(width, columns_of(escaped(entry.first)));
    out += text_line(fmt::format("  by {}:", title));
    for (const auto& [name, t] : map) {
      out += text_line(
          fmt::format("    {:<{}}  {:>8} keys  {:>12}", name, width, t.keys, human_bytes(t.bytes)));
    }
  };
  section("method", b.by_method);
  section("dtype", b.by_dtype);
  section("shard", b.by_shard);
  if (!b.largest.empty()) out += text_line(fmt::format("  largest {}:", b.largest.size()));
  for (const auto* r : b.largest) {
    out += text_line(fmt::format("    {:>12}  {}  {} {}", human_bytes(r->data->bytes.size), *r->key,
                                 dtype_name(r->data->dtype), shape_text(r->data->shape)));
  }
  return out;
}

// key, dtype, shape, bytes, sha256, offset, flags; already escaped.
using Cells = std::array<std::string, 7>;

// Columns each of the first six cells of a row takes, computed without building them.
using CellWidths = std::array<size_t, 6>;

// The tensor table, two passes over the rows (widths, then lines) so nothing is held per row.
// Every cell is always whole. When a row does not fit `width` (0: no limit), each row
// takes two lines: its key, then its other cells aligned below (the sink wraps what is
// still too wide at the end of a cell, never inside one).
void render_table(Sink& out, size_t count, const std::function<CellWidths(size_t)>& widths_of,
                  const std::function<Cells(size_t)>& cells_of, size_t width, bool offsets) {
  const Cells header{"key", "dtype", "shape", "bytes", "sha256", "offset", "flags"};
  std::array<size_t, 7> widths{};
  for (size_t c = 0; c < 7; ++c) widths[c] = columns_of(header[c]);
  for (size_t i = 0; i < count; ++i) {
    auto row = widths_of(i);
    for (size_t c = 0; c < 6; ++c) widths[c] = std::max(widths[c], row[c]);
  }
  if (!offsets) widths[5] = 0;
  size_t total = 2 + 12;  // the indent, and room for short flags
  for (size_t c = 0; c < 6; ++c) total += widths[c] == 0 ? 0 : widths[c] + 2;
  const bool stacked = width > 0 && total > width;
  auto render = [&](const Cells& cells) {
    std::string text = "  ";
    if (stacked) {
      text += cells[0] + "\n      ";
    }
    for (size_t c = stacked ? 1 : 0; c < 6; ++c) {
      if (widths[c] == 0) continue;
      size_t pad = widths[c] - columns_of(cells[c]);
      text += c == 3 ? std::string(pad, ' ') + cells[c] : cells[c] + std::string(pad, ' ');
      text += "  ";
    }
    text += cells[6];
    while (!text.empty() && text.back() == ' ') text.pop_back();
    text += '\n';
    out.add(text);
  };
  if (count > 0) render(header);
  for (size_t i = 0; i < count; ++i) render(cells_of(i));
}

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

}  // namespace

std::string dump_artifact(const std::filesystem::path& path, const DumpOptions& options) {
  std::string text;
  dump_artifact(path, options, [&text](std::string_view chunk) { text += chunk; });
  return text;
}

void dump_artifact(const std::filesystem::path& path, const DumpOptions& options,
                   const TextOut& write) {
  Sink out(write, options.json ? 0 : options.width);
  auto artifact = load_artifact(path, options.data);
  if (options.graph_dot) {
    if (!artifact.program && artifact.pte_programs.empty()) {
      fail(ErrorCode::usage, "{}: a {} holds no program to draw (--graph=dot)", artifact.name,
           artifact_kind_name(artifact.kind));
    }
    write(graph_dot(artifact));
    return;
  }
  ProgramKeys keys;
  if (artifact.program) keys = ProgramKeys(artifact.program.root());
  const auto mutated_keys = keys.mutated();

  // One row per key with data, plus referenced keys that have none (state buffers).
  // Every table here is ordered by key, and the rows come in key order.
  std::vector<KeyRow> rows;
  rows.reserve(artifact.data.size());
  OrderedCursor mutated(mutated_keys);
  auto use = keys.uses().begin();
  auto referenced = [&](const std::string& key) {
    while (use != keys.uses().end() && use->key < key) ++use;
    return use != keys.uses().end() && use->key == key;
  };
  OrderedCursor aliases(artifact.aliases);
  const std::map<std::string, ManifestTensor> no_manifest;
  OrderedCursor listed(artifact.manifest ? artifact.manifest->tensors : no_manifest);
  for (const auto& [key, data] : artifact.data) {
    KeyRow row{
        &key, &data, nullptr, {}, {}, mutated.contains(key), !artifact.program || referenced(key)};
    if (auto it = aliases.find(key); it != aliases.end()) row.alias_of = it->second;
    if (auto t = listed.find(key); t != listed.end()) {
      row.manifest_sha256 = &t->second.sha256;
      row.shard = t->second.shard;
      row.is_mutable = row.is_mutable || t->second.is_mutable;
    }
    rows.push_back(row);
  }
  const auto& state = mutated_keys;  // sorted, each once

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
  if (!options.method.empty() && artifact.program) {
    std::vector<std::string_view> names;
    for (const auto& m : access::methods(artifact.program.root())) names.push_back(access::name(m));
    if (std::find(names.begin(), names.end(), options.method) == names.end()) {
      fail(ErrorCode::usage, "{}: no method {} (methods: {})", artifact.name, quote(options.method),
           fmt::join(names, ", "));
    }
  }
  if (!options.shard.empty()) {
    if (!artifact.manifest) {
      fail(ErrorCode::usage, "{}: --shard needs a packed directory (one with manifest.json)",
           artifact.name);
    }
    const auto& shards = artifact.manifest->shards;
    if (std::none_of(shards.begin(), shards.end(),
                     [&](const auto& shard) { return shard.file == options.shard; })) {
      fail(ErrorCode::usage, "{}: no shard {}", artifact.name, quote(options.shard));
    }
  }
  const size_t total_keys = rows.size();
  rows = select_rows(std::move(rows), options, keys, static_cast<bool>(artifact.program));

  // Digests of the rows shown (a manifest already lists them; --no-hash skips them).
  std::vector<Digest> digests;
  if (!artifact.manifest && !options.no_hash) {
    std::vector<ByteRange> ranges;
    ranges.reserve(rows.size());
    uint64_t total = 0;
    for (const auto& r : rows) {
      ranges.push_back(r.data->bytes);
      total += r.data->bytes.size;
    }
    Progress progress;
    progress.set_hash_total(total);
    progress.start(total >= kProgressBytes ? options.progress : ProgressMode::never);
    digests = hash_ranges(ranges, options.jobs, &progress);
    progress.stop();
  }
  // A key the manifest does not list (a corrupt directory), or --no-hash: no digest to show.
  auto sha256_of = [&](size_t i) {
    if (rows[i].manifest_sha256 != nullptr) return to_hex(*rows[i].manifest_sha256);
    return i < digests.size() ? to_hex(digests[i]) : std::string();
  };

  ProgramDump programs;
  if (!artifact.pte_programs.empty()) {
    programs = dump_programs({artifact.pte_programs, artifact.data,
                              artifact.manifest ? &*artifact.manifest : nullptr},
                             options.graph, options.jobs);
  }

  if (options.json) {
    // The document's fields in json_text's order (bytewise by name), streamed:
    // the program's methods and the tensors can run to millions of entries.
    // The small parts are DOMs laid out in place.
    JsonWriter w;
    w.begin_object();
    w.field("artifact", artifact.name);
    if (options.summary) {
      w.key("breakdown");
      w.dom(breakdown_json(rows, keys, options.top));
    }
    const auto* manifest = artifact.manifest ? &*artifact.manifest : nullptr;
    if (manifest) w.field("cap_mode", manifest->cap_mode);
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
    w.key("program");
    if (artifact.program) {
      w.begin_object();
      w.key("methods");
      w.begin_array();
      for (const auto& m : access::methods(artifact.program.root()))
        write_method(w, m, options.graph, out);
      w.end_array();
      w.field("version", access::version(artifact.program.root()));
      w.end_object();
    } else {
      w.null();
    }
    if (!artifact.pte_programs.empty()) {
      w.key("programs");
      w.dom(programs.json);
    }
    if (manifest) w.field("shard_format", manifest->shard_format);
    w.key("shards");
    w.begin_array();
    if (manifest) {
      for (const auto& s : manifest->shards) {
        w.begin_object();
        w.field("file", s.file);
        w.key("fill");
        w.dom(manifest->max_shard_bytes
                  ? ordered(static_cast<double>(manifest->cap_mode == "file" ? s.size
                                                                             : s.payload_bytes) /
                            static_cast<double>(*manifest->max_shard_bytes))
                  : ordered(nullptr));
        w.field("key_count", s.keys.size());
        w.field("payload_bytes", s.payload_bytes);
        w.field("size", s.size);
        w.end_object();
      }
    }
    w.end_array();
    w.key("state");
    w.strings(state);
    w.key("summary");
    w.begin_object();
    w.field("alias_count", artifact.aliases.size());
    w.field("dedup_saved_bytes", saved);
    w.field("key_count", total_keys);
    w.field("referenced_bytes", referenced_bytes);
    w.field("stored_bytes", stored_bytes);
    w.field("unreferenced_bytes", unreferenced_bytes);
    w.field("unreferenced_keys", unreferenced_keys);
    w.end_object();
    w.field("version", kDumpVersion);
    if (options.no_tensors) {
      w.end_object();
      out.add(std::move(w).finish());
      out.flush();
      return;
    }
    // "tensors" comes last, after "version", each entry formatted in place.
    out.add(w.take());
    out.add(rows.empty() ? ",\n  \"tensors\": {}" : ",\n  \"tensors\": {");
    // Each entry as json_text would print it inside the document (fields in name order,
    // indented two levels), formatted directly: a million keys, not a million DOMs.
    auto add_string = [](std::string& to, std::string_view text) {
      if (is_utf8(text)) {
        append_json_string(to, text);
      } else {
        to += ordered(text).dump();  // nlohmann's own error, as json_text gives it
      }
    };
    std::string entry;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
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
      auto digest = sha256_of(i);
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
    const auto methods = access::methods(artifact.program.root());
    line(fmt::format("\nmethods: {}", methods.size()));
    for (const auto& m : methods) {
      const nb::Graph& g = access::graph(m);
      auto counts = count_nodes(g);
      line(fmt::format("  {}  ({} nodes, {} subgraphs, {} constants, {} mutable buffers)",
                       access::name(m), counts.nodes, counts.subgraphs, access::constants(m).size(),
                       access::mutable_buffers(m).size()));
      const MetaIndex metas(g);
      for (const std::string_view name : access::inputs(g)) {
        const auto* meta = metas.find(name);
        line(fmt::format("    input   {} {}", name, meta ? describe_meta(*meta) : ""));
      }
      std::map<std::string_view, const nb::OutputSpec*> specs;  // the last one of a name
      for (const auto& s : access::output_specs(m)) specs[access::name(s)] = &s;
      for (const std::string_view name : access::outputs(g)) {
        const auto* meta = metas.find(name);
        std::string kind;
        if (auto it = specs.find(name); it != specs.end()) {
          const auto& s = *it->second;
          kind = access::target(s).empty()
                     ? std::string(nb::EnumNameOutputKind(s.kind()))
                     : fmt::format("{} -> {}", nb::EnumNameOutputKind(s.kind()), access::target(s));
        }
        line(fmt::format("    output  {} {} {}", name, meta ? describe_meta(*meta) : "", kind));
      }
      for (const auto& c : access::constants(m)) {
        line(fmt::format("    binds   {} <- {}{}", access::name(c), access::data_key(c),
                         c.mutated() ? " (mutated)" : ""));
      }
      for (const auto& b : access::mutable_buffers(m))
        line(fmt::format("    buffer  {} <- {}", access::name(b), access::fqn(b)));
      if (options.graph) out.add(graph_text(g, 6));
    }
  }
  std::map<std::string, size_t, std::less<>> shard_number;
  if (artifact.manifest) {
    for (const auto& s : artifact.manifest->shards)
      shard_number.emplace(s.file, shard_number.size() + 1);
  }
  if (options.summary) out.add(breakdown_text(rows, keys, options.top));
  if (!options.no_tensors && !options.summary) {
    line(rows.size() == total_keys ? fmt::format("\ntensors: {}", rows.size())
                                   : fmt::format("\ntensors: {} of {}", rows.size(), total_keys));
    auto cells_of = [&](size_t i) {
      const auto& r = rows[i];
      std::vector<std::string> flags;
      if (!r.shard.empty())
        flags.push_back(fmt::format("shard {}", shard_number.find(r.shard)->second));
      if (r.is_mutable) flags.emplace_back("state");
      if (!r.alias_of.empty()) flags.emplace_back("alias");
      if (!r.referenced) flags.emplace_back("unreferenced");
      auto digest = sha256_of(i);
      return Cells{escaped(*r.key),
                   std::string(dtype_name(r.data->dtype)),
                   shape_text(r.data->shape),
                   std::to_string(r.data->bytes.size),
                   digest.empty() ? "-" : digest.substr(0, 12),
                   options.offsets ? fmt::format("{}:{}", escaped(file_of(r)), r.data->bytes.offset)
                                   : std::string(),
                   fmt::format("{}", fmt::join(flags, ", "))};
    };
    auto digits = [](uint64_t value) {
      size_t n = 1;
      while (value >= 10) {
        value /= 10;
        ++n;
      }
      return n;
    };
    auto widths_of = [&](size_t i) {
      const auto& r = rows[i];
      const auto& key = *r.key;
      bool plain = std::all_of(key.begin(), key.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u >= 0x20 && u != 0x7f && c != '\\';
      });
      size_t shape = r.data->shape.empty() ? 2 : 2 * r.data->shape.size();
      for (auto dim : r.data->shape) shape += digits(static_cast<uint64_t>(dim));
      bool digest = r.manifest_sha256 != nullptr || i < digests.size();
      return CellWidths{
          plain ? columns_of(key) : columns_of(escaped(key)),
          dtype_name(r.data->dtype).size(),
          shape,
          digits(r.data->bytes.size),
          digest ? size_t{12} : size_t{1},
          options.offsets ? columns_of(escaped(file_of(r))) + 1 + digits(r.data->bytes.offset) : 0};
    };
    render_table(out, rows.size(), widths_of, cells_of, options.width, options.offsets);
  }
  if (!artifact.aliases.empty()) {
    line(fmt::format("\naliases: {} (bytes stored under the owner)", artifact.aliases.size()));
    for (const auto& [alias, owner] : artifact.aliases)
      line(fmt::format("  {} -> {}", alias, owner));
  }
  if (artifact.program) {
    line(fmt::format("\nstate keys: {}", state.size()));
    for (const auto& k : state)
      line(fmt::format("  {}{}", k,
                       artifact.data.count(std::string(k)) ? "" : "  (no data: zero-initialised)"));
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
