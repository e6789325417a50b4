// manifest.json writer: field by field in json_text's layout, keys in sorted
// order (as the std::map of a DOM would hold them): a 100,000-tensor manifest
// needs no DOM.
#include "ptepack/containers/manifest.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "containers/shard_fields.h"
#include "json/json_util.h"
#include "json/json_writer.h"

namespace ptepack {
namespace {

using Sink = std::function<void(std::string_view)>;
constexpr size_t kPiece = size_t{1} << 20;

// Hands the text so far to `sink` (when streaming) once a piece is full.
void drain(JsonWriter& w, const Sink* sink) {
  if (sink != nullptr && w.pending() >= kPiece) w.drain(*sink);
}

void write_programs(JsonWriter& w, const Manifest& m) {
  if (m.version != kManifestProgramsVersion) {
    w.key("program");
    w.begin_object();
    w.field("file", m.program.file);
    w.field("sha256", m.program.sha256);
    w.field("size", m.program.size);
    w.end_object();
    return;
  }
  w.key("programs");
  w.begin_array();
  for (const auto& p : m.programs) {
    w.begin_object();
    w.field("file", p.file);
    w.key("methods");
    w.strings(p.methods);
    w.key("named_data");
    w.strings(p.named_data);
    w.field("sha256", p.sha256);
    w.key("shards");
    w.strings(p.shards);
    w.field("size", p.size);
    w.end_object();
  }
  w.end_array();
}

void write_shards(JsonWriter& w, const Manifest& m, const Sink* sink) {
  w.key("shards");
  w.begin_array();
  for (const auto& s : m.shards) {
    w.begin_object();
    w.field("file", s.file);
    w.key("keys");
    w.strings(s.keys);
    w.field("payload_bytes", s.payload_bytes);
    if (!s.programs.empty()) {
      w.key("programs");
      w.strings(s.programs);
    }
    w.field("sha256", s.sha256);
    w.field("size", s.size);
    if (!s.stale.empty()) {
      w.key("stale");
      w.strings(s.stale);
    }
    w.end_object();
    drain(w, sink);
  }
  w.end_array();
}

void write_tensor(JsonWriter& w, const std::string& key, const ManifestTensor& t,
                  const Sink* sink) {
  w.key(key);
  w.begin_object();
  if (t.alias_of) w.field("alias_of", *t.alias_of);
  if (!t.dim_order.empty()) {
    w.key("dim_order");
    w.numbers(t.dim_order);
  }
  w.field("dtype", dtype_name(t.dtype));
  w.field("mutable", t.is_mutable);
  w.field("nbytes", t.nbytes);
  if (t.opaque) w.field("opaque", true);
  w.field("sha256", to_hex(t.sha256));
  w.key("shape");
  w.numbers(t.shape);
  w.field("shard", t.shard);
  w.end_object();
  drain(w, sink);
}

void write_tensors(JsonWriter& w, const Manifest& m, const Sink* sink,
                   const ManifestTensorSource* tensors) {
  w.key("tensors");
  w.begin_object();
  if (tensors != nullptr) {
    (*tensors)(
        [&](const std::string& key, const ManifestTensor& t) { write_tensor(w, key, t, sink); });
  } else {
    for (const auto& [key, t] : m.tensors) write_tensor(w, key, t, sink);
  }
  w.end_object();
}

// Every field in key order (the schema's), the shard options' (shard_fields()) among the
// others; with a sink, the text handed over piece by piece.
void render(JsonWriter& w, const Manifest& m, const Sink* sink,
            const ManifestTensorSource* tensors = nullptr) {
  std::vector<std::pair<std::string_view, std::function<void()>>> fields{
      {"base_manifest_sha256",
       [&] {
         if (m.base_manifest_sha256) w.field("base_manifest_sha256", *m.base_manifest_sha256);
       }},
      {"format", [&] { w.field("format", kManifestFormat); }},
      {"metadata",
       [&] {
         w.key("metadata");
         w.begin_object();
         w.field("total_size", m.total_size);
         w.end_object();
       }},
      {"programs", [&] { write_programs(w, m); }},
      {"release",
       [&] {
         if (m.release) w.field("release", *m.release);
       }},
      {"shards", [&] { write_shards(w, m, sink); }},
      {"state",
       [&] {
         w.key("state");
         w.strings(m.state);
       }},
      {"tensors", [&] { write_tensors(w, m, sink, tensors); }},
      {"version", [&] { w.field("version", m.version); }},
  };
  for (const auto& option : shard_fields())
    fields.emplace_back(option.field, [&w, &m, &option] { option.write(w, m); });
  std::sort(fields.begin(), fields.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  w.begin_object();
  for (const auto& [name, write] : fields) write();
  w.key("weight_map");
  w.begin_object();
  for (const auto& [key, file] : weight_map_of(m)) {
    w.key(key);
    w.value(file);
    drain(w, sink);
  }
  w.end_object();
  w.end_object();
}

}  // namespace

std::string manifest_to_json(const Manifest& m) {
  JsonWriter w;
  render(w, m, nullptr);
  return std::move(w).finish();
}

void write_manifest_json(const Manifest& m, const Sink& sink, const ManifestTensorSource* tensors) {
  JsonWriter w;
  render(w, m, &sink, tensors);
  sink(std::move(w).finish());
}

}  // namespace ptepack
