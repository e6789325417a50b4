// The directory check's first step: manifest, files present, programs, shard tables,
// key lists, layouts, aliases, program entries and derived fields; no bytes hashed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "base/ordered_cursor.h"
#include "base/parallel.h"
#include "base/view_set.h"
#include "containers/flat_tensor.h"
#include "containers/safetensors.h"
#include "json/json_util.h"
#include "pte/data_checks.h"
#include "ptepack/base/error.h"
#include "ptepack/trust/signature.h"
#include "verify/directory_state.h"
#include "verify/verify_support.h"

namespace ptepack::detail {

namespace {

using ShardIndex = std::map<std::string, size_t>;

// The cap holds for shard `s`, or --oversize own-shard lets it exceed it alone
// (one stored tensor, its aliases).
void check_shard_cap(const Manifest& m, const ManifestShard& s, const InputFile& file,
                     uint64_t payload, Diagnostics& out) {
  uint64_t measured = cap_measure(m.cap_mode, file.size(), payload);
  auto alone = [&] {
    const Digest* stored = nullptr;  // the digest every key must share
    for (const auto& key : s.keys) {
      auto t = m.tensors.find(key);
      if (t == m.tensors.end()) continue;
      if (stored == nullptr) stored = &t->second.sha256;
      if (*stored != t->second.sha256) return false;
    }
    return true;
  };
  if (measured > *m.max_shard_bytes && !(m.oversize_own_shard && alone())) {
    out.add({ProblemId::shard_contents, file.name(),
             fmt::format("{}: {} {} bytes exceed the cap {}", file.name(),
                         m.cap_mode == CapMode::file ? "file of" : "payload of", measured,
                         *m.max_shard_bytes)});
  }
}

// The file holds the keys this release reads and the stale ones, nothing else.
void check_shard_keys(const ManifestShard& s, const ShardContents& c, Diagnostics& out) {
  std::vector<std::string_view> listed(s.keys.begin(), s.keys.end());
  listed.insert(listed.end(), s.stale.begin(), s.stale.end());
  std::sort(listed.begin(), listed.end());
  bool same_keys =
      c.tensors.size() == listed.size() &&
      std::equal(c.tensors.begin(), c.tensors.end(), listed.begin(),
                 [](const auto& entry, std::string_view key) { return entry.first == key; });
  if (!same_keys) {
    out.add(
        {ProblemId::shard_contents, c.file->name(),
         fmt::format("{}: keys in the file differ from the manifest's list ({} in file, {} listed)",
                     c.file->name(), c.tensors.size(), listed.size())});
  }
}

// A .ptd shard's table: its tensors, the payload of its segments, and the
// manifest's alignment checked (the first tensor off it reported).
void read_ptd_shard(const Manifest& m, ShardContents& c, Diagnostics& out,
                    std::vector<std::string>& notes) {
  auto f = ptd::read_file(c.file);
  note_unreferenced_segments(f, notes);
  for (const auto& seg : f.segments) c.payload += seg.size;
  c.tensors = std::move(f.tensors);
  for (const auto& [key, t] : c.tensors) {
    if (m.alignment && t.bytes.size > 0 && t.bytes.offset % *m.alignment != 0) {
      out.add({ProblemId::shard_contents, c.file->name(),
               fmt::format("{}: tensor {} at offset {} is not on the manifest's "
                           "alignment {}",
                           c.file->name(), quote(key), t.bytes.offset, *m.alignment)});
      break;
    }
  }
}

// The shards of `entry` that are listed and readable, as data files of its program.
std::vector<DataFile> program_data_files(const ManifestProgramEntry& entry,
                                         const ShardIndex& shard_index,
                                         const std::vector<ShardContents>& contents,
                                         const std::string& name, Diagnostics& problems) {
  std::vector<DataFile> files;
  for (const auto& shard : entry.shards) {
    auto it = shard_index.find(shard);
    if (it == shard_index.end()) {
      problems.add({ProblemId::manifest_inconsistent, name,
                    fmt::format("{}: data file {} is not a listed shard", name, shard)});
    } else if (contents[it->second].readable) {
      files.push_back({shard, &contents[it->second].tensors});
    }
  }
  return files;
}

// A program loads every file it lists: one that holds none of its keys (`own`)
// is bytes it loads for nothing (pack never lists one).
void check_unused_data_files(const ManifestProgramEntry& entry, const std::set<std::string>& own,
                             const ShardIndex& shard_index,
                             const std::vector<ShardContents>& contents, const std::string& name,
                             Diagnostics& problems) {
  for (const auto& shard : entry.shards) {
    auto it = shard_index.find(shard);
    if (it == shard_index.end() || !contents[it->second].readable) continue;
    const auto& keys = contents[it->second].tensors;
    if (std::none_of(keys.begin(), keys.end(),
                     [&](const auto& k) { return own.count(k.first) > 0; })) {
      problems.add(
          {ProblemId::manifest_inconsistent, name,
           fmt::format("{}: lists data file {}, which holds none of its keys", name, shard)});
    }
  }
}

// Two or more programs: each shard names the programs that list it, in manifest order.
void check_shard_programs(const Manifest& m, const ShardIndex& shard_index,
                          const std::string& mname, Diagnostics& problems) {
  std::vector<std::vector<std::string>> listing(m.shards.size());
  for (const auto& entry : m.programs) {
    for (const auto& shard : entry.shards) {
      if (auto it = shard_index.find(shard); it != shard_index.end())
        listing[it->second].push_back(entry.file);
    }
  }
  // Manifests written before the field existed have none: nothing to check then.
  const bool written = std::any_of(m.shards.begin(), m.shards.end(),
                                   [](const ManifestShard& s) { return !s.programs.empty(); });
  for (size_t i = 0; written && i < m.shards.size(); ++i) {
    const auto& expected = m.programs.size() > 1 ? listing[i] : std::vector<std::string>{};
    if (m.shards[i].programs != expected) {
      problems.add({ProblemId::manifest_inconsistent, mname,
                    fmt::format("{}: shard {}: programs [{}] differ from the programs that "
                                "list it [{}]",
                                mname, m.shards[i].file, fmt::join(m.shards[i].programs, ", "),
                                fmt::join(expected, ", "))});
    }
  }
}

}  // namespace
void DirectoryCheck::State::files_present() {
  std::set<std::string> expected{"manifest.json"};
  if (programs) {
    for (const auto& p : m.programs) {
      if (!expected.insert(p.file).second)
        problems.add({ProblemId::manifest_inconsistent, mname,
                      fmt::format("{}: program {} is listed twice", mname, p.file)});
    }
  } else {
    expected.insert(m.program.file);
  }
  if (!ptd_format) expected.insert("model.safetensors.index.json");
  for (const auto& s : m.shards) {
    if (!expected.insert(s.file).second)
      problems.add({ProblemId::manifest_inconsistent, mname,
                    fmt::format("{}: shard {} is listed twice", mname, s.file)});
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(paths.dir, ec)) {
    auto name = entry.path().filename().string();
    if (is_ignored_name(name)) continue;  // the signature and git's files (docs/signing.md)
    if (!expected.count(name)) {
      problems.add(
          {ProblemId::file_stray, entry.path().string(),
           fmt::format("{}: stray file not listed in the manifest", entry.path().string())});
    }
  }
  if (ec)
    problems.add({ProblemId::file_unreadable, paths.dir.string(),
                  fmt::format("{}: cannot list directory: {}", paths.dir.string(), ec.message())});
}

void DirectoryCheck::State::read_program() {
  attempt(problems, ProblemId::file_unreadable, (paths.dir / m.program.file).string(), [&] {
    auto file = open_inside(paths.dir, m.program.file, mname);
    ++report.files_checked;
    if (file->size() != m.program.size) {
      problems.add({ProblemId::file_changed, file->name(),
                    size_differs_line(file->name(), file->size(), m.program.size)});
    }
    if (file->size() > Limits::max_program_bytes) fail_input("{}: program too large", file->name());
    auto bytes = file->read_range(0, file->size());
    report.bytes_hashed += bytes.size();
    if (to_hex(sha256(bytes)) != m.program.sha256) {
      problems.add({ProblemId::file_changed, file->name(), digest_differs_line(file->name())});
    }
    program = read_program_buffer(std::move(bytes), file->name());
  });
}

// Shard tables, read in parallel: sizes, payloads, caps and key lists (their
// digests and names are checked with the bytes).
void DirectoryCheck::State::read_shards() {
  contents.resize(m.shards.size());
  std::vector<std::vector<Problem>> per_shard(m.shards.size());
  std::vector<std::vector<std::string>> notes(m.shards.size());
  std::vector<char> read(m.shards.size(), 0);
  parallel_for(m.shards.size(), effective_jobs(options.jobs), [&](size_t i) {
    const auto& s = m.shards[i];
    Diagnostics out(ReadMode::collect, per_shard[i]);
    if (skipped(s.file, wanted_shard[i])) return;
    read[i] = 1;
    attempt(out, ProblemId::file_unreadable, (paths.dir / s.file).string(), [&] {
      auto file = open_inside(paths.dir, s.file, mname);
      if (file->size() != s.size) {
        out.add({ProblemId::file_changed, file->name(),
                 size_differs_line(file->name(), file->size(), s.size)});
      }
      // Recorded shard options hold for every shard (docs/manifest.md).
      if (m.shard_prefix && !s.file.starts_with(*m.shard_prefix + "-")) {
        out.add({ProblemId::shard_name, file->name(),
                 fmt::format("{}: name does not start with the manifest's shard_prefix {}",
                             file->name(), quote(*m.shard_prefix))});
      }
      auto& c = contents[i];
      c.file = file;
      if (ptd_format) {
        read_ptd_shard(m, c, out, notes[i]);
      } else {
        c.tensors = safetensors::read(file).tensors;
        for (const auto& [k, t] : c.tensors) c.payload += t.bytes.size;
      }
      c.readable = true;
      if (c.payload != s.payload_bytes) {
        out.add({ProblemId::shard_contents, file->name(),
                 fmt::format("{}: payload {} differs from the manifest's {}", file->name(),
                             c.payload, s.payload_bytes)});
      }
      if (m.max_shard_bytes) check_shard_cap(m, s, *file, c.payload, out);
      check_shard_keys(s, c, out);
    });
  });
  for (auto& found : per_shard) problems.add_all(std::move(found));
  for (auto& found : notes) report.notes.insert(report.notes.end(), found.begin(), found.end());
  report.files_checked += static_cast<uint64_t>(std::count(read.begin(), read.end(), 1));
  for (size_t i = 0; i < m.shards.size(); ++i) shard_index[m.shards[i].file] = i;
}

// Each listed key readable where the manifest says, with matching layout; its
// bytes are hashed later.
void DirectoryCheck::State::check_tensors() {
  data.reserve(m.tensors.size());
  // The manifest's keys come in order, so each shard's keys are met in order:
  // one cursor per shard finds them without a search.
  std::vector<OrderedCursor<TensorTable>> cursors;
  cursors.reserve(contents.size());
  for (const auto& c : contents) cursors.emplace_back(c.tensors);
  for (const auto& entry : m.tensors) {
    const auto& [key, t] = entry;
    auto where = [&, &k = key] { return fmt::format("{}: tensor {}", mname, quote(k)); };
    auto si = shard_index.find(t.shard);
    if (si == shard_index.end()) {
      problems.add({ProblemId::manifest_inconsistent, mname,
                    fmt::format("{}: shard {} is not listed", where(), t.shard)});
      continue;
    }
    const auto& c = contents[si->second];
    if (!c.readable) continue;
    const TensorTable::value_type* found = nullptr;
    if (auto it = cursors[si->second].find(key); it != c.tensors.end()) {
      found = &*it;
    } else if (!ptd_format && t.alias_of) {
      // A safetensors alias, which its file does not hold, as a copy of its owner's entry.
      if (auto o = c.tensors.find(*t.alias_of); o != c.tensors.end())
        found = &*alias_data.emplace_hint(alias_data.end(), key, o->second);
    }
    if (found == nullptr) {
      problems.add({ProblemId::shard_contents, (paths.dir / t.shard).string(),
                    fmt::format("{}: not readable from {}", where(), t.shard)});
      continue;
    }
    const TensorData& d = found->second;
    if (d.dtype != t.dtype || d.shape != t.shape || d.bytes.size != t.nbytes) {
      problems.add(
          {ProblemId::shard_contents, (paths.dir / t.shard).string(),
           fmt::format("{}: manifest says {} [{}] {} bytes but {} holds {} [{}] {} bytes", where(),
                       dtype_name(t.dtype), fmt::join(t.shape, ", "), t.nbytes, t.shard,
                       dtype_name(d.dtype), fmt::join(d.shape, ", "), d.bytes.size)});
    }
    if (t.alias_of) {
      auto owner = m.tensors.find(*t.alias_of);
      if (owner == m.tensors.end() || owner->second.alias_of) {
        problems.add(
            {ProblemId::manifest_inconsistent, mname,
             fmt::format("{}: alias_of {} is not a stored owner", where(), quote(*t.alias_of))});
      } else if (owner->second.sha256 != t.sha256 || owner->second.shard != t.shard ||
                 !(key > *t.alias_of)) {
        problems.add({ProblemId::manifest_inconsistent, mname,
                      fmt::format("{}: alias_of {} disagrees (digest, shard or owner order)",
                                  where(), quote(*t.alias_of))});
      }
      if (t.is_mutable)
        problems.add(
            {ProblemId::manifest_inconsistent, mname,
             fmt::format("{}: state key is an alias (state is never deduplicated)", where())});
    }
    data.push_back(found);
    hashed.push_back(&entry);
    ranges.push_back(d.bytes);
  }
  check_unlisted_keys();
}

// Every key a shard holds is a tensor of the manifest or stale there, never both.
void DirectoryCheck::State::check_unlisted_keys() {
  ViewSet listed;
  listed.reserve(m.tensors.size());
  for (const auto& entry : m.tensors) listed.insert(entry.first);
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const auto& stale = m.shards[i].stale;
    for (const auto& key : stale) {
      if (listed.contains(key)) {
        problems.add({ProblemId::manifest_inconsistent, mname,
                      fmt::format("{}: key {} is stale in {} and a tensor of the manifest", mname,
                                  quote(key), m.shards[i].file)});
      }
    }
    for (const auto& [key, t] : contents[i].tensors) {
      if (!listed.contains(key) && !std::binary_search(stale.begin(), stale.end(), key)) {
        problems.add({ProblemId::shard_contents, (paths.dir / m.shards[i].file).string(),
                      fmt::format("{}: key {} in {} is not in the manifest", mname, quote(key),
                                  m.shards[i].file)});
      }
    }
  }
}

// A key in two shards: a loader given both refuses them, pack never writes it.
void DirectoryCheck::State::keys_in_two_shards() {
  const auto keys = sorted_shard_keys(m);
  std::vector<std::pair<const ShardKey*, const ShardKey*>> twice;  // (first, later)
  for (size_t i = 1, first = 0; i < keys.size(); ++i) {
    if (keys[i].key != keys[first].key) {
      first = i;
      continue;
    }
    twice.emplace_back(&keys[first], &keys[i]);
  }
  // Reported in the order of the later shard's lists.
  std::sort(twice.begin(), twice.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->shard, a.second->position) <
           std::tie(b.second->shard, b.second->position);
  });
  for (const auto& [first, later] : twice) {
    problems.add({ProblemId::manifest_inconsistent, mname,
                  fmt::format("{}: key {} is in two shards: {} and {}", mname, quote(later->key),
                              m.shards[first->shard].file, m.shards[later->shard].file)});
  }
  // A stale key counts too: a program listing both files would meet it twice.
  std::map<std::string_view, size_t> holder;  // key -> first shard holding it
  for (const auto& k : keys) holder.emplace(k.key, k.shard);
  for (size_t i = 0; i < m.shards.size(); ++i) {
    for (const auto& key : m.shards[i].stale) {
      auto [it, fresh] = holder.emplace(key, i);
      if (!fresh && it->second != i) {
        problems.add({ProblemId::manifest_inconsistent, mname,
                      fmt::format("{}: key {} is in two shards: {} and {}", mname, quote(key),
                                  m.shards[it->second].file, m.shards[i].file)});
      }
    }
  }
  // Bytes stored twice: a shard kept whole from an earlier release (pack
  // --base) keeps its copy when a new key with the same bytes lands in a new
  // shard. Noted, never written by pack otherwise.
  std::map<std::tuple<Digest, int, Shape>, const std::pair<const std::string, ManifestTensor>*>
      stored;
  for (const auto& entry : m.tensors) {
    const auto& t = entry.second;
    if (t.alias_of || t.is_mutable) continue;
    auto content = ptd_format ? std::make_tuple(t.sha256, 0, Shape{})
                              : std::make_tuple(t.sha256, static_cast<int>(t.dtype), t.shape);
    auto [it, fresh] = stored.emplace(content, &entry);
    if (!fresh && it->second->second.shard != t.shard) {
      report.notes.push_back(fmt::format(
          "{}: keys {} ({}) and {} ({}) hold the same bytes in two shards (a shard kept "
          "from an earlier release holds one copy)",
          mname, quote(it->second->first), it->second->second.shard, quote(entry.first), t.shard));
    }
  }
}

// Each .pte of a directory of programs: size, structure, methods, and every key
// it needs resolvable in exactly one of the shards the manifest lists for it;
// then every stored key needed by some program (the manifest's lists are what
// `pack DIR -o X.pte` restores from, so a key outside them would be lost).
void DirectoryCheck::State::check_program_entries() {
  std::set<std::string> needed;
  program_files.resize(m.programs.size());
  pte_programs.resize(m.programs.size());
  for (size_t p = 0; p < m.programs.size(); ++p) {
    const auto& entry = m.programs[p];
    needed.insert(entry.named_data.begin(), entry.named_data.end());
    if (skipped(entry.file, wanted_program[p])) continue;
    attempt(problems, ProblemId::file_unreadable, (paths.dir / entry.file).string(), [&] {
      auto file = open_inside(paths.dir, entry.file, mname);
      ++report.files_checked;
      if (file->size() != entry.size) {
        problems.add({ProblemId::file_changed, file->name(),
                      size_differs_line(file->name(), file->size(), entry.size)});
      }
      program_files[p] = file;
      if (!wanted_program[p]) return;  // present, not asked for: its size and digest only
      auto pte_program = pte::read(file);
      record_lines(problems, ProblemId::program_rules, file->name(),
                   [&](auto& lines) { check_shared_state(pte_program, file->name(), lines); });
      if (pte_program.plans != entry.methods) {
        problems.add(
            {ProblemId::manifest_inconsistent, file->name(),
             fmt::format("{}: methods [{}] differ from the manifest's [{}]", file->name(),
                         fmt::join(pte_program.plans, ", "), fmt::join(entry.methods, ", "))});
      }
      auto files = program_data_files(entry, shard_index, contents, file->name(), problems);
      record_lines(problems, ProblemId::program_rules, file->name(), [&](auto& lines) {
        check_program_data(pte_program, file->name(), files, entry.named_data, true, lines);
      });
      // Named data is read by delegates only: a program without one reads none of it
      // (a program swapped for another under the manifest's digest and size).
      if (!entry.named_data.empty() && pte_program.delegates.empty()) {
        problems.add({ProblemId::manifest_inconsistent, file->name(),
                      fmt::format("{}: the manifest lists {} named-data keys for it, but it "
                                  "has no delegate to read them",
                                  file->name(), entry.named_data.size())});
      }
      std::set<std::string> own(entry.named_data.begin(), entry.named_data.end());
      for (const auto& t : pte_program.tensors) {
        if (t.storage == pte::Storage::external) own.insert(t.fqn);
      }
      needed.insert(own.begin(), own.end());
      check_unused_data_files(entry, own, shard_index, contents, file->name(), problems);
      // The reader (strict) hands each program on (read_into); verify holds one at a time.
      if (problems.mode() == ReadMode::strict) pte_programs[p] = std::move(pte_program);
    });
  }
  check_shard_programs(m, shard_index, mname, problems);
  // Which keys the programs not asked for need is theirs to say: a subset checks none.
  for (const auto& [key, t] : m.tensors) {
    if (subset) break;
    if (!needed.count(key)) {
      problems.add(
          {ProblemId::manifest_inconsistent, mname,
           fmt::format("{}: key {} in {} is needed by no program", mname, quote(key), t.shard)});
    }
  }
}

// Derived manifest fields (the reader checked the weight_map).
void DirectoryCheck::State::derived_fields() {
  uint64_t total = 0;
  for (const auto& s : m.shards) total += s.payload_bytes;
  if (total != m.total_size)
    problems.add({ProblemId::manifest_inconsistent, mname,
                  fmt::format("{}: metadata.total_size {} differs from the shards' payload {}",
                              mname, m.total_size, total)});
  if (ptd_format) return;
  attempt(problems, ProblemId::file_unreadable,
          (paths.dir / "model.safetensors.index.json").string(), [&] {
            auto file = open_inside(paths.dir, "model.safetensors.index.json", mname);
            auto raw =
                file->read_range(0, std::min<uint64_t>(file->size(), Limits::max_header_bytes));
            auto expected_index = safetensors::index_json(total, weight_map_of(m));
            if (std::string(raw.begin(), raw.end()) != expected_index) {
              problems.add(
                  {ProblemId::manifest_inconsistent, file->name(),
                   fmt::format("{}: does not match the manifest's weight_map", file->name())});
            }
          });
}

// The program's own checks need only the program and the tensor table: they run
// on one more thread while the bytes are hashed; their problems come last.

}  // namespace ptepack::detail
