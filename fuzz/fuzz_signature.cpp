// libFuzzer target: the OMS bundle reader (verify_release_signature, and bundle_key_hint,
// which never throws) on hostile bundles, with a fixed P-256 key; accepted bundles must list
// safe, distinct file names and carry the hint bundle_key_hint reads.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "ptepack/trust/signature.h"

namespace {

// The public half of the key that signed corpus/signature/valid.sig (its private half is not
// kept: a new valid signature needs a new key and a new seed).
constexpr std::string_view kPublicKey =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEea3y4q/PXz+6n/MWfHqr+C4eoWR3\n"
    "EGAg4HIVevv9tot3Hzx5cNSo+nj1O5v8KP5iws1dtMydoR19reVrfXfp7A==\n"
    "-----END PUBLIC KEY-----\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ptepack::VerifyingKey> keys = [] {
    std::vector<ptepack::VerifyingKey> k;
    k.push_back(ptepack::VerifyingKey::parse(kPublicKey, "fuzz/key.pub"));
    return k;
  }();
  const std::string_view bundle(reinterpret_cast<const char*>(data), size);
  // The hint is read without verifying: it never throws, whatever the bytes.
  const std::string hint = ptepack::bundle_key_hint(bundle);
  try {
    auto signed_release = ptepack::verify_release_signature(bundle, keys, "fuzz/model.sig");
    if (signed_release.key_hint != hint) {
      ptepack::fuzz::invariant_failed("an accepted signature's hint is not the bundle's");
    }
    std::set<std::string> names;
    for (const auto& f : signed_release.files) {
      if (f.name.empty() || f.name.front() == '/' || !names.insert(f.name).second) {
        ptepack::fuzz::invariant_failed("an accepted signature lists an unsafe or repeated name");
      }
    }
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
  }
  return 0;
}
