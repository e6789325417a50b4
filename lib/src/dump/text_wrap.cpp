// Line wrapping for text dumps on a terminal.
#include "text_wrap.h"

#include <algorithm>
#include <vector>

namespace ptepack::detail {
namespace {

bool starts_char(char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }

// The words of a line with the spaces before each; spaces inside [...] belong
// to the word, so a shape is one word.
struct Word {
  std::string_view space;
  std::string_view text;
};

std::vector<Word> words_of(std::string_view line) {
  std::vector<Word> out;
  size_t i = 0;
  while (i < line.size()) {
    const size_t space_start = i;
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    int depth = 0;
    while (i < line.size() && (line[i] != ' ' || depth > 0)) {
      if (line[i] == '[') ++depth;
      if (line[i] == ']' && depth > 0) --depth;
      ++i;
    }
    out.push_back({line.substr(space_start, start - space_start), line.substr(start, i - start)});
  }
  return out;
}

}  // namespace

size_t columns_of(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), starts_char));
}

std::string wrap_line(std::string_view line, size_t width) {
  if (width == 0 || columns_of(line) <= width) return std::string(line) + "\n";
  const auto words = words_of(line);
  const size_t indent = words.empty() ? 0 : std::min(words.front().space.size(), width / 2);
  // Continuation lines: four columns in, but always leaving half the width for text.
  const size_t next_indent = std::min(indent + 4, width / 2);
  std::string out;
  std::string current(indent, ' ');
  size_t used = indent;
  bool has_word = false;
  auto end_line = [&] {
    out += current + "\n";
    current.assign(next_indent, ' ');
    used = next_indent;
    has_word = false;
  };
  for (const auto& [space, text] : words) {
    if (text.empty()) continue;
    const size_t gap = std::max<size_t>(space.size(), 1);
    if (has_word && used + gap + columns_of(text) > width) end_line();
    if (has_word) {
      current.append(space.empty() ? std::string_view(" ") : space);
      used += gap;
    }
    // A word wider than a whole line: broken where the line ends.
    std::string_view rest = text;
    while (used + columns_of(rest) > width) {
      size_t room = width - used;
      size_t take = 0;
      for (size_t k = 0; k < rest.size(); ++k) {
        if (starts_char(rest[k])) {
          if (room == 0) break;
          --room;
        }
        take = k + 1;
      }
      current.append(rest.substr(0, take));
      rest.remove_prefix(take);
      end_line();
    }
    current.append(rest);
    used += columns_of(rest);
    has_word = true;
  }
  if (has_word) out += current + "\n";
  return out.empty() ? std::string("\n") : out;
}

}  // namespace ptepack::detail
