// libFuzzer target: the compact JSON document against the nlohmann-based strict parser. Both
// must accept the same texts, reject the rest for the same kind of reason, and agree on values;
// a text holding a NUL byte, which nlohmann reads as its end, must be refused.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "json/json_document.h"
#include "fuzz_support.h"
#include "json/json_util.h"

namespace {

using ptepack::JsonType;
using ptepack::JsonValue;

void same(const nlohmann::json& expected, const JsonValue& got) {
  auto fail = [](const char* what) { ptepack::fuzz::invariant_failed(what); };
  switch (expected.type()) {
    case nlohmann::json::value_t::null:
      if (!got.is_null()) fail("null differs");
      return;
    case nlohmann::json::value_t::boolean:
      if (!got.is_boolean() || got.boolean() != expected.get<bool>()) fail("boolean differs");
      return;
    case nlohmann::json::value_t::number_unsigned:
      if (!got.is_number_unsigned() || got.unsigned_value() != expected.get<uint64_t>())
        fail("unsigned integer differs");
      return;
    case nlohmann::json::value_t::number_integer:
      if (got.type() != JsonType::integer) fail("integer differs");
      return;
    case nlohmann::json::value_t::number_float:
      if (got.type() != JsonType::floating) fail("float differs");
      return;
    case nlohmann::json::value_t::string:
      if (!got.is_string() || got.text() != expected.get_ref<const std::string&>())
        fail("string differs");
      return;
    case nlohmann::json::value_t::array: {
      if (!got.is_array() || got.array().size() != expected.size()) fail("array differs");
      for (size_t i = 0; i < expected.size(); ++i) same(expected[i], got.array()[i]);
      return;
    }
    case nlohmann::json::value_t::object: {
      if (!got.is_object() || got.object().size() != expected.size()) fail("object differs");
      auto members = ptepack::sorted_members(got);  // nlohmann's objects are ordered by key
      size_t i = 0;
      for (const auto& [key, value] : expected.items()) {
        if (members[i]->key != key) fail("object keys differ");
        same(value, members[i]->value);
        ++i;
      }
      return;
    }
    default:
      fail("unexpected nlohmann value type");
  }
}

// The kind of a rejection, from its message: both parsers word syntax errors their own way.
std::string kind(const ptepack::Error& e) {
  // By prefix only: a syntax message may quote input text.
  std::string_view what = e.what();
  if (what.starts_with("fuzz.json: duplicate key ")) return "duplicate key";
  if (what.starts_with("fuzz.json: JSON nested deeper than ")) return "depth";
  if (what.starts_with("fuzz.json: invalid JSON at offset ")) return "syntax";
  return "other: " + std::string(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.find('\0') != std::string_view::npos) {
    // nlohmann ends its input at a NUL byte and ignores what follows; ptepack refuses the text
    // (a raw NUL is no more valid in a string than outside one).
    try {
      ptepack::JsonDocument doc(text, "fuzz.json");
    } catch (const ptepack::Error& e) {
      ptepack::fuzz::expect_input_error(e);
      return 0;
    }
    ptepack::fuzz::invariant_failed("accepted a text holding a NUL byte");
  }
  std::optional<nlohmann::json> reference;
  std::string reference_error;
  try {
    reference = ptepack::parse_json_strict(text, "fuzz.json");
  } catch (const ptepack::Error& e) {
    reference_error = kind(e);
  }
  try {
    ptepack::JsonDocument doc(text, "fuzz.json");
    if (!reference)
      ptepack::fuzz::invariant_failed("accepted what nlohmann rejects: " + reference_error);
    same(*reference, doc.root());
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    if (reference) ptepack::fuzz::invariant_failed(std::string("rejected valid JSON: ") + e.what());
    if (kind(e) != reference_error)
      ptepack::fuzz::invariant_failed("rejected as " + kind(e) + ", nlohmann as " +
                                      reference_error);
  }
  return 0;
}
