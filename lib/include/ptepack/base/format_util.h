// Human-readable sizes and small text helpers shared by the renderers.
#pragma once

#include <cstdint>
#include <string>

namespace ptepack {

// "1.5 MiB"-style size for tables (exact bytes stay in --json output).
[[nodiscard]] std::string human_bytes(uint64_t bytes);
// Percentage of part in whole, "12.5%"; "-" when whole is 0.
[[nodiscard]] std::string percent(uint64_t part, uint64_t whole);

}  // namespace ptepack
