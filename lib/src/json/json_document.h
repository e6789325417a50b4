// A compact, read-only JSON document for large untrusted files (manifest.json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ptepack {

enum class JsonType : uint8_t {
  null,
  boolean,
  integer,
  unsigned_integer,
  floating,
  string,
  array,
  object
};

struct JsonMember;

// One value. Strings, arrays and objects point into their document's arena, so
// a value lives as long as the JsonDocument that parsed it.
class JsonValue {
 public:
  JsonValue() = default;
  static JsonValue scalar(JsonType type, bool boolean = false, uint64_t number = 0) {
    JsonValue v;
    v.type_ = type;
    v.boolean_ = boolean;
    v.number_ = number;
    return v;
  }
  static JsonValue span(JsonType type, const void* data, size_t size) {
    JsonValue v;
    v.type_ = type;
    v.data_ = data;
    v.size_ = size;
    return v;
  }

  [[nodiscard]] JsonType type() const { return type_; }
  [[nodiscard]] bool is_null() const { return type_ == JsonType::null; }
  [[nodiscard]] bool is_boolean() const { return type_ == JsonType::boolean; }
  [[nodiscard]] bool is_string() const { return type_ == JsonType::string; }
  [[nodiscard]] bool is_array() const { return type_ == JsonType::array; }
  [[nodiscard]] bool is_object() const { return type_ == JsonType::object; }
  [[nodiscard]] bool is_number_unsigned() const { return type_ == JsonType::unsigned_integer; }

  // Each accessor is for its own type only (checked by the caller first).
  [[nodiscard]] bool boolean() const { return boolean_; }
  [[nodiscard]] uint64_t unsigned_value() const { return number_; }
  [[nodiscard]] std::string_view text() const {
    return is_string() ? std::string_view(static_cast<const char*>(data_), size_) : "";
  }
  [[nodiscard]] std::span<const JsonValue> array() const;
  [[nodiscard]] std::span<const JsonMember> object() const;  // in file order
  // The member named `key` of an object (a linear scan: for objects of a few
  // fields), or nullptr.
  [[nodiscard]] const JsonValue* find(std::string_view key) const;

 private:
  JsonType type_ = JsonType::null;
  bool boolean_ = false;
  size_t size_ = 0;  // bytes of a string, items of an array, members of an object
  union {
    const void* data_ = nullptr;  // string, array, object
    uint64_t number_;             // unsigned_integer
  };
};

struct JsonMember {
  std::string_view key;
  JsonValue value;
};

inline std::span<const JsonValue> JsonValue::array() const {
  if (!is_array()) return {};
  return {static_cast<const JsonValue*>(data_), size_};
}
inline std::span<const JsonMember> JsonValue::object() const {
  if (!is_object()) return {};
  return {static_cast<const JsonMember*>(data_), size_};
}

// Parses what parse_json_strict (json_util.h) accepts, and rejects what it
// rejects: RFC 8259 JSON, duplicate keys and nesting deeper than
// Limits::max_json_depth refused with "<context>: ..." (invalid_input). Values
// go into one arena instead of a tree of maps and strings, and strings without
// escapes are views of `text`, which must outlive the document.
class JsonDocument {
 public:
  JsonDocument(std::string_view text, const std::string& context);
  JsonDocument(const JsonDocument&) = delete;
  JsonDocument& operator=(const JsonDocument&) = delete;
  JsonDocument(JsonDocument&&) = default;
  JsonDocument& operator=(JsonDocument&&) = default;
  ~JsonDocument() = default;

  [[nodiscard]] const JsonValue& root() const { return root_; }

  // Internal: the arena the parser fills.
  void* allocate(size_t bytes);

 private:
  std::vector<std::unique_ptr<std::byte[]>> blocks_;
  size_t used_ = 0;      // in the last block
  size_t capacity_ = 0;  // of the last block
  size_t next_block_;    // size of the next block
  JsonValue root_;
};

// An object's members ordered by key (bytewise), as a std::map would hold
// them; already-sorted objects (every ptepack writer sorts) cost one pass.
[[nodiscard]] std::vector<const JsonMember*> sorted_members(const JsonValue& object);

}  // namespace ptepack
