// The directory check's second step (every file and tensor hashed against the manifest,
// the program checks beside it), its two-step API, and `verify` of a directory.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <set>
#include <thread>
#include <tuple>

#include "base/parallel.h"
#include "graph/program_checks.h"
#include "hash/parallel_hash.h"
#include "ptepack/base/error.h"
#include "ptepack/core/shard_plan.h"
#include "ptepack/io/output_file.h"
#include "verify/directory_state.h"
#include "verify/verify_support.h"

namespace ptepack::detail {
namespace {

// The graph program against the manifest's state and mutable flags, then its
// structure and data (check_packed_program).
void check_graph_program(const nb::Program& program, const Manifest& m, const TensorLookup& data,
                         const std::string& mname, Diagnostics& problems) {
  const ProgramKeys keys(program);
  const auto state = keys.mutated();
  if (!std::equal(state.begin(), state.end(), m.state.begin(), m.state.end()))
    problems.add({ProblemId::manifest_inconsistent, mname,
                  fmt::format("{}: state list differs from the program's mutable keys", mname)});
  for (const auto& [key, t] : m.tensors) {
    if (t.is_mutable != keys.is_mutated(key)) {
      problems.add({ProblemId::manifest_inconsistent, mname,
                    fmt::format("{}: tensor {}: mutable flag disagrees with the program", mname,
                                quote(key))});
    }
  }
  record_lines(problems, ProblemId::program_rules, m.program.file, [&](auto& lines) {
    check_packed_program(program, keys, data, m.program.file, lines);
  });
}

// Each distinct tensor range once (an alias reads its owner's bytes), and for each tensor
// the place of its range in that list: every byte is hashed once.
struct DistinctRanges {
  std::vector<ByteRange> ranges;
  std::vector<size_t> slot;  // parallel to the tensors' ranges
};

DistinctRanges distinct_ranges(const std::vector<ByteRange>& ranges) {
  auto place = [&](size_t i) {
    return std::tuple(ranges[i].file.get(), ranges[i].offset, ranges[i].size);
  };
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return place(a) < place(b); });
  DistinctRanges out;
  out.slot.resize(ranges.size());
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || place(order[k]) != place(order[k - 1])) out.ranges.push_back(ranges[order[k]]);
    out.slot[order[k]] = out.ranges.size() - 1;
  }
  return out;
}

}  // namespace

void DirectoryCheck::State::start_program_checks() {
  if (!program) return;  // also every directory of .pte programs
  auto check = [this] {
    try {
      // Nothing reads `data` after this (it runs once, here or on its thread).
      Diagnostics found(ReadMode::collect, program_checks);
      check_graph_program(program.root(), m, TensorLookup(std::move(data)), mname, found);
    } catch (...) {
      program_checks_error = std::current_exception();
    }
  };
  if (m.program.size >= kOverlapProgramBytes && effective_jobs(options.jobs) > 1) {
    program_checker = std::thread(check);
  } else {
    check();
  }
}

// Every shard file and program file whole; with VerifyOptions::tensors, every distinct
// tensor range too. Without it a tensor's bytes are proven by its file's digest, and are
// hashed on their own only where that digest differs (to name the tensors that changed).
std::vector<ByteRange> DirectoryCheck::State::to_hash() const {
  std::vector<ByteRange> all;
  for (const auto& c : contents) {
    if (c.file) all.push_back({c.file, 0, c.file->size()});
  }
  for (const auto& f : program_files) {
    if (f) all.push_back({f, 0, f->size()});
  }
  if (options.tensors) {
    const auto tensors = distinct_ranges(ranges).ranges;
    all.insert(all.end(), tensors.begin(), tensors.end());
  }
  return all;
}

// One parallel pass over to_hash(), each result against the manifest; then the tensors.
void DirectoryCheck::State::hash_and_compare(Progress* progress) {
  const auto all = to_hash();
  const auto digests = hash_ranges(all, options.jobs, progress);
  std::set<const InputFile*> changed;  // files whose digest is not the recorded one
  size_t next = 0;
  for (size_t i = 0; i < contents.size(); ++i) {
    const auto& c = contents[i];
    if (!c.file) continue;
    const auto& s = m.shards[i];
    report.bytes_hashed += c.file->size();
    const auto hex = to_hex(digests[next++]);
    if (hex != s.sha256) {
      changed.insert(c.file.get());
      problems.add({ProblemId::file_changed, c.file->name(), digest_differs_line(c.file->name())});
    }
    const auto suffix = shard_file_name("", hex, m.shard_format);
    if (!s.file.ends_with(suffix)) {
      problems.add({ProblemId::shard_name, c.file->name(),
                    fmt::format("{}: name does not end in {} (content-addressed name)",
                                c.file->name(), suffix)});
    }
  }
  for (size_t p = 0; p < program_files.size(); ++p) {
    if (program_files[p]) compare_program(p, digests[next++], changed);
  }
  if (options.tensors) {
    compare_tensors(
        std::vector<Digest>(digests.begin() + static_cast<ptrdiff_t>(next), digests.end()),
        nullptr);
  } else {
    compare_tensors({}, &changed);
  }
}

// Program file p (of a directory of programs) against its record.
void DirectoryCheck::State::compare_program(size_t p, const Digest& digest,
                                            std::set<const InputFile*>& changed) {
  const auto& f = program_files[p];
  report.bytes_hashed += f->size();
  if (to_hex(digest) != m.programs[p].sha256) {
    changed.insert(f.get());
    problems.add({ProblemId::file_changed, f->name(), digest_differs_line(f->name())});
  }
}

// Each tensor's bytes against its recorded digest: `digests` are those of
// distinct_ranges(ranges) in order; when `changed` is given, only the tensors in those
// files are hashed here (the others are proven by their file's digest).
void DirectoryCheck::State::compare_tensors(std::vector<Digest> digests,
                                            const std::set<const InputFile*>* changed) {
  std::vector<size_t> picked;  // indices into hashed/ranges
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!changed || changed->count(ranges[i].file.get())) picked.push_back(i);
  }
  std::vector<ByteRange> own;
  for (size_t i : picked) own.push_back(ranges[i]);
  const auto tensors = distinct_ranges(own);
  if (changed) digests = hash_ranges(tensors.ranges, options.jobs);
  for (const auto& r : tensors.ranges) report.bytes_hashed += r.size;
  report.tensors_checked += ranges.size();
  for (size_t k = 0; k < picked.size(); ++k) {
    const auto& entry = *hashed[picked[k]];
    if (digests[tensors.slot[k]] != entry.second.sha256) {
      problems.add({ProblemId::tensor_bytes, (paths.dir / entry.second.shard).string(),
                    fmt::format("{}: tensor {}: bytes do not match the manifest's SHA-256", mname,
                                quote(entry.first))});
    }
  }
}

DirectoryCheck::DirectoryCheck(const fs::path& path, const VerifyOptions& options,
                               VerifyReport& report, ReadMode mode)
    : state_(std::make_unique<State>(path, options, report, mode)) {}

DirectoryCheck::~DirectoryCheck() = default;

const Manifest* DirectoryCheck::manifest() const {
  return state_->manifest_read ? &state_->m : nullptr;
}

InputFilePtr DirectoryCheck::shard_file(size_t i) const { return state_->contents.at(i).file; }

const TensorTable& DirectoryCheck::shard_tensors(size_t i) const {
  return state_->contents.at(i).tensors;
}

InputFilePtr DirectoryCheck::program_file(size_t p) const {
  return p < state_->program_files.size() ? state_->program_files[p] : nullptr;
}

void DirectoryCheck::free_tables() {
  auto& s = *state_;
  for (auto& c : s.contents) c.tensors = {};
  s.program = {};
  s.hashed = {};
  s.ranges = {};
  s.data = {};
  s.alias_data = {};
  s.pte_programs = {};
}

bool DirectoryCheck::structure() {
  auto& s = *state_;
  s.mname = s.paths.manifest.string();
  if (!attempt(s.problems, ProblemId::file_unreadable, s.mname, [&] {
        s.m = read_manifest_file(*open_inside(s.paths.dir, "manifest.json", s.paths.dir.string()),
                                 s.mname);
      })) {
    return false;
  }
  s.manifest_read = true;
  for (const auto& stray : stale_temporaries(s.paths.dir)) {
    s.report.notes.push_back(fmt::format(
        "{}: temporary left beside the output by an interrupted pack (the next pack to {} "
        "removes it)",
        stray.string(), s.paths.dir.string()));
  }
  s.ptd_format = s.m.shard_format == ShardFormat::ptd;
  s.programs = s.m.version == kManifestProgramsVersion;
  if (s.programs) s.report.kind = ArtifactKind::pte_directory;
  s.select_programs();
  s.files_present();
  if (!s.programs) s.read_program();
  s.read_shards();
  s.check_tensors();
  s.keys_in_two_shards();
  if (s.programs) s.check_program_entries();
  s.derived_fields();
  s.report_programs();
  return true;
}

uint64_t DirectoryCheck::hash_total() const {
  uint64_t total = 0;
  for (const auto& r : state_->to_hash()) total += r.size;
  return total;
}

void DirectoryCheck::program_bytes() {
  auto& s = *state_;
  std::vector<ByteRange> whole;
  for (const auto& f : s.program_files) {
    if (f) whole.push_back({f, 0, f->size()});
  }
  const auto digests = hash_ranges(whole, s.options.jobs);
  std::set<const InputFile*> changed;
  size_t next = 0;
  for (size_t p = 0; p < s.program_files.size(); ++p) {
    if (s.program_files[p]) s.compare_program(p, digests[next++], changed);
  }
}

void DirectoryCheck::bytes(Progress* progress) {
  auto& s = *state_;
  s.start_program_checks();
  s.hash_and_compare(progress);
  if (s.program_checker.joinable()) s.program_checker.join();
  if (s.program_checks_error) std::rethrow_exception(s.program_checks_error);
  s.problems.add_all(std::move(s.program_checks));
}

void raise_problems(const VerifyReport& report, std::optional<ErrorCode> code) {
  if (report.problems.empty()) return;
  std::string lines;
  for (const auto& p : report.problems) lines += (lines.empty() ? "" : "\n") + p.text;
  throw Error(code.value_or(problem_exit_code(report.problems.front().id)), lines);
}

bool has_checkable_manifest(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) && path.filename() != "manifest.json") return false;
  const auto paths = directory_paths(path);
  if (!fs::is_directory(paths.dir, ec)) return false;
  // A missing manifest is the check's to report (verify's line and identifier); one that
  // is there but not a regular file (a FIFO, a device) is left to the reader.
  return fs::is_regular_file(paths.manifest, ec) ||
         !fs::exists(fs::symlink_status(paths.manifest, ec));
}

}  // namespace ptepack::detail

namespace ptepack {

void verify_directory(const std::filesystem::path& path, const VerifyOptions& options,
                      VerifyReport& report) {
  detail::DirectoryCheck check(path, options, report);
  if (!check.structure()) return;
  if (options.progress != nullptr) options.progress->set_hash_total(check.hash_total());
  check.bytes(options.progress);
  detail::check_release_signature(path, *check.manifest(), options, report);
}

}  // namespace ptepack
