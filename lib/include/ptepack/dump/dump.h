// `dump`: what an artifact holds, as terminal tables or stable JSON.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/io/progress.h"

namespace ptepack {

// dump --json: {"format": kDumpFormat, "version": kDumpVersion, ...} (schema/dump.schema.json).
inline constexpr const char* kDumpFormat = "ptepack.dump";
inline constexpr int kDumpVersion = 1;

enum class DumpSort { key, size, natural };

struct DumpOptions {
  bool json = false;
  bool graph = false;      // include every node of every method and subgraph
  bool graph_dot = false;  // instead of the dump, the methods as a Graphviz digraph
  unsigned jobs = 0;       // hashing threads (0: all cores)
  // Which tensors are listed (totals always cover the whole artifact).
  std::vector<std::string> keys;  // shell globs (fnmatch); any may match
  std::string method;             // keys this method uses
  std::string shard;              // keys stored in this shard file
  DumpSort sort = DumpSort::key;
  bool no_tensors = false;  // no per-tensor list
  bool summary = false;     // counts and bytes per method, dtype and shard; the `top` largest
  size_t top = 10;
  bool offsets = false;                         // each tensor's file and byte offset
  bool no_hash = false;                         // do not hash tensors that have no recorded digest
  size_t width = 0;                             // text columns to fit (0: print every cell whole)
  ProgressMode progress = ProgressMode::never;  // hashing progress (--progress)
  // A program's data files (PATH@DATA); empty: the same-stem default beside it.
  std::vector<std::filesystem::path> data = {};
};

// Opens any artifact (package, directory, manifest, program with its data,
// .ptd, .safetensors, index) and renders it. Throws Error on unreadable input.
// The text is handed to `write` in chunks as it is rendered (nothing is written when the
// artifact cannot be read: every check runs before the first chunk).
using TextOut = std::function<void(std::string_view)>;
void dump_artifact(const std::filesystem::path& path, const DumpOptions& options,
                   const TextOut& write);
// The same, collected into one string.
[[nodiscard]] std::string dump_artifact(const std::filesystem::path& path,
                                        const DumpOptions& options);

}  // namespace ptepack
