// Message helpers for ptepack::Error.
#include "ptepack/base/error.h"

namespace ptepack {

std::string quoted(std::string_view text) { return quote(text); }

std::string quote(std::string_view text) { return "'" + escaped(text) + "'"; }

std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

std::string text_line(std::string_view text) {
  size_t blank = text.find_first_not_of('\n');
  if (blank == std::string_view::npos) blank = text.size();
  return std::string(blank, '\n') + escaped(text.substr(blank)) + "\n";
}

}  // namespace ptepack
