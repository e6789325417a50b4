// verify for output directories: manifest against program, shard files, tensor bytes and caps.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <set>
#include <thread>
#include <tuple>

#include "base/view_set.h"
#include "program_checks.h"
#include "ptepack/base/error.h"
#include "ptepack/base/ordered_cursor.h"
#include "ptepack/formats/artifact.h"
#include "ptepack/formats/flat_tensor.h"
#include "ptepack/formats/json_util.h"
#include "ptepack/formats/safetensors.h"
#include "ptepack/hash/parallel_hash.h"
#include "ptepack/io/output_file.h"
#include "ptepack/io/progress.h"
#include "ptepack/verify/verify.h"

namespace ptepack {
namespace fs = std::filesystem;

namespace {

// What one shard file holds, as read back.
struct ShardContents {
  bool readable = false;
  TensorTable tensors;
  uint64_t payload = 0;
};

std::vector<const TensorTable*> contents_tables(const std::vector<ShardContents>& contents) {
  std::vector<const TensorTable*> out;
  for (const auto& c : contents) out.push_back(c.readable ? &c.tensors : nullptr);
  return out;
}

// Each .pte of a directory of programs: size, digest, structure, methods, and
// every key it needs resolvable in exactly one of the shards the manifest lists for it.
// Returns every key some program needs (EXTERNAL names and listed named data).
std::set<std::string> verify_program_entries(const Manifest& m, const DirectoryPaths& paths,
                                             const std::map<std::string, size_t>& shard_index,
                                             const std::vector<const TensorTable*>& tables,
                                             const VerifyOptions& options, VerifyReport& report) {
  auto& problems = report.problems;
  std::set<std::string> needed;
  const auto mname = paths.manifest.string();
  for (const auto& entry : m.programs) {
    attempt(problems, [&] {
      auto file = open_inside(paths.dir, entry.file, mname);
      ++report.files_checked;
      report.bytes_hashed += file->size();
      if (file->size() != entry.size) {
        problems.push_back(fmt::format("{}: size {} differs from the manifest's {}", file->name(),
                                       file->size(), entry.size));
      }
      auto digest = hash_ranges({ByteRange{file, 0, file->size()}}, options.jobs).front();
      if (to_hex(digest) != entry.sha256) {
        problems.push_back(fmt::format("{}: SHA-256 differs from the manifest", file->name()));
      }
      auto program = pte::read(file);
      if (program.plans != entry.methods) {
        problems.push_back(fmt::format("{}: methods [{}] differ from the manifest's [{}]",
                                       file->name(), fmt::join(program.plans, ", "),
                                       fmt::join(entry.methods, ", ")));
      }
      std::vector<DataFile> files;
      for (const auto& shard : entry.shards) {
        auto it = shard_index.find(shard);
        if (it == shard_index.end()) {
          problems.push_back(
              fmt::format("{}: data file {} is not a listed shard", file->name(), shard));
        } else if (tables[it->second] != nullptr) {
          files.push_back({shard, tables[it->second]});
        }
      }
      check_program_data(program, file->name(), files, entry.named_data, true, problems);
      for (const auto& t : program.tensors) {
        if (t.storage == pte::Storage::external) needed.insert(t.fqn);
      }
    });
    needed.insert(entry.named_data.begin(), entry.named_data.end());
  }
  return needed;
}

// The graph program against the manifest's state and mutable flags, then its
// structure and data (check_packed_program).
void check_graph_program(const nb::Program& program, const Manifest& m, const TensorLookup& data,
                         const std::string& mname, std::vector<std::string>& problems) {
  const ProgramKeys keys(program);
  const auto state = keys.mutated();
  if (!std::equal(state.begin(), state.end(), m.state.begin(), m.state.end()))
    problems.push_back(
        fmt::format("{}: state list differs from the program's mutable keys", mname));
  for (const auto& [key, t] : m.tensors) {
    if (t.is_mutable != keys.is_mutated(key)) {
      problems.push_back(
          fmt::format("{}: tensor {}: mutable flag disagrees with the program", mname, quote(key)));
    }
  }
  check_packed_program(program, keys, data, m.program.file, problems);
}

}  // namespace

void verify_directory(const fs::path& path, const VerifyOptions& options, VerifyReport& report) {
  auto& problems = report.problems;
  auto paths = directory_paths(path);
  auto mname = paths.manifest.string();
  Manifest m;
  if (!attempt(problems, [&] {
        m = read_manifest_file(*open_inside(paths.dir, "manifest.json", paths.dir.string()), mname);
      })) {
    return;
  }
  for (const auto& stray : stale_temporaries(paths.dir)) {
    report.notes.push_back(fmt::format(
        "{}: temporary left beside the output by an interrupted pack (the next pack to {} "
        "removes it)",
        stray.string(), paths.dir.string()));
  }
  bool ptd_format = m.shard_format == "ptd";
  const char* ext = ptd_format ? ".ptd" : ".safetensors";

  // Files present versus files listed.
  const bool programs = m.version == kManifestProgramsVersion;
  if (programs) report.kind = std::string(artifact_kind_name(ArtifactKind::programs));
  std::set<std::string> expected{"manifest.json"};
  if (programs) {
    for (const auto& p : m.programs) {
      if (!expected.insert(p.file).second)
        problems.push_back(fmt::format("{}: program {} is listed twice", mname, p.file));
    }
  } else {
    expected.insert(m.program.file);
  }
  if (!ptd_format) expected.insert("model.safetensors.index.json");
  for (const auto& s : m.shards) {
    if (!expected.insert(s.file).second)
      problems.push_back(fmt::format("{}: shard {} is listed twice", mname, s.file));
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(paths.dir, ec)) {
    auto name = entry.path().filename().string();
    if (!expected.count(name)) {
      problems.push_back(
          fmt::format("{}: stray file not listed in the manifest", entry.path().string()));
    }
  }
  if (ec)
    problems.push_back(
        fmt::format("{}: cannot list directory: {}", paths.dir.string(), ec.message()));

  // Program (a directory of .pte programs checks its programs after the shards),
  // read as one more task beside the shards; its problems are listed first.
  ProgramBuffer program;
  std::vector<std::string> program_problems;
  auto read_program = [&] {
    attempt(program_problems, [&] {
      auto file = open_inside(paths.dir, m.program.file, mname);
      ++report.files_checked;  // no other task touches the report
      if (file->size() != m.program.size) {
        program_problems.push_back(fmt::format("{}: size {} differs from the manifest's {}",
                                               file->name(), file->size(), m.program.size));
      }
      if (file->size() > Limits::max_program_bytes)
        fail_input("{}: program too large", file->name());
      auto bytes = file->read_range(0, file->size());
      if (to_hex(sha256(bytes)) != m.program.sha256) {
        program_problems.push_back(
            fmt::format("{}: SHA-256 differs from the manifest", file->name()));
      }
      program = read_program_buffer(std::move(bytes), file->name());
    });
  };

  if (options.progress != nullptr) {  // every shard file, then every tensor, is hashed once
    uint64_t total = 0;
    for (const auto& shard : m.shards) total += shard.size;
    for (const auto& entry : m.tensors) total += entry.second.nbytes;
    options.progress->set_hash_total(total);
  }
  // Shards: hash whole files in parallel, read their tables, check names, payloads and caps.
  std::vector<ShardContents> contents(m.shards.size());
  std::vector<std::vector<std::string>> per_shard(m.shards.size());
  std::vector<std::vector<std::string>> notes(m.shards.size());
  const size_t first_shard_task = programs ? 0 : 1;
  parallel_for(m.shards.size() + first_shard_task, effective_jobs(options.jobs), [&](size_t task) {
    if (task < first_shard_task) {
      read_program();
      return;
    }
    const size_t i = task - first_shard_task;
    const auto& s = m.shards[i];
    auto& out = per_shard[i];
    attempt(out, [&] {
      auto file = open_inside(paths.dir, s.file, mname);
      if (file->size() != s.size) {
        out.push_back(fmt::format("{}: size {} differs from the manifest's {}", file->name(),
                                  file->size(), s.size));
      }
      auto buffer = chunk_buffer(file->size());
      Sha256 hasher;
      for_each_chunk(ByteRange{file, 0, file->size()}, buffer, [&](std::span<const uint8_t> c) {
        hasher.update(c);
        if (options.progress != nullptr) options.progress->add_hashed(c.size());
      });
      auto hex = to_hex(hasher.finish());
      if (hex != s.sha256)
        out.push_back(
            fmt::format("{}: SHA-256 differs from the manifest (file changed)", file->name()));
      auto suffix = fmt::format("-{}{}", hex.substr(0, 16), ext);
      if (s.file.size() < suffix.size() ||
          s.file.compare(s.file.size() - suffix.size(), suffix.size(), suffix) != 0) {
        out.push_back(fmt::format("{}: name does not end in {} (content-addressed name)",
                                  file->name(), suffix));
      }
      auto& c = contents[i];
      if (ptd_format) {
        auto f = ptd::read_file(file);
        note_unreferenced_segments(f, notes[i]);
        for (const auto& seg : f.segments) c.payload += seg.size;
        c.tensors = std::move(f.tensors);
      } else {
        c.tensors = safetensors::read(file).tensors;
        for (const auto& [k, t] : c.tensors) c.payload += t.bytes.size;
      }
      c.readable = true;
      if (c.payload != s.payload_bytes) {
        out.push_back(fmt::format("{}: payload {} differs from the manifest's {}", file->name(),
                                  c.payload, s.payload_bytes));
      }
      if (m.max_shard_bytes) {
        uint64_t measured = m.cap_mode == "file" ? file->size() : c.payload;
        // --oversize own-shard: over the cap only alone (one stored tensor, its aliases).
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
          out.push_back(fmt::format("{}: {} {} bytes exceed the cap {}", file->name(),
                                    m.cap_mode == "file" ? "file of" : "payload of", measured,
                                    *m.max_shard_bytes));
        }
      }
      bool same_keys =
          c.tensors.size() == s.keys.size() &&
          std::equal(c.tensors.begin(), c.tensors.end(), s.keys.begin(),
                     [](const auto& entry, const std::string& key) { return entry.first == key; });
      if (!same_keys) {
        out.push_back(fmt::format(
            "{}: keys in the file differ from the manifest's list ({} in file, {} listed)",
            file->name(), c.tensors.size(), s.keys.size()));
      }
    });
  });
  problems.insert(problems.end(), program_problems.begin(), program_problems.end());
  for (auto& found : per_shard) problems.insert(problems.end(), found.begin(), found.end());
  for (auto& found : notes) report.notes.insert(report.notes.end(), found.begin(), found.end());
  report.files_checked += m.shards.size();

  // Tensors: each listed key readable where the manifest says, with matching layout and bytes.
  std::map<std::string, size_t> shard_index;
  for (size_t i = 0; i < m.shards.size(); ++i) shard_index[m.shards[i].file] = i;
  // The program's data, in key order: entries of the shards' tables (a
  // safetensors alias, which its file does not hold, as a copy of its owner's).
  std::vector<const TensorTable::value_type*> data;
  data.reserve(m.tensors.size());
  TensorTable alias_data;
  std::vector<const std::pair<const std::string, ManifestTensor>*> hashed;  // manifest entries
  std::vector<ByteRange> ranges;
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
      problems.push_back(fmt::format("{}: shard {} is not listed", where(), t.shard));
      continue;
    }
    const auto& c = contents[si->second];
    if (!c.readable) continue;
    const TensorTable::value_type* found = nullptr;
    if (auto it = cursors[si->second].find(key); it != c.tensors.end()) {
      found = &*it;
    } else if (!ptd_format && t.alias_of) {
      if (auto o = c.tensors.find(*t.alias_of); o != c.tensors.end())
        found = &*alias_data.emplace_hint(alias_data.end(), key, o->second);
    }
    if (found == nullptr) {
      problems.push_back(fmt::format("{}: not readable from {}", where(), t.shard));
      continue;
    }
    const TensorData& d = found->second;
    if (d.dtype != t.dtype || d.shape != t.shape || d.bytes.size != t.nbytes) {
      problems.push_back(
          fmt::format("{}: manifest says {} [{}] {} bytes but {} holds {} [{}] {} bytes", where(),
                      dtype_name(t.dtype), fmt::join(t.shape, ", "), t.nbytes, t.shard,
                      dtype_name(d.dtype), fmt::join(d.shape, ", "), d.bytes.size));
    }
    if (t.alias_of) {
      auto owner = m.tensors.find(*t.alias_of);
      if (owner == m.tensors.end() || owner->second.alias_of) {
        problems.push_back(
            fmt::format("{}: alias_of {} is not a stored owner", where(), quote(*t.alias_of)));
      } else if (owner->second.sha256 != t.sha256 || owner->second.shard != t.shard ||
                 !(key > *t.alias_of)) {
        problems.push_back(fmt::format("{}: alias_of {} disagrees (digest, shard or owner order)",
                                       where(), quote(*t.alias_of)));
      }
      if (t.is_mutable)
        problems.push_back(
            fmt::format("{}: state key is an alias (state is never deduplicated)", where()));
    }
    data.push_back(found);
    hashed.push_back(&entry);
    ranges.push_back(d.bytes);
  }
  {
    detail::ViewSet listed;
    listed.reserve(m.tensors.size());
    for (const auto& entry : m.tensors) listed.insert(entry.first);
    for (size_t i = 0; i < m.shards.size(); ++i) {
      for (const auto& [key, t] : contents[i].tensors) {
        if (!listed.contains(key)) {
          problems.push_back(fmt::format("{}: key {} in {} is not in the manifest", mname,
                                         quote(key), m.shards[i].file));
        }
      }
    }
  }
  // The program's own checks need only the program and the tensor table: run
  // them on one more thread while the tensors are hashed; their problems come last.
  std::vector<std::string> program_checks;
  std::exception_ptr program_checks_error;
  auto check_program = [&] {
    try {
      // Nothing reads `data` after this (it runs once, here or on its thread).
      check_graph_program(program.root(), m, TensorLookup(std::move(data)), mname, program_checks);
    } catch (...) {
      program_checks_error = std::current_exception();
    }
  };
  std::thread program_checker;
  const bool overlap =
      program && m.program.size >= kOverlapProgramBytes && effective_jobs(options.jobs) > 1;
  if (overlap) program_checker = std::thread(check_program);
  struct Join {
    std::thread& thread;
    ~Join() {
      if (thread.joinable()) thread.join();
    }
  } join{program_checker};
  auto digests = hash_ranges(ranges, options.jobs, options.progress);
  for (size_t i = 0; i < hashed.size(); ++i) {
    report.bytes_hashed += ranges[i].size;
    ++report.tensors_checked;
    if (digests[i] != hashed[i]->second.sha256) {
      problems.push_back(fmt::format("{}: tensor {}: bytes do not match the manifest's SHA-256",
                                     mname, quote(hashed[i]->first)));
    }
  }

  // A key in two shards: a loader given both refuses them, pack never writes it.
  const auto shard_keys = sorted_shard_keys(m);
  {
    const auto& keys = shard_keys;
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
      problems.push_back(fmt::format("{}: key {} is in two shards: {} and {}", mname,
                                     quote(later->key), m.shards[first->shard].file,
                                     m.shards[later->shard].file));
    }
  }
  if (programs) {
    auto needed =
        verify_program_entries(m, paths, shard_index, contents_tables(contents), options, report);
    // Every stored key belongs to some program: the manifest's lists are what
    // `pack DIR -o X.pte` restores from, so a key outside them would be lost.
    for (const auto& [key, t] : m.tensors) {
      if (!needed.count(key)) {
        problems.push_back(
            fmt::format("{}: key {} in {} is needed by no program", mname, quote(key), t.shard));
      }
    }
  }

  // Derived manifest fields (the reader checked the weight_map).
  uint64_t total = 0;
  for (const auto& s : m.shards) total += s.payload_bytes;
  if (total != m.total_size)
    problems.push_back(fmt::format("{}: metadata.total_size {} differs from the shards' payload {}",
                                   mname, m.total_size, total));
  if (!ptd_format) {
    attempt(problems, [&] {
      auto file = open_inside(paths.dir, "model.safetensors.index.json", mname);
      auto raw = file->read_range(0, std::min<uint64_t>(file->size(), Limits::max_header_bytes));
      auto expected_index = safetensors::index_json(total, weight_map_of(m, shard_keys));
      if (std::string(raw.begin(), raw.end()) != expected_index) {
        problems.push_back(
            fmt::format("{}: does not match the manifest's weight_map", file->name()));
      }
    });
  }
  if (!program) return;  // also every directory of .pte programs
  if (overlap) {
    program_checker.join();
  } else {
    check_program();
  }
  if (program_checks_error) std::rethrow_exception(program_checks_error);
  problems.insert(problems.end(), program_checks.begin(), program_checks.end());
}

}  // namespace ptepack
