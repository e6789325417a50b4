// The ExecuTorch fixtures of tests/data/pte (tests/data/pte/SOURCES.md) and
// packed outputs made from them, for the tests of the layers that open artifacts.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/pack/pack.h"
#include "test_support.h"

namespace ptepack::test {

inline std::filesystem::path pte_fixture(const std::string& name) {
  return data_path("pte") / name;
}

// Packs `inputs` (paths) into `output` on one thread, quietly.
inline PackSummary pack_into(const std::vector<std::filesystem::path>& inputs,
                             const std::filesystem::path& output,
                             std::optional<uint64_t> cap = std::nullopt) {
  PackOptions options;
  for (const auto& input : inputs) options.inputs.push_back(parse_input_spec(input.string()));
  options.output = output;
  options.jobs = 1;
  options.sharding.max_shard_bytes = cap;
  return pack(options);
}

// The shard files a packed directory's manifest lists, in its order.
inline std::vector<std::string> listed_shards(const std::filesystem::path& dir) {
  auto manifest = parse_manifest(file_bytes(dir / "manifest.json"), "manifest.json");
  std::vector<std::string> files;
  for (const auto& s : manifest.shards) files.push_back(s.file);
  return files;
}

// A manifest recording every shard option at a value other than its default (the format
// stays .ptd, its default).
inline Manifest manifest_with_shard_options() {
  Manifest m;
  m.max_shard_bytes = 3000;
  m.cap_mode = CapMode::payload;
  m.oversize_own_shard = true;
  m.alignment = 64;
  m.shard_prefix = "w";
  m.placement_single = true;
  m.max_shard_tensors = 5;
  return m;
}

}  // namespace ptepack::test
