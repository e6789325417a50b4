// `verify`: re-reads an artifact and checks everything `pack` guarantees.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/core/release_files.h"
#include "ptepack/hash/sha256.h"

#include "ptepack/io/progress.h"

namespace ptepack {

struct VerifyOptions {
  unsigned jobs = 0;             // hashing threads (0: all cores)
  bool strict = false;           // notes count as problems
  // A packed directory: also hash each tensor's bytes against its recorded SHA-256. Without
  // it every file is hashed once and its digest proves the tensors in it; a tensor is then
  // hashed on its own only when its file's digest differs, to name what changed.
  bool tensors = false;
  Progress* progress = nullptr;  // bytes hashed are reported here when set
  // A program's data files (PATH@DATA); empty: the same-stem default beside it.
  std::vector<std::filesystem::path> data = {};
  // Signed releases (docs/signing.md): a packed directory's signature is checked
  // against these public keys (any one may have signed it); the bundle is
  // `signature`, default DIR/model.sig. A release number at most `newer_than`,
  // or under `min_release`, is a problem (rollback).
  std::vector<std::filesystem::path> public_keys = {};
  std::optional<std::filesystem::path> signature = {};
  std::optional<uint64_t> newer_than = {};
  std::optional<uint64_t> min_release = {};
  // A directory of programs: only these programs (manifest file names) and the files they
  // load must be present; every file present is still checked (verify --program).
  std::vector<std::string> programs = {};
};

// What verify found of a release's signature.
struct SignatureReport {
  std::string file;      // the bundle
  bool checked = false;  // public keys were given
  bool valid = false;    // checked, signed by one of them, and every file as signed
  std::string key_hint;  // the bundle's key hint
  std::string key;       // the public key file that verified it
};

// What kind of problem verify found. Each kind has a stable identifier
// (problem_id_name; the list and its meanings in docs/problems.md): never
// renamed, never reused for another kind; new kinds are added at the end.
enum class ProblemId {
  file_unreadable,        // a file does not read as its format (truncated, bad header, ...)
  file_missing,           // a file the artifact lists is absent or not a regular file
  file_stray,             // a file in a packed directory that its manifest does not list
  file_changed,           // a file's size, SHA-256 or CRC-32 differs from its record
  shard_name,             // a shard's name breaks the naming rule (prefix, content address)
  shard_contents,         // a shard's keys, layouts or alignment differ from the manifest's
  tensor_bytes,           // a tensor's bytes do not match its recorded SHA-256
  manifest_inconsistent,  // the manifest disagrees with itself or with its programs
  package_layout,         // a .ptn package's members or aliases break the package rules
  program_rules,          // a program breaks a structural rule, or its data disagrees with it
  signature_missing,      // keys were given and the release carries no signature
  signature_invalid,      // the signature does not verify, or signs other files
  release_rollback,       // the release number is not newer than required
};
[[nodiscard]] std::string_view problem_id_name(ProblemId id);
// The one outcome of a problem for the commands that read an artifact to use it
// (dump, diff, pack, as input and as --base; docs/problems.md): a file that is not
// there is I/O (exit 5), any other damage invalid input (exit 3); the signature's
// problems, which only verify finds, exit 1. verify itself exits 1 for any problem.
[[nodiscard]] ErrorCode problem_exit_code(ProblemId id);

struct Problem {
  ProblemId id;
  std::string file;  // the file it is in (a tensor's: its shard)
  std::string text;  // one line, naming the file (and the key)
};

// A problem raised by a strict reader (dump, diff, pack; docs/architecture.md, "One reader
// per kind"): verify's line for it, its problem_exit_code, and its identifier, which
// `--json`'s error document carries.
class ProblemError : public Error {
 public:
  explicit ProblemError(const Problem& problem)
      : Error(problem_exit_code(problem.id), problem.text), id_(problem.id) {}
  [[nodiscard]] ProblemId id() const noexcept { return id_; }

 private:
  ProblemId id_;
};

// A program verify --program checked: its file and the shards it loads.
struct ProgramCheck {
  std::string file;
  uint64_t files = 0;  // the program file and its shards
  uint64_t bytes = 0;  // their sizes
};

struct VerifyReport {
  std::string artifact;
  ArtifactKind kind = ArtifactKind::graph;  // its name: artifact_kind_name
  std::vector<Problem> problems;  // in the order found; empty means the artifact is whole
  // What ptepack itself would have done differently in a well-formed artifact
  // (alignment of a foreign .ptn, an unreferenced .ptd segment).
  std::vector<std::string> notes;
  bool strict = false;
  uint64_t files_checked = 0;
  uint64_t tensors_checked = 0;
  uint64_t bytes_hashed = 0;
  std::optional<SignatureReport> signature;  // a directory with a signature, or keys given
  std::optional<uint64_t> release;           // the manifest's release number
  // The bounds the release number was checked against (--newer-than, --min-release).
  std::optional<uint64_t> newer_than;
  std::optional<uint64_t> min_release;
  std::vector<ProgramCheck> programs;  // verify --program: the programs checked
  [[nodiscard]] bool ok() const { return problems.empty() && (!strict || notes.empty()); }
};

// Never throws for a bad artifact: every problem found is listed in the
// report. Throws Error (io) only when `path` does not exist.
[[nodiscard]] VerifyReport verify_artifact(const std::filesystem::path& path,
                                           const VerifyOptions& options);

// The files of a packed directory a signature lists: every file its manifest
// names, with the digests it records (which verify proves), and manifest.json
// itself with `manifest_sha256`.
struct SignedFile;
struct Manifest;
[[nodiscard]] std::vector<SignedFile> release_signed_files(const Manifest& manifest,
                                                           const Digest& manifest_sha256);

// `ptepack files DIR --program NAME...`: the files a device that runs those programs
// (every program when none is named) downloads from a directory of programs, relative to
// DIR: each program, the shards it loads, manifest.json and, when DIR has one, model.sig;
// sizes and digests from the manifest, read from disk for manifest.json and model.sig.
// Throws Error (usage: a name that is no program, not a directory of programs; io; input).
struct DeviceFiles {
  std::string directory;
  std::vector<std::string> programs;  // the manifest's file names of the programs
  std::vector<ReleaseFile> files;     // in name order
};
[[nodiscard]] DeviceFiles device_files(const std::filesystem::path& dir,
                                       const std::vector<std::string>& programs);
[[nodiscard]] std::string render_files_text(const DeviceFiles& files);
[[nodiscard]] std::string render_files_json(const DeviceFiles& files);

[[nodiscard]] std::string render_verify_text(const VerifyReport& report);
[[nodiscard]] std::string render_verify_json(const VerifyReport& report);

}  // namespace ptepack
