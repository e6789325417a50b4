// SHA-256 via OpenSSL's EVP interface (uses SHA-NI/AVX where the CPU has them).
#include "ptepack/hash/sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ptepack/base/error.h"

namespace ptepack {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

// The static CLI never reads an OpenSSL configuration file: one that loads a
// provider or engine module would dlopen() it, which a static binary cannot do
// reliably. SHA-256 and ECDSA come from the built-in default provider either way.
void init_openssl() {
#ifdef PTEPACK_NO_OPENSSL_CONFIG
  static const bool once = OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
  if (!once) fail(ErrorCode::internal, "OpenSSL: cannot initialise");
#endif
}

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  init_openssl();
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) {
    fail(ErrorCode::internal, "OpenSSL: cannot initialise SHA-256");
  }
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::span<const uint8_t> bytes) {
  if (!bytes.empty() && EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size()) != 1) {
    fail(ErrorCode::internal, "OpenSSL: SHA-256 update failed");
  }
}

void Sha256::update(std::string_view bytes) {
  update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

Digest Sha256::finish() {
  Digest out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, out.data(), &len) != 1 || len != out.size()) {
    fail(ErrorCode::internal, "OpenSSL: SHA-256 final failed");
  }
  EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
  return out;
}

Digest sha256(std::span<const uint8_t> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

Digest sha256(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::optional<Digest> digest_from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  Digest digest{};
  for (size_t i = 0; i < digest.size(); ++i) {
    const int high = nibble(hex[2 * i]);
    const int low = nibble(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    digest[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return digest;
}

}  // namespace ptepack
