// `sign`: a packed directory signed in the OpenSSF Model Signing format (docs/signing.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/trust/signature.h"

namespace ptepack {

struct SignOptions {
  std::filesystem::path directory;  // a packed directory (or its manifest.json)
  std::filesystem::path private_key;
  KeyPassword password;
  unsigned jobs = 0;  // threads for verify's check (0: all cores)
};

struct SignReport {
  std::string signature;  // the bundle written
  std::string key_hint;
  size_t files = 0;                 // files signed, manifest.json included
  std::optional<uint64_t> release;  // the manifest's release number
};

// Loads the key (a usage error before anything is read), checks the directory
// whole as verify does (exit 1 with verify's problem lines when damaged), signs
// every file of it with the digests its manifest records (no file hashed twice)
// and writes DIR/model.sig atomically.
[[nodiscard]] SignReport sign_directory(const SignOptions& options);

// The bundle signing a release whose manifest text is `manifest_json` (the
// caller already wrote the release: pack --sign signs before its commit).
[[nodiscard]] std::string sign_manifest(const SigningKey& key, const std::string& model_name,
                                        const Manifest& manifest, std::string_view manifest_json);
// The same from the SHA-256 of that text (pack hashes it as it writes it).
[[nodiscard]] std::string sign_manifest(const SigningKey& key, const std::string& model_name,
                                        const Manifest& manifest, const Digest& manifest_sha256);

[[nodiscard]] std::string render_sign_text(const SignReport& report);
[[nodiscard]] std::string render_sign_json(const SignReport& report);

}  // namespace ptepack
