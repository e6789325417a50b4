// The compact JSON document behind the manifest reader: values, views, and every refusal.
#include <catch2/catch.hpp>
#include <string>

#include "json/json_document.h"
#include "ptepack/base/error.h"

namespace ptepack {
namespace {

std::string refusal(const std::string& text) {
  try {
    JsonDocument doc(text, "t.json");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);
    return e.what();
  }
  FAIL("accepted: " << text);
  return {};
}

TEST_CASE("json document: values in file order, strings decoded") {
  const std::string text =
      "\xEF\xBB\xBF {\"b\": [0, -1, 18446744073709551615, 18446744073709551616, 1.5e3, true, "
      "null], \"a\": \"x\\u00e9\\ud83d\\ude00\\n\", \"plain\": \"abc\", \"\": {}}";
  JsonDocument doc(text, "t.json");
  const auto& root = doc.root();
  REQUIRE(root.is_object());
  REQUIRE(root.object().size() == 4);
  CHECK(root.object()[0].key == "b");
  CHECK(root.object()[1].key == "a");
  const auto& list = root.object()[0].value.array();
  REQUIRE(list.size() == 7);
  CHECK(list[0].is_number_unsigned());
  CHECK(list[0].unsigned_value() == 0);
  CHECK(list[1].type() == JsonType::integer);
  CHECK(list[2].unsigned_value() == UINT64_MAX);
  CHECK(list[3].type() == JsonType::floating);  // beyond 64 bits, as nlohmann reads it
  CHECK(list[4].type() == JsonType::floating);
  CHECK((list[5].is_boolean() && list[5].boolean()));
  CHECK(list[6].is_null());
  CHECK(root.find("a")->text() == "x\xC3\xA9\xF0\x9F\x98\x80\n");
  // A string without escapes is a view of the text itself.
  const auto plain = root.find("plain")->text();
  CHECK(plain == "abc");
  CHECK((plain.data() >= text.data() && plain.data() < text.data() + text.size()));
  CHECK(root.find("missing") == nullptr);
  CHECK(root.find("")->object().empty());
  auto sorted = sorted_members(root);
  REQUIRE(sorted.size() == 4);
  CHECK(sorted[0]->key == "");
  CHECK(sorted[1]->key == "a");
  CHECK(sorted[3]->key == "plain");
}

TEST_CASE("json document: refusals name the file and the offset") {
  CHECK(refusal("{\"a\":1} x") ==
        "t.json: invalid JSON at offset 8: unexpected character after the value; expected end of "
        "input");
  CHECK(refusal("") ==
        "t.json: invalid JSON at offset 0: unexpected end of input; expected a value");
  CHECK(refusal("[1,]").find("offset 3:") != std::string::npos);
  CHECK(refusal("[01]").find("offset 2:") != std::string::npos);
  CHECK(refusal("[1e400]") ==
        "t.json: invalid JSON at offset 1: number overflow (beyond a 64-bit double)");
  CHECK(refusal("[\"\\ud83d\"]").find("low surrogate") != std::string::npos);
  CHECK(refusal("[\"\\ude00\"]").find("low surrogate") != std::string::npos);
  CHECK(refusal("[\"\xC0\xAF\"]") == "t.json: invalid JSON at offset 2: invalid UTF-8 in a string");
  CHECK(refusal("[\"a\x01\"]").find("control character") != std::string::npos);
  CHECK(refusal(std::string("[1]\0[2]", 7)).find("offset 3:") != std::string::npos);
  CHECK(refusal("{\"a\":1 /* no */}").find("offset 7:") != std::string::npos);
  CHECK(refusal("[tru]").find("invalid literal") != std::string::npos);
}

TEST_CASE("json document: duplicate keys and depth") {
  CHECK(refusal("{\"a\":1,\"b\":{},\"a\":2}") == "t.json: duplicate key 'a'");
  std::string wide = "{";
  for (int i = 0; i < 40; ++i) wide += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  CHECK(refusal(wide + "\"k7\":0}") == "t.json: duplicate key 'k7'");  // the hashed path
  CHECK_NOTHROW(JsonDocument(wide + "\"k40\":0}", "t.json"));
  // The same key in sibling objects is no duplicate.
  CHECK_NOTHROW(JsonDocument("{\"a\":{\"x\":1},\"b\":{\"x\":2}}", "t.json"));
  const std::string deep64 = std::string(64, '[') + std::string(64, ']');
  CHECK_NOTHROW(JsonDocument(deep64, "t.json"));
  CHECK(refusal("[" + deep64 + "]") == "t.json: JSON nested deeper than 64 levels");
}

}  // namespace
}  // namespace ptepack
