// `dump`: what an artifact holds, as terminal tables or stable JSON.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace ptepack {

struct DumpOptions {
  bool json = false;
  bool graph = false;  // include every node of every method and subgraph
  unsigned jobs = 0;   // hashing threads (0: all cores)
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
