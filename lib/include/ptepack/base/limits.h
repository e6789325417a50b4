// Limits every reader enforces on untrusted input, in one place.
#pragma once

#include <cstdint>

namespace ptepack {

// Limits every reader enforces on untrusted input.
struct Limits {
  static constexpr uint64_t max_key_length = 4096;
  static constexpr uint64_t max_keys = 10'000'000;
  static constexpr uint64_t max_rank = 32;
  static constexpr uint64_t max_header_bytes = 256ULL << 20;  // JSON/flatbuffer headers
  static constexpr uint64_t max_program_bytes = 1ULL << 30;   // a .ptg flatbuffer
  // A directory's manifest.json: about 470 bytes per tensor, so over 2,000,000 tensors.
  static constexpr uint64_t max_manifest_bytes = 1ULL << 30;
  // --alignment: a .ptd segment boundary up to 64 KiB (ARM64's largest page).
  static constexpr uint64_t max_alignment = 64 * 1024;
  static constexpr int max_graph_depth = 32;  // nested GraphArg subgraphs
  static constexpr int max_json_depth = 64;
};

}  // namespace ptepack
