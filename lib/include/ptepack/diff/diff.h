// `diff`: what differs between two artifacts of any kinds ptepack reads, by content.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/model/tensor.h"

namespace ptepack {

// One side of a changed key.
struct KeyState {
  DType dtype = DType::BYTE;
  Shape shape;
  uint64_t nbytes = 0;
  std::string sha256;
};

struct KeyChange {
  std::string key;
  std::vector<std::string> changes;  // any of "bytes", "dtype", "shape", in that order
  KeyState a;
  KeyState b;
};

struct ShardFile {
  std::string file;
  uint64_t size = 0;
};

// Shard files of two directories, by name and digest (names are content-addressed).
struct ShardDiff {
  std::vector<ShardFile> added;      // in B only: what a client downloads again
  std::vector<ShardFile> removed;    // in A only
  std::vector<ShardFile> unchanged;  // in both with the same digest
  uint64_t download_bytes = 0;       // sum of added sizes
};

struct ArtifactDiff {
  std::string a;
  std::string b;
  std::vector<std::string> methods_added;
  std::vector<std::string> methods_removed;
  std::vector<std::string> methods_changed;  // same name, different graph or bindings
  std::vector<std::string> keys_added;
  std::vector<std::string> keys_removed;
  std::vector<KeyChange> keys_changed;
  std::vector<std::string> state_added;
  std::vector<std::string> state_removed;
  std::optional<ShardDiff> shards;  // both sides directories

  // Same methods, keys (bytes, dtype, shape) and state; shard layout does not count.
  [[nodiscard]] bool equivalent() const;
};

// Reads both artifacts (a directory's digests come from its manifest; anything else is
// hashed with `jobs` threads) and compares them. Throws Error when either cannot be read.
[[nodiscard]] ArtifactDiff diff_artifacts(const std::filesystem::path& a,
                                          const std::filesystem::path& b, unsigned jobs);

[[nodiscard]] std::string render_diff_text(const ArtifactDiff& diff);
// {"format": "ptepack.diff", "version": 1, ...}: schema/diff.schema.json.
[[nodiscard]] std::string render_diff_json(const ArtifactDiff& diff);

}  // namespace ptepack
