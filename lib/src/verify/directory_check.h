// verify for packed directories, in two steps: the structure (manifest, files,
// tables, programs), then the bytes (shard files, programs and tensors against
// the manifest's digests, hashed in one parallel pass). `verify` runs both;
// `pack` runs the first before it reads a directory input and the second
// where it would hash that input's tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/verify/verify.h"
#include "verify/diagnostics.h"

namespace ptepack::detail {

// Throws Error whose message is the report's problems, one line each (sign refuses a
// damaged directory with every line verify prints), its code `code` or else the first
// problem's problem_exit_code.
void raise_problems(const VerifyReport& report, std::optional<ErrorCode> code = std::nullopt);

// True when `path` is a directory (or a manifest.json in one) whose manifest is a regular
// file or missing: what the reader checks (a missing manifest is then refused with
// verify's line, file_missing). A manifest that is there but not a
// regular file (a FIFO, a device) is left to the reader, which refuses it as I/O (exit 5)
// before any check, as it refuses any input that cannot be read as a file.
bool has_checkable_manifest(const std::filesystem::path& path);

// A program its directory's manifest lists (verify DIR/prog.pte, the check a device makes
// on the one program it runs): the program file and every shard listed for it against the
// size and SHA-256 the manifest records, each file hashed once (with `hash` false, the
// sizes only). Problems go to `problems`, a note to the report; returns the listed shards that are
// missing (reported here).
std::set<std::filesystem::path> check_against_record(const InputFilePtr& program,
                                                     const DefaultData::Record& record,
                                                     unsigned jobs, bool hash,
                                                     Diagnostics& problems, VerifyReport& report);

// Signed releases (verify_signature.cpp): options that need --public-key refused
// without it (usage), and a checked directory's signature and release number.
void check_release_options(const VerifyOptions& options);
void check_release_signature(const std::filesystem::path& path, const Manifest& manifest,
                             const VerifyOptions& options, VerifyReport& report);

class DirectoryCheck {
 public:
  // In ReadMode::strict the first problem is raised where it is found (ProblemError).
  DirectoryCheck(const std::filesystem::path& path, const VerifyOptions& options,
                 VerifyReport& report, ReadMode mode = ReadMode::collect);
  ~DirectoryCheck();
  DirectoryCheck(const DirectoryCheck&) = delete;
  DirectoryCheck& operator=(const DirectoryCheck&) = delete;

  // Everything that needs no hashing of shard or program bytes. Problems go to
  // the report; returns false when the manifest itself could not be read.
  bool structure();
  // Bytes bytes() will hash, for a progress total. After structure().
  [[nodiscard]] uint64_t hash_total() const;
  // Hashes every shard file, every program file of a directory of programs and
  // every tensor (bytes hashed reported to `progress` when set), and compares
  // them with the manifest; then the program checks' problems. Only after
  // structure() returned true.
  void bytes(Progress* progress);
  // After structure(), instead of bytes(): the program files of a directory of programs
  // alone, hashed and compared with the manifest (pack --base, which copies the shards it
  // keeps while it hashes them).
  void program_bytes();
  // The manifest read by structure(), or nullptr when it could not be read.
  [[nodiscard]] const Manifest* manifest() const;
  // After structure(): shard i of the manifest as it was opened and read (a
  // null file and no tensors when it could not be), and program p of a
  // directory of programs as it was opened. For pack --base, which reads OLD
  // through this check once.
  [[nodiscard]] InputFilePtr shard_file(size_t i) const;
  [[nodiscard]] const TensorTable& shard_tensors(size_t i) const;
  [[nodiscard]] InputFilePtr program_file(size_t p) const;
  // After structure(), when bytes() will not run (pack --base): frees what
  // only bytes() reads (the shards' tensor tables, the program, the tensors
  // to hash). manifest(), shard_file() and program_file() stay.
  void free_tables();
  // After structure() (and bytes(), where it runs): the directory as the Artifact every
  // command uses, built from what the check read (directory_artifact.cpp), so no file is
  // read or hashed twice. With `bytes_to_come` (bytes() runs later: pack), the program
  // graph is handed on as an object tree (ProgramForm::tree, whatever `form` says) and the
  // tables as copies, since bytes() still reads them.
  void read_into(Artifact& artifact, ProgramForm form, bool bytes_to_come);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A packed directory as the reader opens it (load_artifact, and pack's directory inputs,
// which run the byte step later): its check in strict mode, each tensor's digest taken from
// the manifest (VerifyOptions::tensors), with the options and the report the check reads and
// writes. Its structure is checked on construction (the first problem raised).
struct StrictDirectoryCheck {
  StrictDirectoryCheck(const std::filesystem::path& path, unsigned jobs);
  VerifyOptions options;
  VerifyReport report;
  DirectoryCheck check;
};

// Moves every entry of `from` into `into` (nodes relinked, keys not copied); a key both hold
// is refused (invalid input), naming `source` and the smallest such key: a key two data files
// of one artifact provide.
void merge_data(TensorTable& into, TensorTable&& from, const std::string& source);

}  // namespace ptepack::detail
