// libFuzzer target: the strict manifest.json reader, and the writer's text read back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "ptepack/containers/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptepack::Manifest manifest;
  try {
    manifest = ptepack::parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "fuzz/manifest.json");
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  // The writer's text of an accepted manifest must be accepted and stable.
  const std::string text = ptepack::manifest_to_json(manifest);
  try {
    auto again = ptepack::parse_manifest(text, "fuzz/rewritten.json");
    if (ptepack::manifest_to_json(again) != text) {
      ptepack::fuzz::invariant_failed("manifest round trip changed the text");
    }
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::invariant_failed(std::string("rewritten manifest does not read back: ") +
                                    e.what());
  }
  return 0;
}
