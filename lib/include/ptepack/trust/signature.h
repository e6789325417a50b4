// Signed releases in the OpenSSF Model Signing format (OMS v1.0, key-based, as
// sigstore/model-transparency's `model_signing` writes and verifies them):
// a Sigstore bundle holding a DSSE envelope whose in-toto payload lists every
// file of a release with its SHA-256 (docs/signing.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/hash/sha256.h"

namespace ptepack {

// The signature's file name inside a release, and the names every verifier
// skips (the signature and git's files), as model_signing's defaults.
inline constexpr std::string_view kSignatureFileName = "model.sig";
[[nodiscard]] const std::vector<std::string>& default_ignore_paths();
// True when a directory entry of that name is skipped when a release is signed
// or verified (the signature and git's files).
[[nodiscard]] bool is_ignored_name(std::string_view name);

// One file of a release: its path relative to the release directory ('/'
// between components) and its SHA-256.
struct SignedFile {
  std::string name;
  Digest sha256{};
};

// Where the passphrase of an encrypted private key comes from: never argv.
struct KeyPassword {
  std::optional<std::filesystem::path> file;  // its first line
  std::optional<std::string> environment;     // the name of a variable holding it
};

// An elliptic-curve key on P-256, P-384 or P-521 (signed with SHA-256, -384, -512).
// Anything else, and a public key where a private one is needed (or the
// reverse), is a usage error (exit 2) naming the file. The key is never printed.
class SigningKey {
 public:
  static SigningKey load(const std::filesystem::path& pem, const KeyPassword& password = {});
  SigningKey(SigningKey&&) noexcept;
  SigningKey& operator=(SigningKey&&) noexcept;
  ~SigningKey();
  // Hex SHA-256 of the public key's SubjectPublicKeyInfo as OpenSSL writes it in
  // PEM (64 columns, LF): the bundle's verificationMaterial.publicKey.hint.
  [[nodiscard]] const std::string& hint() const;
  [[nodiscard]] std::string sign(std::string_view message) const;  // DER ECDSA signature

 private:
  struct Impl;
  explicit SigningKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class VerifyingKey {
 public:
  static VerifyingKey load(const std::filesystem::path& pem);
  // The same from PEM text held in memory (a key a device compiles in); `name` for messages.
  static VerifyingKey parse(std::string_view pem, const std::string& name);
  VerifyingKey(VerifyingKey&&) noexcept;
  VerifyingKey& operator=(VerifyingKey&&) noexcept;
  ~VerifyingKey();
  [[nodiscard]] const std::string& hint() const;
  [[nodiscard]] const std::string& name() const;  // the file it came from
  [[nodiscard]] bool verify(std::string_view message, std::string_view der_signature) const;

 private:
  struct Impl;
  explicit VerifyingKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The bundle (JSON text) signing `files` of a release named `model_name` (the
// directory's name: informative only). Files are sorted by path component.
[[nodiscard]] std::string sign_release(const SigningKey& key, const std::string& model_name,
                                       std::vector<SignedFile> files);

// What a verified bundle signed.
struct SignedRelease {
  std::string model_name;
  std::vector<SignedFile> files;          // as the payload lists them
  std::vector<std::string> ignore_paths;  // the payload's serialization.ignore_paths
  std::string key_hint;                   // the bundle's hint ("" when it has none)
  size_t key = 0;                         // index into the keys that verified it
};

// Reads a bundle (strictly: limits, no unknown fields, no duplicate keys) and
// checks that one of `keys` signed its payload and that the payload is a
// consistent OMS v1.0 file manifest. Throws Error(verify_failed) "<context>: ..."
// when it is not.
// The key hint a bundle names (verificationMaterial.publicKey.hint), read
// without verifying anything: "" when the bundle has none or cannot be read.
// For reports of a signature that failed to verify.
[[nodiscard]] std::string bundle_key_hint(std::string_view bundle);

[[nodiscard]] SignedRelease verify_release_signature(std::string_view bundle,
                                                     const std::vector<VerifyingKey>& keys,
                                                     const std::string& context);

// A signed release against the files it should be: the directory's files (git
// names and the signature skipped) with their digests. One problem line per
// file missing from either side or with another digest, and per ignore path a
// foreign signature adds beyond the signature and git's names.
[[nodiscard]] std::vector<std::string> compare_signed_files(const SignedRelease& signed_release,
                                                            const std::vector<SignedFile>& actual,
                                                            const std::string& context);

// Limits of the bundle reader.
inline constexpr uint64_t kMaxBundleBytes = 64ULL << 20;

}  // namespace ptepack
