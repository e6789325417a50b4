// Folding CRC-32: four 128-bit lanes folded 64 bytes at a time, then reduced
// to 32 bits (Gopal et al., "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction", Intel, 2009; constants for the bit-reflected
// polynomial 0xEDB88320). zlib's crc32 stays the reference and handles the
// tails; tests compare the two on every length and alignment.
#include "containers/crc32_clmul.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace ptepack::zip::detail {

namespace {

#define PTEPACK_CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

PTEPACK_CLMUL_TARGET inline __m128i load(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The 128-bit lane x multiplied by the fold constant k, added onto the next 16 bytes.
PTEPACK_CLMUL_TARGET inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

}  // namespace

bool clmul_available() noexcept {
  static const bool available =
      __builtin_cpu_supports("pclmul") != 0 && __builtin_cpu_supports("sse4.1") != 0;
  return available;
}

PTEPACK_CLMUL_TARGET uint32_t crc32_clmul_fold(uint32_t reg, const uint8_t* data,
                                               size_t size) noexcept {
  // Low qword first: fold distance 512 bits, fold distance 128 bits, the
  // 64 -> 32 bit step, and Barrett reduction (P', mu).
  const __m128i fold512 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  const __m128i fold128 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i fold64 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i barrett = _mm_set_epi64x(0x1f7011641, 0x1db710641);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);

  __m128i x1 = _mm_xor_si128(load(data), _mm_cvtsi32_si128(static_cast<int>(reg)));
  __m128i x2 = load(data + 16);
  __m128i x3 = load(data + 32);
  __m128i x4 = load(data + 48);
  data += 64;
  size -= 64;
  for (; size >= 64; data += 64, size -= 64) {
    x1 = fold(x1, fold512, load(data));
    x2 = fold(x2, fold512, load(data + 16));
    x3 = fold(x3, fold512, load(data + 32));
    x4 = fold(x4, fold512, load(data + 48));
  }
  x1 = fold(x1, fold128, x2);
  x1 = fold(x1, fold128, x3);
  x1 = fold(x1, fold128, x4);
  for (; size >= 16; data += 16, size -= 16) x1 = fold(x1, fold128, load(data));

  // 128 -> 64 bits, then 64 -> 32 bits.
  __m128i t = _mm_clmulepi64_si128(x1, fold128, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
  t = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), fold64, 0x00), t);
  // Barrett reduction to the 32-bit remainder.
  t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), barrett, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
  x1 = _mm_xor_si128(x1, t);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

}  // namespace ptepack::zip::detail

#else

namespace ptepack::zip::detail {

bool clmul_available() noexcept { return false; }
uint32_t crc32_clmul_fold(uint32_t reg, const uint8_t*, size_t) noexcept { return reg; }

}  // namespace ptepack::zip::detail

#endif
