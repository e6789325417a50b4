// Pretty JSON text written straight into a string, byte for byte as json_text()
// (json_util.h) prints the same document, for documents too large for a DOM.
#pragma once

#include <fmt/format.h>

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ptepack {

// Appends `text` as a JSON string literal, escaped as nlohmann/json's dump()
// escapes it (invalid UTF-8 replaced by U+FFFD).
void append_json_string(std::string& out, std::string_view text);

// The caller writes object members in json_text's order (keys sorted
// bytewise, as std::map holds them); the writer does layout and escaping:
// 2-space indent, "key": value, empty containers as {} and [], strings as
// append_json_string writes them.
class JsonWriter {
 public:
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string_view name);  // inside an object, before each value
  void value(std::string_view text);
  void value(const char* text) { value(std::string_view(text)); }
  template <std::integral T>
  requires(!std::same_as<T, bool>) void value(T number) {
    element();
    const fmt::format_int text(number);
    out_.append(text.data(), text.size());
  }
  void value(bool flag);
  void null();
  // A small DOM value at the current place, laid out as json_text lays it out there
  // (named apart from value(): a std::string converts to both).
  void dom(const nlohmann::json& value);
  // key(name), then value(v).
  template <typename T>
  void field(std::string_view name, const T& v) {
    key(name);
    value(v);
  }
  template <typename List>
  void strings(const List& list) {
    begin_array();
    for (const auto& s : list) value(std::string_view(s));
    end_array();
  }
  template <typename List>  // of integers, signed or not
  void numbers(const List& list) {
    begin_array();
    for (auto n : list) value(n);
    end_array();
  }
  // The finished text, with json_text's final newline.
  [[nodiscard]] std::string finish() &&;
  // Streaming: the text written so far, handed over; the writer keeps its place.
  [[nodiscard]] size_t pending() const { return out_.size(); }
  [[nodiscard]] std::string take() { return std::exchange(out_, std::string()); }
  // The same without a copy: the text so far handed to `sink`, then cleared
  // (its memory kept for the next piece).
  template <typename Sink>
  void drain(Sink& sink) {
    sink(std::string_view(out_));
    out_.clear();
  }

 private:
  void open(char bracket);
  void close(char bracket);
  void element();  // separator and indent before an array element or a key
  void indent();

  std::string out_;
  std::vector<size_t> counts_;  // elements written in each open container
  bool after_key_ = false;
};

}  // namespace ptepack
