// Message helpers for ptepack::Error.
#include "ptepack/base/error.h"

#include "base/format_util.h"

namespace ptepack {


std::string quote(std::string_view text) { return "'" + escaped(text) + "'"; }

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x20 && u < 0x7f) {
      out += text[i++];
      continue;
    }
    const size_t length = u >= 0x80 ? utf8_sequence(text, i) : 0;
    // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) drive terminals too.
    if (length == 0 ||
        (length == 2 && u == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0)) {
      out += fmt::format("\\x{:02x}", u);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

std::string text_line(std::string_view text) {
  size_t blank = text.find_first_not_of('\n');
  if (blank == std::string_view::npos) blank = text.size();
  return std::string(blank, '\n') + escaped(text.substr(blank)) + "\n";
}

}  // namespace ptepack
