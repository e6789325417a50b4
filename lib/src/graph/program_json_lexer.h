// The tokenizer of the program JSON reader: the flatc JSON form's whitespace and
// comments, punctuation, strings with escapes, bare words and integers, and
// errors with their line and column. The reader (program_json.cpp) builds the
// FlatBuffer from what this yields.
#pragma once

#include <flatbuffers/idl.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ptepack/base/error.h"
#include "base/format_util.h"

namespace ptepack::detail {

class JsonLexer {
 protected:
  using BaseType = flatbuffers::BaseType;

  JsonLexer(std::string_view text, const std::string& context) : text_(text), context_(context) {}

  [[noreturn]] void error(std::string_view what) const { error_at(pos_, what); }

  [[noreturn]] void error_at(size_t at, std::string_view what) const {
    at = std::min(at, text_.size());
    size_t line = 1 + static_cast<size_t>(std::count(text_.begin(), text_.begin() + at, '\n'));
    size_t line_start = text_.rfind('\n', at == 0 ? 0 : at - 1);
    size_t column = line_start == std::string_view::npos || at == 0 ? at + 1 : at - line_start;
    fail_input("{}: invalid JSON program: line {}, column {}: {}", context_, line, column, what);
  }

  // --- lexing -------------------------------------------------------------------------

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        auto end = text_.find('\n', pos_);
        pos_ = end == std::string_view::npos ? text_.size() : end;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '*') {
        auto end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) error("unterminated /* comment");
        pos_ = end + 2;
      } else {
        return;
      }
    }
  }

  [[nodiscard]] char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  [[nodiscard]] bool at_end() const { return pos_ >= text_.size(); }

  void expect(char c) {
    skip_space();
    if (peek() != c || at_end()) {
      error(at_end() ? fmt::format("expected '{}', found the end of the text", c)
                     : fmt::format("expected '{}', found {}", c, shown_char(peek())));
    }
    ++pos_;
  }

  static std::string shown_char(char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f ? fmt::format("'{}'", c) : fmt::format("byte 0x{:02x}", u);
  }

  static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '+' || c == '-' || c == '.';
  }

  // After a value: ',' (a trailing one before the closer is allowed) or the closer itself.
  // Returns false once the closer has been consumed.
  bool next_item(char closer) {
    skip_space();
    if (peek() == closer && !at_end()) {
      ++pos_;
      return false;
    }
    expect(',');
    skip_space();
    if (peek() == closer && !at_end()) {
      ++pos_;
      return false;
    }
    return true;
  }

  // A quoted string's contents, escapes decoded, into `out` (cleared first).
  void string_into(std::string& out) {
    out.clear();
    char quote_char = peek();
    if (at_end() || (quote_char != '"' && quote_char != '\'')) error("expected a string");
    ++pos_;
    for (;;) {
      if (at_end()) error("unterminated string");
      size_t run = pos_;
      while (pos_ < text_.size() && text_[pos_] != quote_char && text_[pos_] != '\\' &&
             static_cast<unsigned char>(text_[pos_]) >= 0x20) {
        ++pos_;
      }
      out.append(text_.substr(run, pos_ - run));
      if (at_end()) error("unterminated string");
      char c = text_[pos_];
      if (c == quote_char) {
        ++pos_;
        return;
      }
      if (c != '\\') error("control character in a string (escape it)");
      ++pos_;
      if (at_end()) error("unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\'':
          out += '\'';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'x':
          out += static_cast<char>(hex_digits(2));
          break;
        case 'u':
          unicode_escape(out);
          break;
        default:
          error_at(pos_ - 2, fmt::format("unknown escape \\{}", shown_char(e)));
      }
    }
  }

  uint32_t hex_digits(int count) {
    uint32_t value = 0;
    for (int i = 0; i < count; ++i) {
      char c = peek();
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (at_end() || digit < 0) error("expected a hexadecimal digit in an escape");
      value = value * 16 + static_cast<uint32_t>(digit);
      ++pos_;
    }
    return value;
  }

  void unicode_escape(std::string& out) {
    size_t start = pos_ - 2;
    uint32_t code = hex_digits(4);
    if (code >= 0xDC00 && code <= 0xDFFF) error_at(start, "unpaired low surrogate in \\u escape");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") error_at(start, "unpaired high surrogate in \\u escape");
      pos_ += 2;
      uint32_t low = hex_digits(4);
      if (low < 0xDC00 || low > 0xDFFF) error_at(start, "unpaired high surrogate in \\u escape");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // A quoted string's contents (into `buffer`) or a bare word; `what` names it in errors.
  std::string_view word_or_string(std::string& buffer, std::string_view what) {
    skip_space();
    char c = peek();
    if (c == '"' || c == '\'') {
      string_into(buffer);
      return buffer;
    }
    size_t start = pos_;
    while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
    if (pos_ == start) {
      error(at_end() ? fmt::format("expected {}, found the end of the text", what)
                     : fmt::format("expected {}, found {}", what, shown_char(c)));
    }
    return text_.substr(start, pos_ - start);
  }

  // A field name: a quoted string or a bare identifier.
  std::string_view field_name() { return word_or_string(name_, "a field name"); }

  // A scalar's spelling: a bare word (number, identifier) or a quoted string's contents.
  std::string_view scalar_token() { return word_or_string(token_, "a value"); }

  bool null_literal() {
    skip_space();
    if (text_.substr(pos_, 4) == "null" &&
        (pos_ + 4 == text_.size() || !is_word_char(text_[pos_ + 4]))) {
      pos_ += 4;
      return true;
    }
    return false;
  }

  static bool integer_of(std::string_view text, int64_t& value) {
    bool negative = false;
    if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
      negative = text[0] == '-';
      text.remove_prefix(1);
    }
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
      base = 16;
      text.remove_prefix(2);
    }
    if (text.empty() || text[0] == '-' || text[0] == '+') return false;
    uint64_t magnitude = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
    if (ec != std::errc() || end != text.data() + text.size()) return false;
    constexpr uint64_t kMaxNegative = uint64_t{1} << 63;
    if (negative ? magnitude > kMaxNegative : magnitude >= kMaxNegative) return false;
    value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }

  // Digits only, after an optional sign and 0x: an integer, even when too large.
  static bool looks_integral(std::string_view text) {
    if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
    bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    if (hex) text.remove_prefix(2);
    return !text.empty() && std::all_of(text.begin(), text.end(), [hex](char c) {
      return (c >= '0' && c <= '9') || (hex && std::isxdigit(static_cast<unsigned char>(c)));
    });
  }

  // The values an integer field of type `base` holds; none for other types.
  static std::optional<std::pair<int64_t, int64_t>> integer_range(BaseType base) {
    using Range = std::pair<int64_t, int64_t>;
    switch (base) {
      case BaseType::BASE_TYPE_CHAR:
        return Range{INT8_MIN, INT8_MAX};
      case BaseType::BASE_TYPE_UCHAR:
      case BaseType::BASE_TYPE_UTYPE:
        return Range{0, UINT8_MAX};
      case BaseType::BASE_TYPE_SHORT:
        return Range{INT16_MIN, INT16_MAX};
      case BaseType::BASE_TYPE_USHORT:
        return Range{0, UINT16_MAX};
      case BaseType::BASE_TYPE_INT:
        return Range{INT32_MIN, INT32_MAX};
      case BaseType::BASE_TYPE_UINT:
        return Range{0, UINT32_MAX};
      case BaseType::BASE_TYPE_LONG:
        return Range{INT64_MIN, INT64_MAX};
      default:
        return std::nullopt;
    }
  }

  std::string_view text_;
  const std::string& context_;
  size_t pos_ = 0;
  std::string name_;   // the field name being read
  std::string token_;  // the scalar token being read
};

}  // namespace ptepack::detail
