// The reader of packed directories hands on what its check read: the Artifact dump, diff
// and pack use is built here from the DirectoryCheck, so no file of the directory is read
// or hashed twice (docs/architecture.md, "Decisions taken once": how an artifact is read).
#include <fmt/format.h>

#include "ptepack/base/error.h"
#include "verify/directory_state.h"

namespace ptepack::detail {

namespace {

VerifyOptions reader_options(unsigned jobs) {
  VerifyOptions options;
  options.jobs = jobs;
  options.tensors = true;  // each tensor's digest is taken from the manifest
  return options;
}

// The tensors the manifest lists: each alias resolved to its owner's bytes, and every
// tensor given the digest the manifest records (the check proved it, or bytes() will).
void resolve_tensors(Artifact& a, const Manifest& m, const std::string& mname) {
  for (const auto& [key, t] : m.tensors) {
    if (a.data.count(key)) continue;
    if (!t.alias_of) fail_input("{}: tensor {} is in no shard", mname, quote(key));
    if (!a.data.count(*t.alias_of)) {
      fail_input("{}: tensor {} is an alias of {}, which is in no shard", mname, quote(key),
                 quote(*t.alias_of));
    }
    a.aliases.emplace(key, *t.alias_of);
  }
  for (const auto& [alias, owner] : a.aliases) a.data.emplace(alias, a.data.at(owner));
  for (const auto& [key, t] : m.tensors) {
    if (t.alias_of && !a.aliases.count(key)) a.aliases.emplace(key, *t.alias_of);
    a.data.at(key).expected_sha256 = t.sha256;
  }
}

}  // namespace

StrictDirectoryCheck::StrictDirectoryCheck(const std::filesystem::path& path, unsigned jobs)
    : options(reader_options(jobs)), check(path, options, report, ReadMode::strict) {
  check.structure();
}

void merge_data(TensorTable& into, TensorTable&& from, const std::string& source) {
  into.merge(from);
  if (!from.empty()) {
    fail_input("{}: key {} is also provided by another data file", source,
               quote(from.begin()->first));
  }
}

void DirectoryCheck::read_into(Artifact& a, ProgramForm form, bool bytes_to_come) {
  auto& s = *state_;
  if (!s.manifest_read) fail(ErrorCode::internal, "{}: read before its check", s.mname);
  a.root = s.paths.dir;
  a.kind = s.programs ? ArtifactKind::pte_directory : ArtifactKind::graph_directory;
  a.manifest = s.m;
  for (size_t p = 0; p < s.m.programs.size(); ++p) {
    const auto& entry = s.m.programs[p];
    if (!s.pte_programs.at(p)) fail(ErrorCode::internal, "{}: not read", entry.file);
    a.pte_programs.push_back({entry.file, std::move(*s.pte_programs[p]), entry.named_data});
    s.pte_programs[p].reset();
  }
  if (!s.programs) {
    a.program_file_bytes = s.m.program.size;
    if (bytes_to_come) {
      a.program_tree = unpack_program_kept(s.program);
    } else if (form == ProgramForm::tree) {
      a.program_tree = unpack_program(std::move(s.program));
    } else {
      a.program = std::move(s.program);
    }
  }
  for (size_t i = 0; i < s.m.shards.size(); ++i) {
    TensorTable table;
    if (bytes_to_come) {
      table = s.contents[i].tensors;
    } else {
      table = std::move(s.contents[i].tensors);
    }
    for (const auto& key : s.m.shards[i].stale) table.erase(key);  // not part of this release
    merge_data(a.data, std::move(table), s.contents[i].file->name());
  }
  resolve_tensors(a, s.m, s.mname);
}

}  // namespace ptepack::detail
