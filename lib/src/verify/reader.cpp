// The one reader of every artifact kind (docs/architecture.md, "Decisions taken once": how an
// artifact is read): load_artifact switches on identify(); a packed directory is read through its
// check (DirectoryCheck, strict) and a program of one is checked against its record first.
#include <fmt/format.h>

#include "artifact/input_rules.h"
#include "containers/flat_tensor.h"
#include "containers/safetensors.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/verify/reader.h"
#include "verify/diagnostics.h"
#include "verify/directory_check.h"
#include "verify/package_reader.h"
#include "verify/pte_program_reader.h"

namespace ptepack {
namespace fs = std::filesystem;

namespace {

void keep_program(Artifact& a, ProgramBuffer buffer, ProgramForm form) {
  if (form == ProgramForm::tree) {
    a.program_tree = unpack_program(std::move(buffer));
  } else {
    a.program = std::move(buffer);
  }
}

// Runs read(), which reads `file` as its format: a file that does not read as it (invalid
// input) is verify's problem for it too (file_unreadable), raised with its identifier. The
// files read here are the ones the command was given (the input, its @DATA, the data beside
// it), so one that cannot be opened is the command's failure (I/O, no identifier), as verify
// reports it; usage errors, conflicts and bugs go on as they are too.
template <typename Read>
auto reading(const fs::path& file, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const ProblemError&) {
    throw;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_input) throw;
    throw ProblemError({ProblemId::file_unreadable, file.string(), e.what()});
  }
}

// A package, by the package reader (strict).
void load_package(Artifact& a, ProgramForm form) {
  VerifyReport report;
  Diagnostics problems(ReadMode::strict, report.problems);
  detail::PackageParts parts;
  (void)detail::read_package(InputFile::open(a.root), problems, report, parts);
  a.checked = std::move(report.notes);
  a.program_file_bytes = parts.program_bytes;
  a.data = std::move(parts.data);
  a.aliases = std::move(parts.aliases);
  keep_program(a, std::move(parts.program), form);
}

// A packed directory, through its check: the first problem verify would list is raised
// (strict), and the Artifact is built from what the check read (DirectoryCheck::read_into).
void load_directory(Artifact& a, ProgramForm form, const ReadOptions& read) {
  if (!detail::has_checkable_manifest(a.root)) {
    // A manifest that is there but not a regular file: refused as I/O, as any input that
    // cannot be read as a file.
    const auto manifest = directory_paths(a.root).manifest;
    (void)read_manifest_file(*InputFile::open(manifest), manifest.string());
    fail(ErrorCode::io, "{}: not a regular file", manifest.string());
  }
  detail::StrictDirectoryCheck opened(a.root, read.jobs);
  if (read.hash) {
    opened.check.bytes(nullptr);
  } else {
    opened.check.program_bytes();  // the programs, small, are hashed as a program graph's is
    opened.report.notes.push_back(fmt::format(
        "{}: shard files not hashed (--no-hash): their bytes were not checked against the "
        "manifest",
        a.root.string()));
  }
  opened.check.read_into(a, form, false);
  a.checked = std::move(opened.report.notes);
}

// A .pte program with its data files, by the .pte reader (strict): a program its
// directory's manifest lists is checked against that record before its shards are read.
void load_pte(Artifact& a, const fs::path& path, const std::vector<fs::path>& data_paths,
              bool use_default_data, const ReadOptions& read) {
  a.kind = ArtifactKind::pte;
  VerifyReport report;
  Diagnostics problems(ReadMode::strict, report.problems);
  detail::PteProgramRead program;
  (void)detail::read_pte_program(InputFile::open(path), data_paths, use_default_data, read.jobs,
                                 read.hash, problems, report, program);
  if (program.note) a.notes.push_back(std::move(*program.note));
  a.checked = std::move(report.notes);
  for (size_t i = 0; i < program.sources.size(); ++i) {
    if (!program.files[i]) fail(ErrorCode::internal, "{}: not read", program.sources[i].string());
    detail::merge_data(a.data, std::move(program.files[i]->tensors), program.sources[i].string());
    a.data_files.push_back(program.sources[i].string());
  }
  a.pte_programs.push_back(
      {path.filename().string(), std::move(program.program), std::move(program.named_keys)});
}

}  // namespace

Artifact load_artifact(const fs::path& path, const std::vector<fs::path>& data_paths,
                       bool use_default_data, ProgramForm form, const ReadOptions& read) {
  refuse_missing_data(data_paths);
  Artifact a;
  a.name = path.string();
  a.root = path;
  // A directory's kind comes from its manifest, which its check reads.
  const auto kind = names_a_directory(path) ? ArtifactKind::graph_directory : identify(path);
  auto no_data = [&] { refuse_data(a.name, data_paths); };
  switch (kind) {
    case ArtifactKind::graph_directory:
    case ArtifactKind::pte_directory:
      no_data();
      load_directory(a, form, read);
      return a;
    case ArtifactKind::safetensors_index:
      a.kind = kind;
      a.data = reading(path, [&] { return safetensors::read_index(path); });
      return a;
    case ArtifactKind::package:
      no_data();
      a.kind = kind;
      load_package(a, form);
      return a;
    case ArtifactKind::ptd:
      a.kind = kind;
      a.data = reading(path, [&] { return ptd::read_file(InputFile::open(path)).tensors; });
      return a;
    case ArtifactKind::safetensors:
      a.kind = kind;
      a.data = reading(path, [&] { return safetensors::read(InputFile::open(path)).tensors; });
      return a;
    case ArtifactKind::pte:
      load_pte(a, path, data_paths, use_default_data, read);
      return a;
    case ArtifactKind::graph:
      break;
  }
  a.kind = ArtifactKind::graph;
  keep_program(a,
               reading(path, [&] { return read_program_file_buffer(path, &a.program_file_bytes); }),
               form);
  auto sources =
      !data_paths.empty() || !use_default_data ? data_paths : default_data(path, nullptr).files;
  for (const auto& source : sources) {
    detail::merge_data(a.data, reading(source, [&] { return load_data_file(source); }),
                       source.string());
    a.data_files.push_back(source.string());
  }
  return a;
}

}  // namespace ptepack
