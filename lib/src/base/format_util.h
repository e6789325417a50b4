// Human-readable sizes and small text helpers shared by the renderers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ptepack {

// "1.5 MiB"-style size for tables (exact bytes stay in --json output).
[[nodiscard]] std::string human_bytes(uint64_t bytes);
// Percentage of part in whole, "12.5%"; "-" when whole is 0.
[[nodiscard]] std::string percent(uint64_t part, uint64_t whole);

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
[[nodiscard]] bool is_utf8(std::string_view text);
// Length of the well-formed UTF-8 sequence starting at text[i] (1 for ASCII),
// or 0 when the bytes there are not one. `i` must be inside `text`.
[[nodiscard]] size_t utf8_sequence(std::string_view text, size_t i);
// The one rule for keys and method names in every format: no NUL byte (the
// runtime looks keys up as C strings) and valid UTF-8. Throws invalid_input
// "<context>: <what> <name, escaped> ...".
void check_name(std::string_view name, std::string_view what, const std::string& context);

}  // namespace ptepack
