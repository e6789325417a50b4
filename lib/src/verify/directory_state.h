// What the two steps of the directory check share: the manifest, the shard tables
// read back, the tensors to hash, the program checks' thread (directory_check.h).
#pragma once

#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ptepack/artifact/artifact.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/graph/program.h"
#include "ptepack/io/progress.h"
#include "ptepack/pte/pte.h"
#include "ptepack/tensors/tensor.h"
#include "verify/diagnostics.h"
#include "verify/directory_check.h"

namespace ptepack::detail {

namespace fs = std::filesystem;

// What one shard file holds, as read back.
struct ShardContents {
  bool readable = false;
  InputFilePtr file;
  TensorTable tensors;
  uint64_t payload = 0;
};

struct DirectoryCheck::State {
  State(const fs::path& path, const VerifyOptions& o, VerifyReport& r, ReadMode mode)
      : options(o), report(r), problems(mode, r.problems), paths(directory_paths(path)) {}

  const VerifyOptions& options;
  VerifyReport& report;
  Diagnostics problems;
  DirectoryPaths paths;
  std::string mname;
  Manifest m;
  bool manifest_read = false;
  bool ptd_format = true;
  bool programs = false;
  // verify --program (program_subset.cpp): the programs asked for and the shards they load;
  // everything when no subset was asked for.
  bool subset = false;
  std::vector<char> wanted_program;  // parallel to m.programs
  std::vector<char> wanted_shard;    // parallel to m.shards
  ProgramBuffer program;                // a program-graph directory's program
  std::vector<ShardContents> contents;  // parallel to m.shards
  std::map<std::string, size_t> shard_index;
  std::vector<InputFilePtr> program_files;  // a directory of programs: parallel to m.programs
  std::vector<std::optional<pte::Program>> pte_programs;  // each as read, for the reader
  // Tensors to hash: the manifest entry and the bytes found for it.
  std::vector<const std::pair<const std::string, ManifestTensor>*> hashed;
  std::vector<ByteRange> ranges;
  // The program checks run on a thread of their own while the bytes are hashed.
  std::vector<const TensorTable::value_type*> data;
  TensorTable alias_data;
  std::vector<Problem> program_checks;
  std::exception_ptr program_checks_error;
  std::thread program_checker;

  ~State() {
    if (program_checker.joinable()) program_checker.join();
  }

  void select_programs();
  // A file only programs not asked for need, and absent: nothing to check.
  [[nodiscard]] bool skipped(const std::string& file, bool wanted) const;
  void report_programs();
  void files_present();
  void read_program();
  void read_shards();
  void check_tensors();
  void check_unlisted_keys();
  void keys_in_two_shards();
  void check_program_entries();
  void derived_fields();
  void start_program_checks();
  [[nodiscard]] std::vector<ByteRange> to_hash() const;
  void hash_and_compare(Progress* progress);
  void compare_program(size_t p, const Digest& digest, std::set<const InputFile*>& changed);
  void compare_tensors(std::vector<Digest> digests, const std::set<const InputFile*>* changed);
};

}  // namespace ptepack::detail
