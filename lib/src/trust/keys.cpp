// Elliptic-curve keys for signed releases: PEM and PKCS#8 loading, the key hint, ECDSA.
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "ptepack/base/error.h"
#include "ptepack/io/input_file.h"
#include "ptepack/trust/signature.h"

namespace ptepack {

// The key's owner lives outside the anonymous namespace: SigningKey::Impl and
// VerifyingKey::Impl, which hold it, have external linkage.
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

namespace {

namespace fs = std::filesystem;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct MdFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using MdPtr = std::unique_ptr<EVP_MD_CTX, MdFree>;

constexpr uint64_t kMaxKeyFileBytes = 1 << 20;

std::string read_key_file(const fs::path& path) {
  auto file = InputFile::open(path);
  if (file->size() > kMaxKeyFileBytes) {
    fail(ErrorCode::usage, "{}: {} bytes is too large for a key file", path.string(),
         file->size());
  }
  auto bytes = file->read_range(0, file->size());
  return std::string(bytes.begin(), bytes.end());
}

BioPtr memory_bio(const std::string& text) {
  BioPtr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (!bio) fail(ErrorCode::internal, "OpenSSL: cannot allocate a buffer");
  return bio;
}

// The digest ECDSA uses with this curve, as model_signing pairs them; refuses others.
const EVP_MD* digest_for(EVP_PKEY* key, const std::string& name) {
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) {
    fail(ErrorCode::usage,
         "{}: not an elliptic-curve key: signed releases use ECDSA on P-256, P-384 or P-521 "
         "(the OpenSSF Model Signing verifier accepts no other key type)",
         name);
  }
  char group[64] = {};
  size_t length = 0;
  if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                     &length) != 1) {
    fail(ErrorCode::usage, "{}: the key's curve cannot be read", name);
  }
  const std::string_view curve(group, length);
  if (curve == "prime256v1" || curve == "P-256") return EVP_sha256();
  if (curve == "secp384r1" || curve == "P-384") return EVP_sha384();
  if (curve == "secp521r1" || curve == "P-521") return EVP_sha512();
  fail(ErrorCode::usage, "{}: curve {} is not one of P-256, P-384, P-521", name, curve);
}

// Hex SHA-256 of the SubjectPublicKeyInfo PEM text OpenSSL writes.
std::string hint_of(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    fail(ErrorCode::internal, "OpenSSL: cannot write the public key");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return to_hex(sha256(std::string_view(data, static_cast<size_t>(size))));
}

bool looks_public(const std::string& text) {
  return text.find("-----BEGIN PUBLIC KEY-----") != std::string::npos ||
         text.find("-----BEGIN EC PUBLIC KEY-----") != std::string::npos;
}

bool looks_private(const std::string& text) {
  return text.find("PRIVATE KEY-----") != std::string::npos;
}

std::string passphrase(const KeyPassword& password, const std::string& name) {
  if (password.file) {
    std::ifstream in(*password.file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      fail(ErrorCode::io, "{}: cannot read the key passphrase", password.file->string());
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  if (password.environment) {
    const char* value = std::getenv(password.environment->c_str());
    if (value == nullptr) {
      fail(ErrorCode::usage, "{}: the key is encrypted and ${} is not set", name,
           *password.environment);
    }
    return value;
  }
  return {};
}

int password_callback(char* buffer, int size, int, void* user) {
  const auto* text = static_cast<const std::string*>(user);
  if (text == nullptr || text->empty() || static_cast<int>(text->size()) > size) return -1;
  std::copy(text->begin(), text->end(), buffer);
  return static_cast<int>(text->size());
}

}  // namespace

struct SigningKey::Impl {
  KeyPtr key;
  const EVP_MD* md = nullptr;
  std::string hint;
};

struct VerifyingKey::Impl {
  KeyPtr key;
  const EVP_MD* md = nullptr;
  std::string hint;
  std::string name;
};

SigningKey::SigningKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SigningKey::SigningKey(SigningKey&&) noexcept = default;
SigningKey& SigningKey::operator=(SigningKey&&) noexcept = default;
SigningKey::~SigningKey() = default;
const std::string& SigningKey::hint() const { return impl_->hint; }

SigningKey SigningKey::load(const fs::path& pem, const KeyPassword& password) {
  init_openssl();
  const std::string name = pem.string();
  const std::string text = read_key_file(pem);
  if (looks_public(text) && !looks_private(text)) {
    fail(ErrorCode::usage, "{}: a public key; signing needs the private key", name);
  }
  const bool encrypted = text.find("ENCRYPTED") != std::string::npos;
  std::string secret = encrypted ? passphrase(password, name) : std::string();
  if (encrypted && secret.empty()) {
    fail(ErrorCode::usage,
         "{}: the key is encrypted: give its passphrase with --key-password-file FILE or "
         "--key-password-env NAME",
         name);
  }
  auto bio = memory_bio(text);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, password_callback, &secret));
  std::fill(secret.begin(), secret.end(), '\0');
  ERR_clear_error();
  if (!key) {
    fail(ErrorCode::usage, "{}: {}", name,
         encrypted ? "cannot decrypt the private key (wrong passphrase?)"
                   : "not a PEM private key (EC PRIVATE KEY or PKCS#8 PRIVATE KEY)");
  }
  auto impl = std::make_unique<Impl>();
  impl->md = digest_for(key.get(), name);
  impl->hint = hint_of(key.get());
  impl->key = std::move(key);
  return SigningKey(std::move(impl));
}

std::string SigningKey::sign(std::string_view message) const {
  MdPtr ctx(EVP_MD_CTX_new());
  size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, impl_->md, nullptr, impl_->key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    fail(ErrorCode::internal, "OpenSSL: cannot sign");
  }
  std::string out(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    fail(ErrorCode::internal, "OpenSSL: cannot sign");
  }
  out.resize(size);
  return out;
}

VerifyingKey::VerifyingKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerifyingKey::VerifyingKey(VerifyingKey&&) noexcept = default;
VerifyingKey& VerifyingKey::operator=(VerifyingKey&&) noexcept = default;
VerifyingKey::~VerifyingKey() = default;
const std::string& VerifyingKey::hint() const { return impl_->hint; }
const std::string& VerifyingKey::name() const { return impl_->name; }

VerifyingKey VerifyingKey::load(const fs::path& pem) {
  return parse(read_key_file(pem), pem.string());
}

VerifyingKey VerifyingKey::parse(std::string_view pem, const std::string& name) {
  init_openssl();
  const std::string text(pem);
  if (looks_private(text)) {
    fail(ErrorCode::usage,
         "{}: a private key; verifying needs only the public key (openssl pkey -in {} -pubout)",
         name, name);
  }
  auto bio = memory_bio(text);
  KeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) fail(ErrorCode::usage, "{}: not a PEM public key (PUBLIC KEY)", name);
  auto impl = std::make_unique<Impl>();
  impl->md = digest_for(key.get(), name);
  impl->hint = hint_of(key.get());
  impl->key = std::move(key);
  impl->name = name;
  return VerifyingKey(std::move(impl));
}

bool VerifyingKey::verify(std::string_view message, std::string_view der_signature) const {
  MdPtr ctx(EVP_MD_CTX_new());
  if (!ctx ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, impl_->md, nullptr, impl_->key.get()) != 1) {
    fail(ErrorCode::internal, "OpenSSL: cannot verify");
  }
  const int ok = EVP_DigestVerify(
      ctx.get(), reinterpret_cast<const unsigned char*>(der_signature.data()),
      der_signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
      message.size());
  ERR_clear_error();
  return ok == 1;
}

}  // namespace ptepack
