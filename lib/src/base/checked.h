// Overflow-checked arithmetic for sizes and offsets read from untrusted files.
#pragma once

#include <cstdint>
#include <optional>

namespace ptepack {

[[nodiscard]] inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

[[nodiscard]] inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// True when [offset, offset + size) lies inside [0, limit).
[[nodiscard]] inline bool range_within(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

// Rounds up to a multiple of a power-of-two alignment; nullopt on overflow.
[[nodiscard]] inline std::optional<uint64_t> align_up(uint64_t value, uint64_t alignment) {
  auto sum = checked_add(value, alignment - 1);
  if (!sum) return std::nullopt;
  return *sum & ~(alignment - 1);
}

}  // namespace ptepack
