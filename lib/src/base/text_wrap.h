// Text output fitted to a terminal (dump, the pack summary): long lines wrapped at word
// ends, never inside a shape.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ptepack::detail {

// Characters on screen of UTF-8 text (continuation bytes take no column).
[[nodiscard]] size_t columns_of(std::string_view text);

// `line` (no newline) in lines of at most `width` columns, each ending in a
// newline: whole when it fits; otherwise broken at spaces outside brackets (a
// shape such as [1, 128, 16] stays on one line), continuation lines indented
// four columns deeper than the line. A single word wider than a line is
// broken where the line ends, never cut. `width` 0: the line as it is.
[[nodiscard]] std::string wrap_line(std::string_view line, size_t width);

}  // namespace ptepack::detail
