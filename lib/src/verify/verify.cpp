// verify: package and directory checks; every problem is collected, none is fatal to the report.
#include "ptepack/verify/verify.h"
#include "ptepack/verify/reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "artifact/input_rules.h"
#include "containers/flat_tensor.h"
#include "containers/safetensors.h"
#include "containers/zip.h"
#include "graph/program_checks.h"
#include "graph/validate.h"
#include "hash/parallel_hash.h"
#include "json/json_util.h"
#include "pte/data_checks.h"
#include "pte/dump_pte.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "verify/directory_check.h"
#include "verify/package_reader.h"
#include "verify/pte_program_reader.h"
#include "verify/verify_support.h"

namespace ptepack {
namespace fs = std::filesystem;

namespace {

// Duplicates that were not deduplicated: pack stores identical immutable tensors once.
void check_duplicates(const std::string& name, const TensorTable& data,
                      const std::map<std::string, std::string>& aliases, const ProgramKeys& keys,
                      const VerifyOptions& options, VerifyReport& report) {
  std::vector<std::string> stored;
  std::vector<ByteRange> ranges;
  for (const auto& [key, t] : data) {
    if (aliases.count(key)) continue;
    stored.push_back(key);
    ranges.push_back(t.bytes);
  }
  if (options.progress != nullptr) {
    uint64_t total = 0;
    for (const auto& r : ranges) total += r.size;
    options.progress->set_hash_total(total);
  }
  auto digests = hash_ranges(ranges, options.jobs, options.progress);
  std::map<std::tuple<Digest, int, Shape>, std::string> seen;
  for (size_t i = 0; i < stored.size(); ++i) {
    const auto& t = data.at(stored[i]);
    report.tensors_checked++;
    if (keys.is_mutated(stored[i])) continue;
    auto [it, fresh] =
        seen.emplace(std::make_tuple(digests[i], static_cast<int>(t.dtype), t.shape), stored[i]);
    if (!fresh) {
      report.problems.push_back(
          {ProblemId::package_layout, name,
           fmt::format("{}: keys {} and {} hold identical tensors but are both stored", name,
                       quote(it->second), quote(stored[i]))});
    }
  }
}

// The package reader, collecting, then the program rules and the dedup check.
void verify_package(const fs::path& path, const VerifyOptions& options, VerifyReport& report) {
  Diagnostics problems(ReadMode::collect, report.problems);
  auto file = InputFile::open(path);
  detail::PackageParts parts;
  if (!detail::read_package(file, problems, report, parts)) return;
  const auto name = file->name();
  const ProgramKeys keys(parts.program.root());
  record_lines(problems, ProblemId::program_rules, name, [&](auto& lines) {
    check_packed_program(parts.program.root(), keys, TensorLookup(parts.data), name, lines);
  });
  check_duplicates(name, parts.data, parts.aliases, keys, options, report);
}

// A .pte and the data files it is loaded with (PATH@DATA, or the same-stem
// .ptd when it has EXTERNAL tensors), each read on its own: every EXTERNAL key
// must be in exactly one of them with the layout the runtime demands.
void verify_pte(const InputFilePtr& file, const VerifyOptions& options, VerifyReport& report) {
  Diagnostics problems(ReadMode::collect, report.problems);
  detail::PteProgramRead read;
  const auto notes_before = report.notes.size();
  if (!detail::read_pte_program(file, options.data, true, options.jobs, true, problems, report,
                                read))
    return;
  const auto& program = read.program;
  report.files_checked = 1;
  if (read.note) {  // where its data came from, before what the record check noted
    report.notes.insert(report.notes.begin() + static_cast<std::ptrdiff_t>(notes_before),
                        fmt::format("{}: {}", file->name(), *read.note));
  }
  record_lines(problems, ProblemId::program_rules, file->name(),
               [&](auto& lines) { check_shared_state(program, file->name(), lines); });
  std::vector<DataFile> files;
  for (size_t i = 0; i < read.sources.size(); ++i) {
    if (!read.files[i]) continue;  // missing or unreadable: reported
    note_unreferenced_segments(*read.files[i], report.notes);
    ++report.files_checked;
    report.tensors_checked += read.files[i]->tensors.size();
    files.push_back({read.sources[i].string(), &read.files[i]->tensors});
  }
  const bool external =
      std::any_of(program.tensors.begin(), program.tensors.end(),
                  [](const auto& t) { return t.storage == pte::Storage::external; });
  if (external || !files.empty()) {
    record_lines(problems, ProblemId::program_rules, file->name(), [&](auto& lines) {
      check_program_data(program, file->name(), files,
                         read.named_keys.value_or(std::vector<std::string>{}), false, lines);
    });
  }
  // Its own constants and named data are read whole too (their bounds were checked), unless
  // the whole program was just hashed against its record.
  std::vector<ByteRange> own;
  for (const auto& [key, t] : own_tensors(program)) own.push_back(t.bytes);
  report.tensors_checked += own.size();
  if (read.checked_whole) return;
  (void)hash_ranges(own, options.jobs);
  for (const auto& r : own) report.bytes_hashed += r.size;
}

// The path and the data files given: present, and of a kind the artifact can take
// (usage errors and missing files are the command's failure, not the artifact's problems).
void check_inputs(const fs::path& path, const VerifyOptions& options) {
  std::error_code missing;
  if (!fs::exists(path, missing))
    fail(ErrorCode::io, "{}: no such file or directory", path.string());
  if (!fs::is_directory(path, missing) && !fs::is_regular_file(path, missing))
    fail(ErrorCode::io, "{}: not a regular file", path.string());
  refuse_missing_data(options.data);
  if (options.data.empty()) return;
  const auto kind = names_a_directory(path) ? ArtifactKind::graph_directory : identify(path);
  if (kind == ArtifactKind::graph_directory || kind == ArtifactKind::package) {
    refuse_data(path.string(), options.data);
  }
  if (kind == ArtifactKind::pte) {
    for (const auto& source : options.data) {
      if (identify(source) != ArtifactKind::ptd)
        fail(ErrorCode::usage, "{}: data for a .pte program must be .ptd files", source.string());
    }
  }
}

// The naming rules pack enforces on every program it reads, and each method's structure.
void check_program_methods(const Artifact& artifact, Diagnostics& problems) {
  const auto methods = access::methods(artifact.program.root());
  std::vector<std::string> rules;
  if (methods.empty()) rules.push_back(fmt::format("{}: program has no methods", artifact.name));
  std::set<std::string_view> names;
  for (const auto& method : methods) {
    const std::string_view name = access::name(method);
    if (auto problem = method_name_problem(name); !problem.empty())
      rules.push_back(fmt::format("{}: {}", artifact.name, problem));
    if (!names.insert(name).second) {
      rules.push_back(fmt::format("{}: duplicate method {}", artifact.name, quote(name)));
    }
  }
  for (const auto& method : methods) {
    auto found = validate_method_structure(method, artifact.name);
    rules.insert(rules.end(), found.begin(), found.end());
  }
  add_lines(problems, ProblemId::program_rules, artifact.name, std::move(rules));
}

// Other artifacts: everything the reader checks, and the graph rules for programs.
void verify_other(const fs::path& path, const VerifyOptions& options, VerifyReport& report) {
  auto artifact = load_artifact(path, options.data);
  report.kind = artifact.kind;
  report.files_checked = 1 + artifact.data_files.size();
  report.tensors_checked = artifact.data.size();
  if (artifact.kind == ArtifactKind::ptd) {
    note_unreferenced_segments(ptd::read_file(InputFile::open(path)), report.notes);
  }
  Diagnostics problems(ReadMode::collect, report.problems);
  if (artifact.program) check_program_methods(artifact, problems);
}

}  // namespace

void verify_directory(const fs::path& path, const VerifyOptions& options, VerifyReport& report);

VerifyReport verify_artifact(const fs::path& path, const VerifyOptions& options) {
  VerifyReport report;
  report.artifact = path.string();
  report.strict = options.strict;
  detail::check_release_options(options);
  check_inputs(path, options);
  try {
    std::error_code ec;
    auto filename = path.filename().string();
    // A directory's kind comes from its manifest, which the directory check reads.
    const auto kind = names_a_directory(path) ? ArtifactKind::graph_directory : identify(path);
    if (kind == ArtifactKind::graph_directory) {
      report.kind = ArtifactKind::graph_directory;
      verify_directory(path, options, report);
      return report;
    }
    if (!options.programs.empty()) {
      fail(ErrorCode::usage, "{}: --program applies to a directory of .pte programs",
           path.string());
    }
    if (!options.public_keys.empty()) {
      // DIR/prog.pte with keys is `verify DIR --program prog.pte`: the signed release's check
      // of the files that one program loads.
      if (fs::is_regular_file(path.parent_path() / "manifest.json", ec)) {
        VerifyOptions one = options;
        one.programs = {filename};
        report.kind = ArtifactKind::pte_directory;
        verify_directory(path.parent_path().empty() ? "." : path.parent_path(), one, report);
        return report;
      }
      fail(ErrorCode::usage,
           "{}: --public-key checks the signature of a packed directory (or of a program in "
           "one)",
           path.string());
    }
    if (kind == ArtifactKind::package) {
      report.kind = kind;
      verify_package(path, options, report);
      return report;
    }
    if (kind == ArtifactKind::pte) {
      report.kind = kind;
      verify_pte(InputFile::open(path), options, report);
      return report;
    }
    verify_other(path, options, report);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::usage) throw;  // the command's failure, not the artifact's
    report.problems.push_back({problem_of(e, ProblemId::file_unreadable), path.string(), e.what()});
  }
  return report;
}

}  // namespace ptepack
