// The files of a packed directory as a client downloads them, and the one
// definition of the download from one release to the next.
#pragma once

#include <cstdint>
#include <string>
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
