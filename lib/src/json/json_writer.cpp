// The streaming pretty JSON writer, matching nlohmann's dump(2) output.
#include "json/json_writer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ptepack/base/error.h"
#include "base/format_util.h"

namespace ptepack {

void JsonWriter::indent() { out_.append(2 * counts_.size(), ' '); }

void JsonWriter::element() {
  if (after_key_) {  // a member's value follows its key on the same line
    after_key_ = false;
    return;
  }
  if (counts_.empty()) return;  // the root
  out_ += counts_.back()++ == 0 ? "\n" : ",\n";
  indent();
}

void JsonWriter::open(char bracket) {
  element();
  out_ += bracket;
  counts_.push_back(0);
}

void JsonWriter::close(char bracket) {
  if (counts_.empty()) fail(ErrorCode::internal, "JsonWriter: close without open");
  bool empty = counts_.back() == 0;
  counts_.pop_back();
  if (!empty) {
    out_ += '\n';
    indent();
  }
  out_ += bracket;
}

void JsonWriter::key(std::string_view name) {
  element();
  append_json_string(out_, name);
  out_ += ": ";
  after_key_ = true;
}

void JsonWriter::value(std::string_view text) {
  element();
  append_json_string(out_, text);
}

void append_json_string(std::string& out, std::string_view text) {
  if (!is_utf8(text)) {  // nlohmann's own replacement of invalid bytes, exactly
    out += nlohmann::json(std::string(text))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  size_t plain = 0;  // start of the run not yet copied
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.substr(plain, i - plain));
    plain = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += fmt::format("\\u{:04x}", c);
        break;
    }
  }
  out.append(text.substr(plain));
  out += '"';
}

void JsonWriter::value(bool flag) {
  element();
  out_ += flag ? "true" : "false";
}

void JsonWriter::dom(const nlohmann::json& value) {
  element();
  // The DOM's own layout from column 0; each line after the first moves to this
  // depth (string values never hold a raw newline: dump escapes it).
  const auto text = value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string pad(2 * counts_.size(), ' ');
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    out_.append(text, start, nl + 1 - start);
    out_ += pad;
    start = nl + 1;
  }
  out_.append(text, start);
}

void JsonWriter::null() {
  element();
  out_ += "null";
}

std::string JsonWriter::finish() && {
  if (!counts_.empty()) fail(ErrorCode::internal, "JsonWriter: unclosed container");
  out_ += '\n';
  return std::move(out_);
}

}  // namespace ptepack
