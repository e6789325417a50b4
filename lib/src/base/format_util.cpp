// Human-readable number formatting.
#include "ptepack/base/format_util.h"

#include "ptepack/base/error.h"

#include <fmt/format.h>

namespace ptepack {

std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

bool is_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t extra = c < 0x80           ? 0
                   : (c >> 5) == 0x06 ? 1
                   : (c >> 4) == 0x0E ? 2
                   : (c >> 3) == 0x1E ? 3
                                      : 4;  // a continuation byte or 0xF8..0xFF
    if (extra == 4 || text.size() - i <= extra) return c < 0x80;
    uint32_t code = extra == 0 ? c : c & (0x3Fu >> extra);
    for (size_t k = 1; k <= extra; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3Fu);
    }
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

void check_name(std::string_view name, std::string_view what, const std::string& context) {
  auto shown = [&] {
    std::string out;
    for (char c : name) {
      auto u = static_cast<unsigned char>(c);
      out += u < 0x80 ? std::string(1, c) : fmt::format("\\x{:02x}", u);
    }
    return quote(out);
  };
  if (name.find('\0') != std::string_view::npos) {
    fail_input("{}: {} {} contains a NUL byte", context, what, shown());
  }
  if (!is_utf8(name)) fail_input("{}: {} {} is not valid UTF-8", context, what, shown());
}

}  // namespace ptepack
