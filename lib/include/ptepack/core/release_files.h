// The files of a packed directory as a client downloads them, and the one
// definition of the download from one release to the next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/containers/manifest.h"

namespace ptepack {

struct ReleaseFile {
  std::string file;
  std::string sha256;  // hex
  uint64_t size = 0;
};

// Every file of a packed directory but its manifest, in name order, as the
// manifest records them: programs, shards, and for safetensors shards the
// model.safetensors.index.json the manifest determines (rebuilt, not read).
[[nodiscard]] std::vector<ReleaseFile> release_files(const Manifest& manifest);

// The index in manifest.programs of the program `name` names: its file name, or that name
// without `.pte`. The one rule for --program NAME (verify, files).
[[nodiscard]] std::optional<size_t> find_program(const Manifest& manifest, std::string_view name);

// What a device that runs `programs` (names as find_program takes them) needs besides the
// manifest and the signature: each program's file and every shard it loads, once each, in
// name order, as the manifest records them. Throws Error(usage) naming the manifest
// (`manifest_name`) and its programs when a name is not one of them, or when the manifest
// is not a directory of programs.
[[nodiscard]] std::vector<ReleaseFile> program_files(const Manifest& manifest,
                                                     const std::vector<std::string>& programs,
                                                     const std::string& manifest_name);

// NEW's files against OLD's. A file is unchanged when OLD has one with the same
// name and SHA-256; every other file of NEW is downloaded again.
struct FileDelta {
  std::vector<ReleaseFile> added;      // in NEW only (by name and digest)
  std::vector<ReleaseFile> removed;    // in OLD only
  std::vector<ReleaseFile> unchanged;  // in both
  uint64_t download_bytes = 0;         // the sizes of `added`
};
[[nodiscard]] FileDelta file_delta(const std::vector<ReleaseFile>& old_files,
                                   const std::vector<ReleaseFile>& new_files);

}  // namespace ptepack
