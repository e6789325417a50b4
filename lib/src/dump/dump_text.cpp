// dump's text: methods, the tensor table fitted to a width, aliases, state, shards, totals.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dump/dump_internal.h"
#include "graph/graph_text.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "graph/program_access.h"
#include "graph/validate.h"

namespace ptepack::detail {
namespace {

std::string breakdown_text(const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top,
                          const DumpContext& context) {
  auto b = breakdown_of(rows, keys, top, context.key_methods);
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

void add_line(Sink& out, const std::string& text) { out.add(text_line(text)); }

// Each shard's number in the manifest's order, from 1.
using ShardNumbers = std::map<std::string, size_t, std::less<>>;

// "methods": each method of the program with its inputs, outputs, bindings and buffers.
void methods_text(const DumpContext& context, Sink& out) {
  const auto methods = access::methods(context.artifact.program.root());
  add_line(out, fmt::format("\nmethods: {}", methods.size()));
  for (const auto& m : methods) {
    const nb::Graph& g = access::graph(m);
    auto counts = count_nodes(g);
    add_line(out, fmt::format("  {}  ({} nodes, {} subgraphs, {} constants, {} mutable buffers)",
                              access::name(m), counts.nodes, counts.subgraphs,
                              access::constants(m).size(), access::mutable_buffers(m).size()));
    const MetaIndex metas(g);
    for (const std::string_view name : access::inputs(g)) {
      const auto* meta = metas.find(name);
      add_line(out, fmt::format("    input   {} {}", name, meta ? describe_meta(*meta) : ""));
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
      add_line(out,
               fmt::format("    output  {} {} {}", name, meta ? describe_meta(*meta) : "", kind));
    }
    for (const auto& c : access::constants(m)) {
      add_line(out, fmt::format("    binds   {} <- {}{}", access::name(c), access::data_key(c),
                                c.mutated() ? " (mutated)" : ""));
    }
    for (const auto& b : access::mutable_buffers(m))
      add_line(out, fmt::format("    buffer  {} <- {}", access::name(b), access::fqn(b)));
    if (context.options.graph) out.add(graph_text(g, 6));
  }
}

size_t digits(uint64_t value) {
  size_t n = 1;
  while (value >= 10) {
    value /= 10;
    ++n;
  }
  return n;
}

// Row `i`'s cells of the tensor table.
Cells row_cells(const DumpContext& context, const ShardNumbers& shard_number, size_t i) {
  const auto& r = context.rows[i];
  std::vector<std::string> flags;
  if (!r.shard.empty())
    flags.push_back(fmt::format("shard {}", shard_number.find(r.shard)->second));
  if (r.is_mutable) flags.emplace_back("state");
  if (!r.alias_of.empty()) flags.emplace_back("alias");
  if (!r.referenced) flags.emplace_back("unreferenced");
  auto digest = context.sha256_of(i);
  return Cells{escaped(*r.key),
               std::string(dtype_name(r.data->dtype)),
               shape_text(r.data->shape),
               std::to_string(r.data->bytes.size),
               digest.empty() ? "-" : digest.substr(0, 12),
               context.options.offsets
                   ? fmt::format("{}:{}", escaped(file_of(r)), r.data->bytes.offset)
                   : std::string(),
               fmt::format("{}", fmt::join(flags, ", "))};
}

// The columns of row_cells(i), without building them.
CellWidths row_widths(const DumpContext& context, size_t i) {
  const auto& r = context.rows[i];
  const auto& key = *r.key;
  bool plain = std::all_of(key.begin(), key.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u != 0x7f && c != '\\';
  });
  size_t shape = r.data->shape.empty() ? 2 : 2 * r.data->shape.size();
  for (auto dim : r.data->shape) shape += digits(static_cast<uint64_t>(dim));
  bool digest = r.manifest_sha256 != nullptr || i < context.digests.size();
  return CellWidths{plain ? columns_of(key) : columns_of(escaped(key)),
                    dtype_name(r.data->dtype).size(),
                    shape,
                    digits(r.data->bytes.size),
                    digest ? size_t{12} : size_t{1},
                    context.options.offsets
                        ? columns_of(escaped(file_of(r))) + 1 + digits(r.data->bytes.offset)
                        : 0};
}

void tensors_text(const DumpContext& context, const ShardNumbers& shard_number, Sink& out) {
  const auto& rows = context.rows;
  const auto& options = context.options;
  add_line(out, rows.size() == context.total_keys
                    ? fmt::format("\ntensors: {}", rows.size())
                    : fmt::format("\ntensors: {} of {}", rows.size(), context.total_keys));
  render_table(
      out, rows.size(), [&](size_t i) { return row_widths(context, i); },
      [&](size_t i) { return row_cells(context, shard_number, i); }, options.width,
      options.offsets);
}

// "shards": each shard of the manifest with its sizes and fill of the cap.
void shards_text(const Manifest& m, ShardNumbers& shard_number, Sink& out) {
  add_line(out, fmt::format(
                    "\nshards: {} ({}, cap {})", m.shards.size(), shard_format_name(m.shard_format),
                    m.max_shard_bytes
                        ? fmt::format("{} {} mode", *m.max_shard_bytes, cap_mode_name(m.cap_mode))
                        : std::string("none")));
  for (const auto& s : m.shards) {
    uint64_t measured = cap_measure(m.cap_mode, s.size, s.payload_bytes);
    add_line(out, fmt::format(
                      "  #{:<3} {:<36} {:>12} bytes  payload {:>12}  fill {:>6}  {} keys{}",
                      shard_number[s.file], s.file, s.size, s.payload_bytes,
                      m.max_shard_bytes ? percent(measured, *m.max_shard_bytes) : std::string("-"),
                      s.keys.size(),
                      s.stale.empty() ? std::string()
                                      : fmt::format(" (+{} stale, kept from the base release)",
                                                    s.stale.size())));
  }
}

}  // namespace

void render_text(const DumpContext& context, Sink& out) {
  const auto& artifact = context.artifact;
  const auto& options = context.options;
  add_line(out, fmt::format("{} ({})", artifact.name, artifact_kind_name(artifact.kind)));
  for (const auto& note : artifact.notes) add_line(out, "  " + note);
  out.add(context.programs.text);
  if (artifact.program) methods_text(context, out);
  ShardNumbers shard_number;
  if (artifact.manifest) {
    for (const auto& s : artifact.manifest->shards)
      shard_number.emplace(s.file, shard_number.size() + 1);
  }
  if (options.summary) out.add(breakdown_text(context.rows, context.keys, options.top, context));
  if (!options.no_tensors && !options.summary) tensors_text(context, shard_number, out);
  if (!artifact.aliases.empty()) {
    add_line(out,
             fmt::format("\naliases: {} (bytes stored under the owner)", artifact.aliases.size()));
    for (const auto& [alias, owner] : artifact.aliases)
      add_line(out, fmt::format("  {} -> {}", alias, owner));
  }
  if (artifact.program) {
    add_line(out, fmt::format("\nstate keys: {}", context.state.size()));
    for (const auto& k : context.state)
      add_line(
          out,
          fmt::format("  {}{}", k,
                      artifact.data.count(std::string(k)) ? "" : "  (no data: zero-initialised)"));
  }
  if (artifact.manifest) shards_text(*artifact.manifest, shard_number, out);
  add_line(out,
           fmt::format("\nbytes: {} referenced, {} stored, {} saved by dedup ({} aliases)",
                       human_bytes(context.referenced_bytes), human_bytes(context.stored_bytes),
                       human_bytes(context.saved), artifact.aliases.size()));
  if (context.unreferenced_keys > 0) {
    add_line(out, fmt::format("unreferenced: {} keys, {} (pack drops them)",
                              context.unreferenced_keys, human_bytes(context.unreferenced_bytes)));
  }
  out.flush();
}

}  // namespace ptepack::detail
