// CRC-32 of ZIP members: carry-less folding where the CPU has it, zlib for the rest.
#include <zlib.h>

#include <algorithm>
#include <limits>

#include "containers/crc32_clmul.h"
#include "containers/zip.h"

namespace ptepack::zip {

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> bytes) {
  // Bulk of the span (a multiple of 16 bytes) by carry-less folding where the
  // CPU has it; the tail, and every CPU without it, through zlib.
  if (bytes.size() >= 64 && detail::clmul_available()) {
    size_t bulk = bytes.size() & ~size_t{15};
    crc = ~detail::crc32_clmul_fold(~crc, bytes.data(), bulk);
    bytes = bytes.subspan(bulk);
  }
  uLong value = crc;
  // zlib takes 32-bit lengths; feed large spans in pieces.
  while (!bytes.empty()) {
    size_t n = std::min<size_t>(bytes.size(), size_t{1} << 30);
    value = ::crc32(value, bytes.data(), static_cast<uInt>(n));
    bytes = bytes.subspan(n);
  }
  return static_cast<uint32_t>(value);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  // zlib's combine shifts crc_a by length_b zero bytes, then xors crc_b; lengths beyond
  // z_off_t are shifted in steps (combining with 0 is a pure shift).
  constexpr auto kStep = static_cast<uint64_t>(std::numeric_limits<z_off_t>::max());
  uLong value = crc_a;
  for (; length_b > kStep; length_b -= kStep) {
    value = ::crc32_combine(value, 0, static_cast<z_off_t>(kStep));
  }
  return static_cast<uint32_t>(::crc32_combine(value, crc_b, static_cast<z_off_t>(length_b)));
}

}  // namespace ptepack::zip
