// `sign`: verify's check of a packed directory, then its files signed under their manifest digests.
#include "ptepack/sign/sign.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/core/release_files.h"
#include "ptepack/io/output_file.h"
#include "json/json_util.h"
#include "ptepack/verify/verify.h"
#include "verify/directory_check.h"

namespace ptepack {

namespace fs = std::filesystem;

std::string sign_manifest(const SigningKey& key, const std::string& model_name,
                          const Manifest& manifest, std::string_view manifest_json) {
  return sign_manifest(key, model_name, manifest, sha256(manifest_json));
}

std::string sign_manifest(const SigningKey& key, const std::string& model_name,
                          const Manifest& manifest, const Digest& manifest_sha256) {
  return sign_release(key, model_name, release_signed_files(manifest, manifest_sha256));
}

SignReport sign_directory(const SignOptions& options) {
  const auto key = SigningKey::load(options.private_key, options.password);
  std::error_code ec;
  const auto paths = directory_paths(options.directory);
  if (!fs::exists(options.directory, ec)) {
    fail(ErrorCode::io, "{}: no such file or directory", options.directory.string());
  }
  const bool directory = fs::is_directory(options.directory, ec) ||
                         options.directory.filename() == "manifest.json";
  if (!directory || !fs::is_directory(paths.dir, ec) || !fs::exists(paths.manifest, ec)) {
    fail(ErrorCode::usage, "{}: sign takes a packed directory (with its manifest.json)",
         options.directory.string());
  }
  VerifyOptions check;
  check.jobs = options.jobs;
  auto report = verify_artifact(options.directory, check);
  detail::raise_problems(report, ErrorCode::verify_failed);  // never signed (exit 1)
  auto manifest_file = InputFile::open(paths.manifest);
  auto bytes = manifest_file->read_range(0, manifest_file->size());
  const std::string text(bytes.begin(), bytes.end());
  const auto manifest = parse_manifest(text, paths.manifest.string());
  const auto name = fs::absolute(paths.dir).lexically_normal().filename().string();
  const std::string bundle = sign_manifest(key, name, manifest, text);
  const fs::path target = paths.dir / std::string(kSignatureFileName);
  AtomicOutput output(target, AtomicOutput::Kind::file);
  OutputFile file = output.file();
  file.write_at(0, bundle);
  file.finish(bundle.size());
  output.commit();
  return {target.string(), key.hint(), release_files(manifest).size() + 1, manifest.release};
}

std::string render_sign_text(const SignReport& r) {
  return fmt::format("signed {}: {} files, key {}{}\n", r.signature, r.files,
                     r.key_hint.substr(0, 16),
                     r.release ? fmt::format(", release {}", *r.release) : "");
}

std::string render_sign_json(const SignReport& r) {
  nlohmann::json j{{"format", "ptepack.sign"},
                   {"version", 1},
                   {"signature", r.signature},
                   {"key_hint", r.key_hint},
                   {"files", r.files},
                   {"release", r.release ? nlohmann::json(*r.release) : nlohmann::json(nullptr)}};
  return json_text(j);
}

}  // namespace ptepack
