// verify's part of signed releases: the bundle against the given keys, the signed files
// against the directory's, and the release number against rollback (docs/signing.md).
#include <fmt/format.h>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/core/release_files.h"
#include "ptepack/trust/signature.h"
#include "ptepack/verify/verify.h"
#include "verify/directory_check.h"
#include "verify/verify_support.h"

namespace ptepack {

namespace fs = std::filesystem;

std::vector<SignedFile> release_signed_files(const Manifest& manifest,
                                             const Digest& manifest_sha256) {
  std::vector<SignedFile> out;
  for (const auto& f : release_files(manifest)) {
    auto digest = digest_from_hex(f.sha256);
    if (!digest) fail(ErrorCode::internal, "manifest digest of {} is not hex", f.file);
    out.push_back({f.file, *digest});
  }
  out.push_back({"manifest.json", manifest_sha256});
  return out;
}

namespace detail {

void check_release_options(const VerifyOptions& options) {
  if (options.public_keys.empty() && (options.newer_than || options.min_release)) {
    fail(ErrorCode::usage,
         "--newer-than and --min-release need --public-key: an unsigned release number "
         "proves nothing");
  }
  if (options.public_keys.empty() && options.signature) {
    fail(ErrorCode::usage, "--signature needs --public-key to check it with");
  }
  for (const auto& key : options.public_keys) (void)VerifyingKey::load(key);  // exit 2 or 5 now
}

void check_release_signature(const fs::path& path, const Manifest& manifest,
                             const VerifyOptions& options, VerifyReport& report) {
  const auto paths = directory_paths(path);
  report.release = manifest.release;
  const fs::path bundle_path = options.signature.value_or(paths.dir / kSignatureFileName);
  std::error_code ec;
  const bool present = fs::exists(bundle_path, ec);
  if (options.public_keys.empty()) {
    if (present) {
      report.signature = SignatureReport{bundle_path.string(), false, false, {}, {}};
      report.notes.push_back(fmt::format(
          "{}: a signature, not checked (give --public-key to check who signed the release)",
          bundle_path.string()));
    }
    return;
  }
  std::vector<VerifyingKey> keys;
  for (const auto& k : options.public_keys) keys.push_back(VerifyingKey::load(k));
  SignatureReport sig{bundle_path.string(), true, false, {}, {}};
  const std::string context = bundle_path.string();
  auto done = [&] { report.signature = sig; };
  if (!present) {
    report.problems.push_back(
        {ProblemId::signature_missing, context,
         fmt::format("{}: no signature: the release is not signed", context)});
    return done();
  }
  std::string bundle;
  const auto before = report.problems.size();
  Diagnostics problems(ReadMode::collect, report.problems);  // signatures are verify's alone
  if (!attempt(problems, ProblemId::signature_invalid, context, [&] {
        auto file = InputFile::open(bundle_path);
        if (file->size() > kMaxBundleBytes) {
          fail(ErrorCode::verify_failed, "{}: {} bytes is too large for a signature", context,
               file->size());
        }
        auto bytes = file->read_range(0, file->size());
        bundle.assign(bytes.begin(), bytes.end());
        sig.key_hint = bundle_key_hint(bundle);  // reported even when it fails to verify
        auto signed_release = verify_release_signature(bundle, keys, context);
        sig.key_hint = signed_release.key_hint;
        sig.key = keys[signed_release.key].name();
        auto manifest_file = InputFile::open(paths.manifest);
        auto text = manifest_file->read_range(0, manifest_file->size());
        auto actual = release_signed_files(manifest, sha256(std::span<const uint8_t>(text)));
        report.bytes_hashed += text.size();
        for (auto& line : compare_signed_files(signed_release, actual, context)) {
          report.problems.push_back({ProblemId::signature_invalid, context, std::move(line)});
        }
      })) {
    return done();
  }
  sig.valid = report.problems.size() == before;
  const auto release = manifest.release;
  report.newer_than = options.newer_than;
  report.min_release = options.min_release;
  if (options.newer_than && (!release || *release <= *options.newer_than)) {
    report.problems.push_back(
        {ProblemId::release_rollback, paths.manifest.string(),
         fmt::format("{}: release {} is not newer than {} (a rollback to an older release?)",
                     paths.manifest.string(), release ? std::to_string(*release) : "(none)",
                     *options.newer_than)});
  }
  if (options.min_release && (!release || *release < *options.min_release)) {
    report.problems.push_back(
        {ProblemId::release_rollback, paths.manifest.string(),
         fmt::format("{}: release {} is below the minimum {}", paths.manifest.string(),
                     release ? std::to_string(*release) : "(none)", *options.min_release)});
  }
  done();
}

}  // namespace detail
}  // namespace ptepack
