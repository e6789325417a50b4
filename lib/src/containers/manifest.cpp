// manifest.json strict reader (the writer is manifest_writer.cpp).
#include "ptepack/containers/manifest.h"

#include <algorithm>

#include "containers/manifest_reader.h"
#include "containers/shard_fields.h"
#include "json/json_document.h"
#include "json/json_util.h"
#include "ptepack/base/error.h"

namespace ptepack {

bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name.front() != '.' &&
         name.find('/') == std::string_view::npos && name.find('\\') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::optional<uint64_t> manifest_version(std::string_view text) {
  try {
    const JsonDocument doc(text, "manifest");
    const JsonValue* version = doc.root().is_object() ? doc.root().find("version") : nullptr;
    if (version == nullptr || !version->is_number_unsigned()) return std::nullopt;
    return version->unsigned_value();
  } catch (const Error&) {
    return std::nullopt;  // not JSON: the front end that reads it says why
  }
}

std::string shard_prefix_problem(std::string_view prefix) {
  const bool ok =
      !prefix.empty() && prefix.size() <= 100 && prefix.front() != '.' &&
      prefix.find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
  return ok ? "" : "must be letters, digits, '.', '_' or '-' (not starting with '.', at most 100)";
}

std::string alignment_problem(uint64_t alignment) {
  if (alignment >= 16 && alignment <= Limits::max_alignment && (alignment & (alignment - 1)) == 0)
    return "";
  return fmt::format("must be a power of two from 16 to {}", Limits::max_alignment);
}

std::string_view shard_format_name(ShardFormat format) {
  return format == ShardFormat::ptd ? "ptd" : "safetensors";
}

std::string_view cap_mode_name(CapMode mode) { return mode == CapMode::file ? "file" : "payload"; }

namespace {

std::vector<std::string> string_list(ManifestReader& r, const JsonValue& obj, const char* name,
                                     const Where& where) {
  const auto& list = r.field(obj, name, where);
  if (!list.is_array()) r.bad(where + (std::string(".") + name), "expected an array");
  std::vector<std::string> out;
  out.reserve(list.array().size());
  for (const auto& k : list.array()) {
    if (!k.is_string()) r.bad(where + (std::string(".") + name), "expected strings");
    out.emplace_back(k.text());
  }
  return out;
}

// Version 1's one program, or version 2's list of programs.
void parse_programs(ManifestReader& r, const JsonValue& j, Manifest& m) {
  if (m.version == kManifestVersion) {
    const auto& program = r.field(j, "program", "");
    m.program.file = r.file_name(program, "file", "program");
    m.program.sha256 = r.digest(program, "sha256", "program");
    m.program.size = r.number(program, "size", "program");
    return;
  }
  const auto& programs = r.field(j, "programs", "");
  if (!programs.is_array() || programs.array().empty())
    r.bad("programs", "expected a non-empty array");
  for (size_t i = 0; i < programs.array().size(); ++i) {
    const auto& entry = programs.array()[i];
    auto where = fmt::format("programs[{}]", i);
    ManifestProgramEntry p;
    p.file = r.file_name(entry, "file", where);
    p.sha256 = r.digest(entry, "sha256", where);
    p.size = r.number(entry, "size", where);
    p.methods = string_list(r, entry, "methods", where);
    p.shards = string_list(r, entry, "shards", where);
    for (const auto& f : p.shards) {
      if (!is_plain_file_name(f)) r.bad(where + ".shards", "expected plain file names");
    }
    p.named_data = string_list(r, entry, "named_data", where);
    m.programs.push_back(std::move(p));
  }
}

// The release fields, and the shard options the directory was packed with (shard_fields()).
void parse_release_and_options(ManifestReader& r, const JsonValue& j, Manifest& m) {
  if (j.find("release") != nullptr) {
    m.release = r.number(j, "release", "");
    if (*m.release < 1 || *m.release > kMaxRelease) r.bad("release", "expected 1 to 2^53-1");
  }
  if (j.find("base_manifest_sha256") != nullptr) {
    m.base_manifest_sha256 = r.digest(j, "base_manifest_sha256", "");
  }
  for (const auto& option : shard_fields()) option.read(r, j, m);
}

void parse_shards(ManifestReader& r, const JsonValue& j, Manifest& m) {
  const auto& shards = r.field(j, "shards", "");
  if (!shards.is_array()) r.bad("shards", "expected an array");
  for (size_t i = 0; i < shards.array().size(); ++i) {
    const auto& entry = shards.array()[i];
    auto where = fmt::format("shards[{}]", i);
    ManifestShard s;
    s.file = r.file_name(entry, "file", where);
    s.sha256 = r.digest(entry, "sha256", where);
    s.size = r.number(entry, "size", where);
    s.payload_bytes = r.number(entry, "payload_bytes", where);
    s.keys = string_list(r, entry, "keys", where);
    if (entry.find("programs") != nullptr) {
      if (m.version != kManifestProgramsVersion) r.bad(where + ".programs", "only in version 2");
      s.programs = string_list(r, entry, "programs", where);
      if (s.programs.empty()) r.bad(where + ".programs", "empty (the field is left out instead)");
    }
    if (entry.find("stale") != nullptr) {
      s.stale = string_list(r, entry, "stale", where);
      if (s.stale.empty()) r.bad(where + ".stale", "empty (the field is left out instead)");
      if (!std::is_sorted(s.stale.begin(), s.stale.end()) ||
          std::adjacent_find(s.stale.begin(), s.stale.end()) != s.stale.end())
        r.bad(where + ".stale", "expected keys sorted and distinct");
    }
    m.shards.push_back(std::move(s));
  }
}

// One entry of "tensors"; dim_order and opaque are read in version 2 only.
ManifestTensor parse_tensor(ManifestReader& r, const JsonValue& t, const Where& where,
                            int version) {
  ManifestTensor mt;
  mt.shard = r.file_name(t, "shard", where);
  mt.sha256 = *digest_from_hex(r.digest(t, "sha256", where));  // checked hex
  mt.nbytes = r.number(t, "nbytes", where);
  auto dtype = dtype_from_name(r.string(t, "dtype", where));
  if (!dtype) r.bad(where + ".dtype", "unknown ScalarType name");
  mt.dtype = *dtype;
  const auto& shape = r.field(t, "shape", where);
  if (!shape.is_array() || shape.array().size() > Limits::max_rank)
    r.bad(where + ".shape", "expected an array of at most 32 dims");
  for (const auto& d : shape.array()) {
    if (!d.is_number_unsigned() || d.unsigned_value() > static_cast<uint64_t>(INT64_MAX)) {
      r.bad(where + ".shape", "expected non-negative integers");
    }
    mt.shape.push_back(static_cast<int64_t>(d.unsigned_value()));
  }
  const auto& mut = r.field(t, "mutable", where);
  if (!mut.is_boolean()) r.bad(where + ".mutable", "expected a boolean");
  mt.is_mutable = mut.boolean();
  if (t.find("alias_of") != nullptr) mt.alias_of = r.string(t, "alias_of", where);
  const auto* order = t.find("dim_order");
  if (version == kManifestProgramsVersion && order != nullptr) {
    if (!order->is_array() || order->array().size() != mt.shape.size())
      r.bad(where + ".dim_order", "expected one entry per dimension");
    for (const auto& d : order->array()) {
      if (!d.is_number_unsigned() || d.unsigned_value() >= mt.shape.size())
        r.bad(where + ".dim_order", "expected dimension indices");
      mt.dim_order.push_back(static_cast<uint8_t>(d.unsigned_value()));
    }
  }
  const auto* opaque = t.find("opaque");
  if (version == kManifestProgramsVersion && opaque != nullptr) {
    if (!opaque->is_boolean()) r.bad(where + ".opaque", "expected a boolean");
    mt.opaque = opaque->boolean();
  }
  return mt;
}

void parse_tensors(ManifestReader& r, const JsonValue& j, Manifest& m) {
  const auto& tensors = r.field(j, "tensors", "");
  if (!tensors.is_object()) r.bad("tensors", "expected an object");
  if (tensors.object().size() > Limits::max_keys) r.bad("tensors", "too many keys");
  for (const auto* member : sorted_members(tensors)) {
    const std::string key(member->key);
    const Where where("tensors", key);
    m.tensors.emplace_hint(m.tensors.end(), key,
                           parse_tensor(r, member->value, where, m.version));  // sorted keys
  }
}

// Derived data: the weight map must be what the shards' key lists give, entry for entry.
void check_weight_map(ManifestReader& r, const JsonValue& j, const Manifest& m) {
  const auto& weight_map = r.field(j, "weight_map", "");
  if (!weight_map.is_object()) r.bad("weight_map", "expected an object");
  const auto expected = weight_map_of(m);
  const auto members = sorted_members(weight_map);
  size_t e = 0;
  for (const auto* member : members) {
    const auto& file = member->value;
    const std::string_view key = member->key;
    // Formatted only for a message: a manifest can map millions of keys.
    auto where = [&](std::string_view k) { return fmt::format("weight_map[{}]", quote(k)); };
    if (!file.is_string() || !is_plain_file_name(file.text())) {
      r.bad(where(key), "expected a plain file name");
    }
    if (e < expected.size() && expected[e].first < key) {
      r.bad(where(expected[e].first), "missing (a shard lists the key)");
    }
    if (e == expected.size() || expected[e].first != key) {
      r.bad(where(key), "is not a key of any shard");
    }
    if (expected[e].second != file.text()) {
      r.bad(where(key), fmt::format("names {}, but the key's first shard is {}", quote(file.text()),
                                    quote(expected[e].second)));
    }
    ++e;
  }
  if (e < expected.size()) {
    r.bad(fmt::format("weight_map[{}]", quote(expected[e].first)),
          "missing (a shard lists the key)");
  }
}

}  // namespace

Manifest parse_manifest(std::string_view text, const std::string& context) {
  const JsonDocument doc(text, context);
  const JsonValue& j = doc.root();
  ManifestReader r(context);
  Manifest m;
  if (r.string(j, "format", "") != kManifestFormat)
    r.bad("format", "expected \"ptepack.manifest\"");
  const uint64_t version = r.number(j, "version", "");
  if (version != kManifestVersion && version != kManifestProgramsVersion)
    r.bad("version", "unsupported version (expected 1 or 2)");
  m.version = static_cast<int>(version);
  parse_programs(r, j, m);
  parse_release_and_options(r, j, m);
  parse_shards(r, j, m);
  parse_tensors(r, j, m);
  const auto& state = r.field(j, "state", "");
  if (!state.is_array()) r.bad("state", "expected an array");
  for (const auto& k : state.array()) {
    if (!k.is_string()) r.bad("state", "expected strings");
    m.state.emplace_back(k.text());
  }
  m.total_size = r.number(r.field(j, "metadata", ""), "total_size", "metadata");
  check_weight_map(r, j, m);
  return m;
}

std::vector<ShardKey> sorted_shard_keys(const Manifest& m) {
  size_t count = 0;
  for (const auto& s : m.shards) count += s.keys.size();
  std::vector<ShardKey> keys;
  keys.reserve(count);
  for (size_t s = 0; s < m.shards.size(); ++s) {
    const auto& list = m.shards[s].keys;
    for (size_t i = 0; i < list.size(); ++i)
      keys.push_back({list[i], static_cast<uint32_t>(s), static_cast<uint32_t>(i)});
  }
  std::stable_sort(keys.begin(), keys.end(),
                   [](const ShardKey& a, const ShardKey& b) { return a.key < b.key; });
  return keys;
}

WeightMap weight_map_of(const Manifest& m) { return weight_map_of(m, sorted_shard_keys(m)); }

WeightMap weight_map_of(const Manifest& m, const std::vector<ShardKey>& sorted) {
  WeightMap map;
  for (const auto& k : sorted) {
    if (map.empty() || map.back().first != k.key) map.emplace_back(k.key, m.shards[k.shard].file);
  }
  return map;
}

std::string size_differs_line(const std::string& file, uint64_t size, uint64_t recorded) {
  return fmt::format("{}: size {} differs from the manifest's {}", file, size, recorded);
}

std::string digest_differs_line(const std::string& file) {
  return fmt::format("{}: SHA-256 differs from the manifest (file changed)", file);
}

namespace {

// The manifest's text, when `path` is a regular file of at most the manifest limit.
std::optional<std::string> manifest_text(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  auto file = InputFile::open(path);
  if (file->size() > Limits::max_manifest_bytes) return std::nullopt;
  auto raw = file->read_range(0, file->size());
  return std::string(raw.begin(), raw.end());
}

}  // namespace

std::optional<uint64_t> manifest_version_of(const std::filesystem::path& path) {
  const auto text = manifest_text(path);
  return text ? manifest_version(*text) : std::nullopt;
}

std::optional<uint64_t> ptepack_manifest_version_of(const std::filesystem::path& path) {
  const auto text = manifest_text(path);
  if (!text) return std::nullopt;
  try {
    const JsonDocument doc(*text, "manifest");
    const JsonValue* format = doc.root().is_object() ? doc.root().find("format") : nullptr;
    if (format == nullptr || !format->is_string() || format->text() != kManifestFormat)
      return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  return manifest_version(*text);
}

Manifest read_manifest_file(const InputFile& file, const std::string& context) {
  if (file.size() > Limits::max_manifest_bytes) {
    fail_input("{}: manifest of {} bytes exceeds the limit of {} bytes", context, file.size(),
               Limits::max_manifest_bytes);
  }
  auto raw = file.read_range(0, file.size());
  return parse_manifest(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()),
                        context);
}

}  // namespace ptepack
