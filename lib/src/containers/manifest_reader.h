// The manifest reader's field helpers (manifest.cpp, shard_fields.cpp): each refuses a field
// of the wrong type or value with "<manifest>: manifest field <where>: <what>".
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "json/json_document.h"
#include "json/json_util.h"
#include "ptepack/base/error.h"
#include "ptepack/containers/manifest.h"

namespace ptepack {

// Where a field is, named only when a message needs it: formatting "tensors[KEY]"
// for each of a large manifest's keys would cost more than reading them.
struct Where {
  Where(const char* text) : base(text) {}         // NOLINT(google-explicit-constructor)
  Where(const std::string& text) : base(text) {}  // NOLINT(google-explicit-constructor)
  Where(std::string_view list, const std::string& entry_key) : base(list), key(&entry_key) {}
  [[nodiscard]] std::string text() const {
    return key == nullptr ? std::string(base) : fmt::format("{}[{}]", base, quote(*key));
  }
  [[nodiscard]] std::string operator+(std::string_view suffix) const {
    return text() + std::string(suffix);
  }
  std::string_view base;
  const std::string* key = nullptr;
};

class ManifestReader {
 public:
  explicit ManifestReader(const std::string& context) : context_(context) {}

  [[noreturn]] void bad(const Where& where, std::string_view what) const {
    fail_input("{}: manifest field {}: {}", context_, where.text(), what);
  }

  const JsonValue& field(const JsonValue& obj, const char* name, const Where& where) {
    if (!obj.is_object()) bad(where, "expected an object");
    const auto* found = obj.find(name);
    if (found == nullptr) bad(fmt::format("{}.{}", where.text(), name), "missing");
    return *found;
  }

  std::string string(const JsonValue& obj, const char* name, const Where& where) {
    const auto& v = field(obj, name, where);
    if (!v.is_string()) bad(fmt::format("{}.{}", where.text(), name), "expected a string");
    return std::string(v.text());
  }

  uint64_t number(const JsonValue& obj, const char* name, const Where& where) {
    const auto& v = field(obj, name, where);
    if (!v.is_number_unsigned())
      bad(fmt::format("{}.{}", where.text(), name), "expected an unsigned integer");
    return v.unsigned_value();
  }

  std::string file_name(const JsonValue& obj, const char* name, const Where& where) {
    auto value = string(obj, name, where);
    if (!is_plain_file_name(value)) {
      bad(fmt::format("{}.{}", where.text(), name),
          fmt::format("{} is not a plain file name", quote(value)));
    }
    return value;
  }

  std::string digest(const JsonValue& obj, const char* name, const Where& where) {
    auto value = string(obj, name, where);
    bool hex =
        value.size() == 64 && value.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) bad(fmt::format("{}.{}", where.text(), name), "expected 64 lowercase hex digits");
    return value;
  }

 private:
  const std::string& context_;
};

}  // namespace ptepack
