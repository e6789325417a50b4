// CRC-32 of the ZIP polynomial with carry-less multiplication (x86-64 PCLMULQDQ).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptepack::zip::detail {

// True when this CPU has PCLMULQDQ and SSE4.1 (checked once).
bool clmul_available() noexcept;

// Advances a raw CRC register (no pre/post inversion) over `size` bytes.
// Requires clmul_available(), size >= 64 and size % 16 == 0.
uint32_t crc32_clmul_fold(uint32_t reg, const uint8_t* data, size_t size) noexcept;

}  // namespace ptepack::zip::detail
