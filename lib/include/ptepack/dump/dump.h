// `dump`: what an artifact holds, as terminal tables or stable JSON.
#pragma once

#include <filesystem>
#include <string>

namespace ptepack {

struct DumpOptions {
  bool json = false;
  bool graph = false;  // include every node of every method and subgraph
  unsigned jobs = 0;   // hashing threads (0: all cores)
};

// Opens any artifact (package, directory, manifest, program with its data,
// .ptd, .safetensors, index) and renders it. Throws Error on unreadable input.
[[nodiscard]] std::string dump_artifact(const std::filesystem::path& path,
                                        const DumpOptions& options);

}  // namespace ptepack
