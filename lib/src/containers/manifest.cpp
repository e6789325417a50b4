// manifest.json writer and strict reader.
#include "ptepack/containers/manifest.h"

#include <algorithm>

#include "json/json_document.h"
#include "json/json_writer.h"
#include "ptepack/base/error.h"
#include "ptepack/json/json_util.h"

namespace ptepack {
namespace {

// Where a field is, named only when a message needs it: formatting "tensors[KEY]"
// for each of a large manifest's keys would cost more than reading them.
struct Where {
  Where(const char* text) : base(text) {}         // NOLINT(google-explicit-constructor)
  Where(const std::string& text) : base(text) {}  // NOLINT(google-explicit-constructor)
  Where(std::string_view list, const std::string& entry_key) : base(list), key(&entry_key) {}
  [[nodiscard]] std::string text() const {
    return key == nullptr ? std::string(base) : fmt::format("{}[{}]", base, quote(*key));
  }
  [[nodiscard]] std::string operator+(std::string_view suffix) const {
    return text() + std::string(suffix);
  }
  std::string_view base;
  const std::string* key = nullptr;
};

class Reader {
 public:
  explicit Reader(const std::string& context) : context_(context) {}

  [[noreturn]] void bad(const Where& where, std::string_view what) const {
    fail_input("{}: manifest field {}: {}", context_, where.text(), what);
  }

  const JsonValue& field(const JsonValue& obj, const char* name, const Where& where) {
    if (!obj.is_object()) bad(where, "expected an object");
    const auto* found = obj.find(name);
    if (found == nullptr) bad(fmt::format("{}.{}", where.text(), name), "missing");
    return *found;
  }

  std::string string(const JsonValue& obj, const char* name, const Where& where) {
    const auto& v = field(obj, name, where);
    if (!v.is_string()) bad(fmt::format("{}.{}", where.text(), name), "expected a string");
    return std::string(v.text());
  }

  uint64_t number(const JsonValue& obj, const char* name, const Where& where) {
    const auto& v = field(obj, name, where);
    if (!v.is_number_unsigned())
      bad(fmt::format("{}.{}", where.text(), name), "expected an unsigned integer");
    return v.unsigned_value();
  }

  std::string file_name(const JsonValue& obj, const char* name, const Where& where) {
    auto value = string(obj, name, where);
    if (!is_plain_file_name(value)) {
      bad(fmt::format("{}.{}", where.text(), name),
          fmt::format("{} is not a plain file name", quote(value)));
    }
    return value;
  }

  std::string digest(const JsonValue& obj, const char* name, const Where& where) {
    auto value = string(obj, name, where);
    bool hex =
        value.size() == 64 && value.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) bad(fmt::format("{}.{}", where.text(), name), "expected 64 lowercase hex digits");
    return value;
  }

 private:
  const std::string& context_;
};

}  // namespace

bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name.front() != '.' &&
         name.find('/') == std::string_view::npos && name.find('\\') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// Written field by field in json_text's layout, keys in sorted order (as the
// std::map of a DOM would hold them): a 100,000-tensor manifest needs no DOM.
std::string manifest_to_json(const Manifest& m) {
  JsonWriter w;
  w.begin_object();
  if (m.alignment) w.field("alignment", *m.alignment);
  if (m.base_manifest_sha256) w.field("base_manifest_sha256", *m.base_manifest_sha256);
  w.field("cap_mode", cap_mode_name(m.cap_mode));
  w.field("format", kManifestFormat);
  w.key("max_shard_bytes");
  if (m.max_shard_bytes) {
    w.value(*m.max_shard_bytes);
  } else {
    w.null();
  }
  if (m.max_shard_tensors) w.field("max_shard_tensors", *m.max_shard_tensors);
  w.key("metadata");
  w.begin_object();
  w.field("total_size", m.total_size);
  w.end_object();
  if (m.oversize_own_shard) {
    w.field("oversize", "own-shard");
  }
  if (m.placement_single) w.field("placement", "single");
  if (m.version == kManifestProgramsVersion) {
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
  } else {
    w.key("program");
    w.begin_object();
    w.field("file", m.program.file);
    w.field("sha256", m.program.sha256);
    w.field("size", m.program.size);
    w.end_object();
  }
  if (m.release) w.field("release", *m.release);
  w.field("shard_format", shard_format_name(m.shard_format));
  if (m.shard_prefix) w.field("shard_prefix", *m.shard_prefix);
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
  }
  w.end_array();
  w.key("state");
  w.strings(m.state);
  w.key("tensors");
  w.begin_object();
  for (const auto& [key, t] : m.tensors) {
    w.key(key);
    w.begin_object();
    if (t.alias_of) {
      w.field("alias_of", *t.alias_of);
    }
    if (!t.dim_order.empty()) {
      w.key("dim_order");
      w.numbers(t.dim_order);
    }
    w.field("dtype", dtype_name(t.dtype));
    w.field("mutable", t.is_mutable);
    w.field("nbytes", t.nbytes);
    if (t.opaque) {
      w.field("opaque", true);
    }
    w.field("sha256", to_hex(t.sha256));
    w.key("shape");
    w.numbers(t.shape);
    w.field("shard", t.shard);
    w.end_object();
  }
  w.end_object();
  w.field("version", m.version);
  w.key("weight_map");
  w.begin_object();
  for (const auto& [key, file] : weight_map_of(m)) {
    w.key(key);
    w.value(file);
  }
  w.end_object();
  w.end_object();
  return std::move(w).finish();
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

Manifest parse_manifest(std::string_view text, const std::string& context) {
  const JsonDocument doc(text, context);
  const JsonValue& j = doc.root();
  Reader r(context);
  Manifest m;
  if (r.string(j, "format", "") != kManifestFormat)
    r.bad("format", "expected \"ptepack.manifest\"");
  const uint64_t version = r.number(j, "version", "");
  if (version != kManifestVersion && version != kManifestProgramsVersion)
    r.bad("version", "unsupported version (expected 1 or 2)");
  m.version = static_cast<int>(version);
  auto strings = [&](const JsonValue& obj, const char* name, const Where& where) {
    const auto& list = r.field(obj, name, where);
    if (!list.is_array()) r.bad(where + (std::string(".") + name), "expected an array");
    std::vector<std::string> out;
    out.reserve(list.array().size());
    for (const auto& k : list.array()) {
      if (!k.is_string()) r.bad(where + (std::string(".") + name), "expected strings");
      out.emplace_back(k.text());
    }
    return out;
  };
  if (m.version == kManifestVersion) {
    const auto& program = r.field(j, "program", "");
    m.program.file = r.file_name(program, "file", "program");
    m.program.sha256 = r.digest(program, "sha256", "program");
    m.program.size = r.number(program, "size", "program");
  } else {
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
      p.methods = strings(entry, "methods", where);
      p.shards = strings(entry, "shards", where);
      for (const auto& f : p.shards) {
        if (!is_plain_file_name(f)) r.bad(where + ".shards", "expected plain file names");
      }
      p.named_data = strings(entry, "named_data", where);
      m.programs.push_back(std::move(p));
    }
  }
  if (j.find("release") != nullptr) {
    m.release = r.number(j, "release", "");
    if (*m.release < 1 || *m.release > kMaxRelease) r.bad("release", "expected 1 to 2^53-1");
  }
  if (j.find("base_manifest_sha256") != nullptr) {
    m.base_manifest_sha256 = r.digest(j, "base_manifest_sha256", "");
  }
  const auto format = r.string(j, "shard_format", "");
  if (format != "ptd" && format != "safetensors")
    r.bad("shard_format", "expected \"ptd\" or \"safetensors\"");
  m.shard_format = format == "ptd" ? ShardFormat::ptd : ShardFormat::safetensors;
  const auto& cap = r.field(j, "max_shard_bytes", "");
  if (!cap.is_null()) m.max_shard_bytes = r.number(j, "max_shard_bytes", "");
  const auto cap_mode = r.string(j, "cap_mode", "");
  if (cap_mode != "file" && cap_mode != "payload")
    r.bad("cap_mode", "expected \"file\" or \"payload\"");
  m.cap_mode = cap_mode == "file" ? CapMode::file : CapMode::payload;
  if (j.find("oversize") != nullptr) {
    if (r.string(j, "oversize", "") != "own-shard") r.bad("oversize", "expected \"own-shard\"");
    m.oversize_own_shard = true;
  }
  if (j.find("alignment") != nullptr) {
    m.alignment = r.number(j, "alignment", "");
    if (m.shard_format != ShardFormat::ptd) r.bad("alignment", "only with .ptd shards");
    if (auto problem = alignment_problem(*m.alignment); !problem.empty()) r.bad("alignment", problem);
  }
  if (j.find("max_shard_tensors") != nullptr) {
    m.max_shard_tensors = r.number(j, "max_shard_tensors", "");
    if (*m.max_shard_tensors == 0) r.bad("max_shard_tensors", "expected at least 1");
  }
  if (j.find("placement") != nullptr) {
    if (r.string(j, "placement", "") != "single" || m.version != kManifestProgramsVersion)
      r.bad("placement", "expected \"single\", in version 2");
    m.placement_single = true;
  }
  if (j.find("shard_prefix") != nullptr) {
    m.shard_prefix = r.string(j, "shard_prefix", "");
    if (auto problem = shard_prefix_problem(*m.shard_prefix); !problem.empty())
      r.bad("shard_prefix", problem);
  }
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
    s.keys = strings(entry, "keys", where);
    if (entry.find("programs") != nullptr) {
      if (m.version != kManifestProgramsVersion) r.bad(where + ".programs", "only in version 2");
      s.programs = strings(entry, "programs", where);
      if (s.programs.empty()) r.bad(where + ".programs", "empty (the field is left out instead)");
    }
    if (entry.find("stale") != nullptr) {
      s.stale = strings(entry, "stale", where);
      if (s.stale.empty()) r.bad(where + ".stale", "empty (the field is left out instead)");
      if (!std::is_sorted(s.stale.begin(), s.stale.end()) ||
          std::adjacent_find(s.stale.begin(), s.stale.end()) != s.stale.end())
        r.bad(where + ".stale", "expected keys sorted and distinct");
    }
    m.shards.push_back(std::move(s));
  }
  const auto& tensors = r.field(j, "tensors", "");
  if (!tensors.is_object()) r.bad("tensors", "expected an object");
  if (tensors.object().size() > Limits::max_keys) r.bad("tensors", "too many keys");
  for (const auto* member : sorted_members(tensors)) {
    const std::string key(member->key);
    const auto& t = member->value;
    const Where where("tensors", key);
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
    if (m.version == kManifestProgramsVersion && order != nullptr) {
      if (!order->is_array() || order->array().size() != mt.shape.size())
        r.bad(where + ".dim_order", "expected one entry per dimension");
      for (const auto& d : order->array()) {
        if (!d.is_number_unsigned() || d.unsigned_value() >= mt.shape.size())
          r.bad(where + ".dim_order", "expected dimension indices");
        mt.dim_order.push_back(static_cast<uint8_t>(d.unsigned_value()));
      }
    }
    const auto* opaque = t.find("opaque");
    if (m.version == kManifestProgramsVersion && opaque != nullptr) {
      if (!opaque->is_boolean()) r.bad(where + ".opaque", "expected a boolean");
      mt.opaque = opaque->boolean();
    }
    m.tensors.emplace_hint(m.tensors.end(), key, std::move(mt));  // keys in sorted order
  }
  const auto& state = r.field(j, "state", "");
  if (!state.is_array()) r.bad("state", "expected an array");
  for (const auto& k : state.array()) {
    if (!k.is_string()) r.bad("state", "expected strings");
    m.state.emplace_back(k.text());
  }
  m.total_size = r.number(r.field(j, "metadata", ""), "total_size", "metadata");
  const auto& weight_map = r.field(j, "weight_map", "");
  if (!weight_map.is_object()) r.bad("weight_map", "expected an object");
  // Derived data: it must be what the shards' key lists give, entry for entry.
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

std::optional<uint64_t> manifest_version_of(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  auto file = InputFile::open(path);
  if (file->size() > Limits::max_manifest_bytes) return std::nullopt;
  auto raw = file->read_range(0, file->size());
  return manifest_version({reinterpret_cast<const char*>(raw.data()), raw.size()});
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
