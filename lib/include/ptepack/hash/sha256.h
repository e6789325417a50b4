// SHA-256 through OpenSSL EVP, and digest helpers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ptepack {

using Digest = std::array<uint8_t, 32>;

// OpenSSL set up once as every ptepack use of it needs (the static build reads
// no configuration file). Called before any OpenSSL use.
void init_openssl();

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void update(std::span<const uint8_t> bytes);
  void update(std::string_view bytes);
  Digest finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

[[nodiscard]] Digest sha256(std::span<const uint8_t> bytes);
[[nodiscard]] Digest sha256(std::string_view bytes);
[[nodiscard]] std::string to_hex(std::span<const uint8_t> bytes);
[[nodiscard]] inline std::string to_hex(const Digest& digest) {
  return to_hex(std::span<const uint8_t>(digest));
}
// The digest 64 lowercase hex digits spell, or nullopt for any other text.
[[nodiscard]] std::optional<Digest> digest_from_hex(std::string_view hex);

}  // namespace ptepack
