// Dump: collect methods, keys, state, shards and dedup figures, then render text or JSON.
#include "ptepack/dump/dump.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/format_util.h"
#include "base/ordered_cursor.h"
#include "dump/dump_internal.h"
#include "dump/graph_dot.h"
#include "hash/parallel_hash.h"
#include "pte/merge_internal.h"
#include "ptepack/base/error.h"
#include "ptepack/io/progress.h"
#include "ptepack/verify/reader.h"

namespace ptepack {
namespace detail {

std::string shape_text(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Hashing this many bytes draws progress on a terminal.
constexpr uint64_t kProgressBytes = 256ULL << 20;

std::string file_of(const KeyRow& r) {
  return r.data->bytes.file ? r.data->bytes.file->name() : std::string();
}

std::string DumpContext::sha256_of(size_t i) const {
  if (rows[i].manifest_sha256 != nullptr) return to_hex(*rows[i].manifest_sha256);
  return i < digests.size() ? to_hex(digests[i]) : std::string();
}

namespace {

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

// Byte figures of all rows, before --key, --method and --shard.
struct ByteFigures {
  uint64_t referenced_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t unreferenced_bytes = 0;
  uint64_t unreferenced_keys = 0;
  uint64_t saved = 0;
};

// The tensors that get rows: the artifact's data, and for a bare .pte its own
// constants and named data too (held in `with_own`; data files win on a key).
const TensorTable& row_table(const Artifact& artifact, TensorTable& with_own) {
  if (artifact.kind != ArtifactKind::pte || artifact.pte_programs.size() != 1) {
    return artifact.data;
  }
  with_own = own_tensors(artifact.pte_programs.front().program);
  for (const auto& [key, data] : artifact.data) with_own.insert_or_assign(key, data);
  return with_own;
}

// One row per key with data, plus referenced keys that have none (state buffers).
// Every table here is ordered by key, and the rows come in key order.
std::vector<KeyRow> collect_rows(const Artifact& artifact, const TensorTable& table,
                                 const ProgramKeys& keys,
                                 const std::vector<std::string_view>& mutated_keys) {
  std::vector<KeyRow> rows;
  rows.reserve(table.size());
  OrderedCursor mutated(mutated_keys);
  auto use = keys.uses().begin();
  auto referenced = [&](const std::string& key) {
    while (use != keys.uses().end() && use->key < key) ++use;
    return use != keys.uses().end() && use->key == key;
  };
  OrderedCursor aliases(artifact.aliases);
  const std::map<std::string, ManifestTensor> no_manifest;
  OrderedCursor listed(artifact.manifest ? artifact.manifest->tensors : no_manifest);
  for (const auto& [key, data] : table) {
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
  return rows;
}

ByteFigures byte_figures(const Artifact& artifact, const std::vector<KeyRow>& rows) {
  ByteFigures f;
  for (const auto& r : rows) {
    if (!r.referenced) {
      ++f.unreferenced_keys;
      f.unreferenced_bytes += r.data->bytes.size;
      continue;
    }
    f.referenced_bytes += r.data->bytes.size;
  }
  if (artifact.manifest) {
    for (const auto& s : artifact.manifest->shards) f.stored_bytes += s.payload_bytes;
  } else {
    // Stored once per distinct byte range (aliases share their owner's range).
    std::vector<ByteRange> ranges;
    ranges.reserve(rows.size());
    for (const auto& r : rows) ranges.push_back(r.data->bytes);
    f.stored_bytes = stored_ranges(std::move(ranges)).bytes;
  }
  f.saved = f.referenced_bytes + f.unreferenced_bytes > f.stored_bytes
                ? f.referenced_bytes + f.unreferenced_bytes - f.stored_bytes
                : 0;
  return f;
}

// --method must name a method of the program(s), --shard a shard of the manifest.
void check_selection(const Artifact& artifact, const DumpOptions& options) {
  if (!options.method.empty() && (artifact.program || !artifact.pte_programs.empty())) {
    std::vector<std::string> names;
    if (artifact.program) {
      for (const auto& m : access::methods(artifact.program.root()))
        names.emplace_back(access::name(m));
    }
    for (const auto& p : artifact.pte_programs) {
      for (const auto& plan : p.program.plans) {
        if (std::find(names.begin(), names.end(), plan) == names.end()) names.push_back(plan);
      }
    }
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
}

// Digests of the rows shown (a manifest already lists them; --no-hash skips them).
std::vector<Digest> row_digests(const Artifact& artifact, const std::vector<KeyRow>& rows,
                                const DumpOptions& options) {
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
  return digests;
}

// .pte programs: the methods that read each key, each named with its program
// ("model.pte forward"): methods of one name in two programs are two methods.
void add_key_methods(const Artifact& artifact, DumpContext& context) {
  for (const auto& p : artifact.pte_programs) {
    // Its named data: its own, the manifest's list for it, or its data files' other keys.
    std::set<std::string> named;
    for (const auto& e : p.program.named_data) named.insert(e.key);
    if (p.named_keys) {
      named.insert(p.named_keys->begin(), p.named_keys->end());
    } else {
      std::set<std::string_view> external;
      for (const auto& t : p.program.tensors) {
        if (t.storage == pte::Storage::external) external.insert(t.fqn);
      }
      for (const auto& [key, d] : artifact.data) {
        if (!external.count(key)) named.insert(key);
      }
    }
    for (uint32_t plan = 0; plan < p.program.plans.size(); ++plan) {
      std::set<std::string> read = pte::detail::keys_named_by_plan(p.program, plan, named);
      for (const auto& t : p.program.tensors) {
        if (t.plan != plan) continue;
        if (t.storage == pte::Storage::external) read.insert(t.fqn);
        if (t.storage == pte::Storage::constant_segment ||
            t.storage == pte::Storage::constant_buffer) {
          read.insert(own_tensor_key(p.program, t));
        }
      }
      const auto method = fmt::format("{} {}", p.file, p.program.plans[plan]);
      for (const auto& key : read) context.key_methods[key].push_back(method);
    }
  }
}

}  // namespace

// Counts and bytes of the shown rows per method, dtype and shard, and the `top` largest.
Breakdown breakdown_of(
    const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top,
    const std::map<std::string, std::vector<std::string>, std::less<>>& key_methods) {
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
    if (auto it = key_methods.find(*r.key); it != key_methods.end()) {
      for (const auto& m : it->second) count(b.by_method[m], bytes);
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
}  // namespace detail

std::string dump_artifact(const std::filesystem::path& path, const DumpOptions& options) {
  std::string text;
  dump_artifact(path, options, [&text](std::string_view chunk) { text += chunk; });
  return text;
}

void dump_artifact(const std::filesystem::path& path, const DumpOptions& options,
                   const TextOut& write) {
  using namespace detail;  // NOLINT: the collection helpers and types of this command
  Sink out(write, options.json ? 0 : options.width);
  // Read as every command reads it: a packed directory, or a program its manifest lists,
  // checked against the manifest (--no-hash: the structure and sizes only).
  ReadOptions read;
  read.hash = !options.no_hash;
  read.jobs = options.jobs;
  auto artifact = load_artifact(path, options.data, true, ProgramForm::buffer, read);
  artifact.notes.insert(artifact.notes.end(), artifact.checked.begin(), artifact.checked.end());
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

  TensorTable with_own;
  auto rows = collect_rows(artifact, row_table(artifact, with_own), keys, mutated_keys);
  const auto& state = mutated_keys;  // sorted, each once
  const auto figures = byte_figures(artifact, rows);
  check_selection(artifact, options);
  const size_t total_keys = rows.size();
  rows = select_rows(std::move(rows), options, keys, static_cast<bool>(artifact.program));
  auto digests = row_digests(artifact, rows, options);

  ProgramDump programs;
  if (!artifact.pte_programs.empty()) {
    programs = dump_programs(
        {artifact.pte_programs, artifact.data, artifact.manifest ? &*artifact.manifest : nullptr},
        {options.graph, !options.summary && !options.no_tensors, options.jobs});
  }

  detail::DumpContext context{artifact,
                              options,
                              keys,
                              state,
                              std::move(rows),
                              total_keys,
                              std::move(digests),
                              std::move(programs),
                              figures.referenced_bytes,
                              figures.stored_bytes,
                              figures.unreferenced_bytes,
                              figures.unreferenced_keys,
                              figures.saved};
  add_key_methods(artifact, context);
  if (options.json) {
    detail::render_json(context, out);
  } else {
    detail::render_text(context, out);
  }
}

}  // namespace ptepack
