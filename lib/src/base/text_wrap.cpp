// Line wrapping for text dumps on a terminal.
#include "base/text_wrap.h"

#include <algorithm>
#include <vector>

#include "base/format_util.h"

namespace ptepack::detail {
namespace {

// Columns a code point takes on a terminal: 2 for East Asian wide and
// fullwidth characters and emoji (Unicode's W and F ranges, in the blocks
// where they live), 0 for combining marks, 1 otherwise.
size_t code_point_columns(uint32_t c) {
  if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x200B && c <= 0x200F) ||
      (c >= 0xFE20 && c <= 0xFE2F)) {
    return 0;
  }
  const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
                    (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
                    (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
                    (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
                    (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
                    (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
                    (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD);
  return wide ? 2 : 1;
}

// The character at text[i]: its length in bytes and its columns. Text here is
// escaped, so valid UTF-8; a stray byte still counts as one column.
std::pair<size_t, size_t> char_at(std::string_view text, size_t i) {
  const size_t length = utf8_sequence(text, i);
  if (length <= 1) return {1, 1};
  const auto byte = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<unsigned char>(text[k]));
  };
  uint32_t c = byte(i) & (0x7Fu >> length);
  for (size_t k = 1; k < length; ++k) c = (c << 6) | (byte(i + k) & 0x3Fu);
  return {length, code_point_columns(c)};
}

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
  size_t columns = 0;
  for (size_t i = 0; i < text.size();) {
    const auto [length, cols] = char_at(text, i);
    columns += cols;
    i += length;
  }
  return columns;
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
    const size_t cols = columns_of(text);
    if (has_word && used + gap + cols > width) end_line();
    if (has_word) {
      current.append(space.empty() ? std::string_view(" ") : space);
      used += gap;
    }
    if (used + cols <= width) {
      current.append(text);
      used += cols;
      has_word = true;
      continue;
    }
    // A word wider than a whole line: broken where each line ends, in one pass.
    for (size_t i = 0; i < text.size();) {
      const auto [length, char_cols] = char_at(text, i);
      if (used + char_cols > width && used > next_indent) end_line();
      current.append(text.substr(i, length));
      used += char_cols;
      i += length;
    }
    has_word = true;
  }
  if (has_word) out += current + "\n";
  return out.empty() ? std::string("\n") : out;
}

}  // namespace ptepack::detail
