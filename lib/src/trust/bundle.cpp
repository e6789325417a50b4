// The OMS v1.0 bundle: the in-toto payload of a release's files, its DSSE envelope, and the
// strict reader that checks a bundle before trusting a byte of it.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "json/json_document.h"
#include "ptepack/base/error.h"
#include "ptepack/base/limits.h"
#include "ptepack/trust/signature.h"

namespace ptepack {
namespace {

constexpr std::string_view kBundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json";
constexpr std::string_view kPayloadType = "application/vnd.in-toto+json";
constexpr std::string_view kStatementType = "https://in-toto.io/Statement/v1";
constexpr std::string_view kPredicateType = "https://model_signing/signature/v1.0";
constexpr std::string_view kOldPredicateType = "https://model_signing/Digests/v0.1";
constexpr uint64_t kMaxSignedFiles = 1'000'000;

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kBase64[(n >> 18) & 63];
    out += kBase64[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64[n & 63] : '=';
  }
  return out;
}

// Standard base64 with padding, nothing else (no whitespace, no URL alphabet).
std::optional<std::string> unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t n = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=') {
        if (i + 4 != text.size() || k < 2) return std::nullopt;
        ++pad;
        n <<= 6;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      const auto at = kBase64.find(c);
      if (at == std::string_view::npos) return std::nullopt;
      n = (n << 6) | static_cast<uint32_t>(at);
    }
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

// DSSE's pre-authentication encoding.
std::string pae(std::string_view payload) {
  return fmt::format("DSSEv1 {} {} {} ", kPayloadType.size(), kPayloadType, payload.size()) +
         std::string(payload);
}

// Path components: names sort component by component, as model_signing orders resources.
std::vector<std::string_view> components(std::string_view name) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const auto slash = name.find('/', start);
    out.push_back(name.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

void sort_files(std::vector<SignedFile>& files) {
  std::sort(files.begin(), files.end(), [](const SignedFile& a, const SignedFile& b) {
    return components(a.name) < components(b.name);
  });
}

Digest root_digest(const std::vector<SignedFile>& files) {
  Sha256 hasher;
  for (const auto& f : files) hasher.update(std::span<const uint8_t>(f.sha256));
  return hasher.finish();
}

// ----------------------------------------------------------------- the strict reader

[[noreturn]] void bad(const std::string& context, const std::string& what) {
  fail(ErrorCode::verify_failed, "{}: {}", context, what);
}

const JsonValue& member(const JsonValue& object, std::string_view key, JsonType type,
                        const std::string& context, std::string_view where) {
  const JsonValue* v = object.find(key);
  if (v == nullptr) bad(context, fmt::format("{} has no {}", where, key));
  if (v->type() != type) bad(context, fmt::format("{}.{} has the wrong type", where, key));
  return *v;
}

void only_fields(const JsonValue& object, std::initializer_list<std::string_view> allowed,
                 const std::string& context, std::string_view where) {
  if (!object.is_object()) bad(context, fmt::format("{} is not an object", where));
  for (const auto& m : object.object()) {
    if (std::find(allowed.begin(), allowed.end(), m.key) == allowed.end()) {
      bad(context, fmt::format("{} has an unknown field {}", where, quote(m.key)));
    }
  }
}

std::string decoded(const JsonValue& value, const std::string& context, std::string_view what) {
  auto out = unbase64(value.text());
  if (!out) bad(context, fmt::format("{} is not base64", what));
  return *out;
}

bool safe_name(std::string_view name) {
  if (name.empty() || name.size() > Limits::max_key_length || name.front() == '/') return false;
  if (name.find('\0') != std::string_view::npos || name.find('\\') != std::string_view::npos) {
    return false;
  }
  for (auto part : components(name)) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

SignedRelease read_payload(std::string_view payload, const std::string& context) {
  const JsonDocument doc(payload, context + ": payload");
  const JsonValue& root = doc.root();
  if (!root.is_object()) bad(context, "the payload is not a JSON object");
  if (member(root, "_type", JsonType::string, context, "payload").text() != kStatementType) {
    bad(context, "the payload is not an in-toto Statement v1");
  }
  const auto type = member(root, "predicateType", JsonType::string, context, "payload").text();
  if (type == kOldPredicateType) {
    bad(context, "a model_signing v0.2 signature (predicate Digests/v0.1): sign again with a "
                 "v1.0 signer");
  }
  if (type != kPredicateType) bad(context, fmt::format("predicateType {} is not OMS v1.0", quote(type)));
  const auto subjects = member(root, "subject", JsonType::array, context, "payload").array();
  if (subjects.size() != 1) bad(context, fmt::format("{} subjects, expected one", subjects.size()));
  SignedRelease out;
  const auto& subject = subjects[0];
  if (!subject.is_object()) bad(context, "subject[0] is not an object");
  out.model_name = std::string(member(subject, "name", JsonType::string, context, "subject").text());
  const auto& digest = member(subject, "digest", JsonType::object, context, "subject");
  const auto expected = digest_from_hex(member(digest, "sha256", JsonType::string, context,
                                               "subject.digest").text());
  if (!expected) bad(context, "subject.digest.sha256 is not 64 hex digits");
  const auto& predicate = member(root, "predicate", JsonType::object, context, "payload");
  const auto& serialization =
      member(predicate, "serialization", JsonType::object, context, "predicate");
  if (member(serialization, "method", JsonType::string, context, "serialization").text() != "files") {
    bad(context, "serialization.method is not \"files\" (ptepack verifies file signatures)");
  }
  if (member(serialization, "hash_type", JsonType::string, context, "serialization").text() !=
      "sha256") {
    bad(context, "serialization.hash_type is not \"sha256\"");
  }
  member(serialization, "allow_symlinks", JsonType::boolean, context, "serialization");
  if (const JsonValue* ignore = serialization.find("ignore_paths")) {
    if (!ignore->is_array()) bad(context, "serialization.ignore_paths is not a list");
    for (const auto& p : ignore->array()) {
      if (!p.is_string()) bad(context, "serialization.ignore_paths holds a non-string");
      out.ignore_paths.emplace_back(p.text());
    }
  }
  const auto& resources = member(predicate, "resources", JsonType::array, context, "predicate");
  if (resources.array().size() > kMaxSignedFiles) bad(context, "too many resources");
  std::set<std::string_view> names;
  for (const auto& r : resources.array()) {
    if (!r.is_object()) bad(context, "a resource is not an object");
    const auto name = member(r, "name", JsonType::string, context, "resource").text();
    if (!safe_name(name)) bad(context, fmt::format("resource name {} is not a relative path", quote(name)));
    if (!names.insert(name).second) bad(context, fmt::format("resource {} is listed twice", quote(name)));
    if (member(r, "algorithm", JsonType::string, context, "resource").text() != "sha256") {
      bad(context, fmt::format("resource {}: algorithm is not sha256", quote(name)));
    }
    const auto d = digest_from_hex(member(r, "digest", JsonType::string, context, "resource").text());
    if (!d) bad(context, fmt::format("resource {}: digest is not 64 hex digits", quote(name)));
    out.files.push_back({std::string(name), *d});
  }
  if (root_digest(out.files) != *expected) {
    bad(context, "the subject's digest does not match the resources (the payload is inconsistent)");
  }
  return out;
}

}  // namespace

const std::vector<std::string>& default_ignore_paths() {
  static const std::vector<std::string> names{std::string(kSignatureFileName), ".git",
                                              ".gitattributes", ".github", ".gitignore"};
  return names;
}

bool is_ignored_name(std::string_view name) {
  const auto& names = default_ignore_paths();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string sign_release(const SigningKey& key, const std::string& model_name,
                         std::vector<SignedFile> files) {
  sort_files(files);
  nlohmann::ordered_json resources = nlohmann::ordered_json::array();
  for (const auto& f : files) {
    resources.push_back({{"name", f.name}, {"algorithm", "sha256"}, {"digest", to_hex(f.sha256)}});
  }
  nlohmann::ordered_json statement = {
      {"_type", kStatementType},
      {"subject", {{{"name", model_name}, {"digest", {{"sha256", to_hex(root_digest(files))}}}}}},
      {"predicateType", kPredicateType},
      {"predicate",
       {{"serialization",
         {{"method", "files"},
          {"hash_type", "sha256"},
          {"allow_symlinks", false},
          {"ignore_paths", default_ignore_paths()}}},
        {"resources", resources}}}};
  const std::string payload = statement.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  nlohmann::ordered_json bundle = {
      {"mediaType", kBundleMediaType},
      {"verificationMaterial", {{"publicKey", {{"hint", key.hint()}}}, {"tlogEntries", nlohmann::ordered_json::array()}}},
      {"dsseEnvelope",
       {{"payload", base64(payload)},
        {"payloadType", kPayloadType},
        {"signatures", {{{"sig", base64(key.sign(pae(payload)))}, {"keyid", ""}}}}}}};
  return bundle.dump(2) + "\n";
}

std::string bundle_key_hint(std::string_view bundle) {
  if (bundle.size() > kMaxBundleBytes) return {};
  try {
    const JsonDocument parsed(bundle, "bundle");
    const JsonValue* material = parsed.root().is_object()
                                    ? parsed.root().find("verificationMaterial")
                                    : nullptr;
    const JsonValue* key =
        material != nullptr && material->is_object() ? material->find("publicKey") : nullptr;
    const JsonValue* hint = key != nullptr && key->is_object() ? key->find("hint") : nullptr;
    return hint != nullptr && hint->is_string() ? std::string(hint->text()) : std::string();
  } catch (const Error&) {
    return {};
  }
}

SignedRelease verify_release_signature(std::string_view bundle,
                                       const std::vector<VerifyingKey>& keys,
                                       const std::string& context) {
  if (bundle.size() > kMaxBundleBytes) {
    bad(context, fmt::format("{} bytes is too large for a signature", bundle.size()));
  }
  std::optional<JsonDocument> parsed;
  try {
    parsed.emplace(bundle, context);
  } catch (const Error& e) {
    throw Error(ErrorCode::verify_failed, e.what());
  }
  const JsonValue& root = parsed->root();
  only_fields(root, {"mediaType", "verificationMaterial", "dsseEnvelope"}, context, "bundle");
  if (member(root, "mediaType", JsonType::string, context, "bundle").text() != kBundleMediaType) {
    bad(context, "mediaType is not a Sigstore bundle v0.3");
  }
  const auto& material =
      member(root, "verificationMaterial", JsonType::object, context, "bundle");
  only_fields(material, {"publicKey", "tlogEntries"}, context, "verificationMaterial");
  std::string hint;
  if (const JsonValue* key = material.find("publicKey")) {
    only_fields(*key, {"hint"}, context, "publicKey");
    if (const JsonValue* h = key->find("hint")) {
      if (!h->is_string()) bad(context, "publicKey.hint is not a string");
      hint = std::string(h->text());
    }
  } else {
    bad(context, "not a key-based signature (no verificationMaterial.publicKey)");
  }
  if (const JsonValue* log = material.find("tlogEntries"); log != nullptr && !log->is_array()) {
    bad(context, "tlogEntries is not a list");
  }
  const auto& envelope = member(root, "dsseEnvelope", JsonType::object, context, "bundle");
  only_fields(envelope, {"payload", "payloadType", "signatures"}, context, "dsseEnvelope");
  if (member(envelope, "payloadType", JsonType::string, context, "dsseEnvelope").text() !=
      kPayloadType) {
    bad(context, "the envelope's payloadType is not in-toto JSON");
  }
  const std::string payload = decoded(
      member(envelope, "payload", JsonType::string, context, "dsseEnvelope"), context, "payload");
  const auto& signatures =
      member(envelope, "signatures", JsonType::array, context, "dsseEnvelope").array();
  if (signatures.size() != 1) {
    bad(context, fmt::format("{} signatures, expected one", signatures.size()));
  }
  only_fields(signatures[0], {"sig", "keyid"}, context, "signature");
  const std::string sig =
      decoded(member(signatures[0], "sig", JsonType::string, context, "signature"), context,
              "signature");
  std::optional<size_t> signer;
  bool hinted = false;
  for (size_t k = 0; k < keys.size() && !signer; ++k) {
    if (!hint.empty() && keys[k].hint() != hint) continue;
    hinted = true;
    if (keys[k].verify(pae(payload), sig)) signer = k;
  }
  if (!signer && !hinted) {
    bad(context, fmt::format("signed by another key (hint {}): none of the given public keys",
                             hint.substr(0, 16)));
  }
  if (!signer) bad(context, "the signature does not verify: the payload or signature was changed");
  auto out = read_payload(payload, context);
  out.key_hint = hint;
  out.key = *signer;
  return out;
}

std::vector<std::string> compare_signed_files(const SignedRelease& signed_release,
                                              const std::vector<SignedFile>& actual,
                                              const std::string& context) {
  std::vector<std::string> problems;
  for (const auto& p : signed_release.ignore_paths) {
    std::string_view name = p;
    while (name.ends_with('/')) name.remove_suffix(1);
    if (!is_ignored_name(name)) {
      problems.push_back(fmt::format("{}: the signature leaves {} unsigned (ignore_paths): only "
                                     "the signature and git's files may be",
                                     context, quote(p)));
    }
  }
  std::map<std::string_view, const Digest*> have;
  for (const auto& f : actual) have.emplace(f.name, &f.sha256);
  std::set<std::string_view> signed_names;
  for (const auto& f : signed_release.files) {
    signed_names.insert(f.name);
    auto it = have.find(f.name);
    if (it == have.end()) {
      problems.push_back(fmt::format("{}: {} is signed but missing", context, quote(f.name)));
    } else if (*it->second != f.sha256) {
      problems.push_back(fmt::format("{}: {} differs from the signed file", context, quote(f.name)));
    }
  }
  for (const auto& f : actual) {
    if (!signed_names.count(f.name)) {
      problems.push_back(fmt::format("{}: {} is not signed", context, quote(f.name)));
    }
  }
  return problems;
}

}  // namespace ptepack
