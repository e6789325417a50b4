// The streaming JSON program reader against FlatBuffers' own text parser (the reference
// for the flatc JSON form): the same programs for every accepted spelling, clear errors
// naming line and column for the rest.
#include <flatbuffers/idl.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "ptepack/base/error.h"
#include "ptepack/graph/program.h"
#include "test_support.h"

using namespace ptepack;

namespace {

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The program FlatBuffers' parser builds from `json`, or null when it refuses it.
ProgramPtr reference_parse(const std::string& json) {
  flatbuffers::Parser parser;
  auto schema = file_text(std::filesystem::path(PTEPACK_SCHEMA_DIR) / "program.fbs");
  REQUIRE(parser.Parse(schema.c_str()));
  if (!parser.Parse(json.c_str())) return nullptr;
  return ProgramPtr(nb::GetProgram(parser.builder_.GetBufferPointer())->UnPack());
}

const std::string kMethod = R"("name": "m", "graph": {"nodes": [)";

// A program whose one method has one node holding `node_fields`.
std::string with_node(const std::string& node_fields) {
  return R"({"methods": [{)" + kMethod + R"({"name": "n", )" + node_fields + "}]}}]}";
}

// A program whose one constant has the TensorMeta `meta`.
std::string with_meta(const std::string& meta) {
  return R"({"methods": [{)" + kMethod +
         R"(]}, "constants": [{"name": "a", "data_key": "b", "meta": )" + meta + "}]}]}";
}

std::string with_arg(const std::string& argument) {
  return with_node(R"("inputs": [{"name": "x", "arg": )" + argument + "}]");
}

void check_same_as_reference(const std::string& json) {
  INFO(json);
  auto expected = reference_parse(json);
  REQUIRE(expected != nullptr);
  auto actual = read_program_json(json, "t.json");
  CHECK(*actual == *expected);
}

}  // namespace

TEST_CASE("JSON programs read like FlatBuffers' own parser reads them") {
  SECTION("fixtures") {
    for (const char* name : {"two_methods.json"}) {
      check_same_as_reference(file_text(test::data_path(name)));
    }
    check_same_as_reference(
        file_text(std::filesystem::path(PTEPACK_EXAMPLES_DIR) / "prefill.json"));
    check_same_as_reference(file_text(std::filesystem::path(PTEPACK_EXAMPLES_DIR) / "decode.json"));
  }
  SECTION("the printed form of every fixture program") {
    auto program = read_program_file(test::data_path("two_methods.ptg"));
    check_same_as_reference(program_to_json(*program));
  }
  SECTION("non-strict spellings flatc accepts") {
    const std::string method = R"({"name": "m", "graph": {"nodes": []}})";
    for (const std::string& json : {
             "{methods: [" + method + "]}",
             "{'methods': [" + method + ",]}",
             R"({"methods": [)" + method + "],}",
             "{/* c */ \"methods\": [" + method + "] // end\n}",
             R"({"methods": [)" + method + R"(], "version": null})",
             R"({"version": "a\u00e9\ud83d\ude00\/\t\x41", "methods": [)" + method + "]}",
             with_meta(R"({"dtype": 6, "dim_order": [0x1, "2", -0, +3, 00012]})"),
             with_meta(R"({"dtype": "FLOAT", "sizes": [{"min": 1, "max": -9223372036854775808}]})"),
             with_meta(R"({"dtype": FLOAT, "sizes": [{"min": 9223372036854775807}, {}]})"),
             with_arg(R"({"value": {"value": 3}, "value_type": "IntArg"})"),
             with_arg(R"({"value_type": FloatArg, "value": {"value": 3.5e0}})"),
             with_arg(R"({"value_type": "FloatArg", "value": {"value": "-1.5"}})"),
             with_arg(R"({"value_type": "FloatArg", "value": {"value": 7}})"),
             with_arg(R"({"value": {"values": [true, 0, 1, false]}, "value_type": "BoolListArg"})"),
             with_arg(R"({"value": {"value": "true"}, "value_type": "BoolArg"})"),
             with_arg(R"({"value": {"values": [1.5, -2, 1e300]}, "value_type": "FloatListArg"})"),
             with_arg(R"({"value_type": "GraphArg", "value": {"name": "g", "graph":
                 {"nodes": [{"name": "i", "inputs": [{"arg": {"value": {"value": 1},
                 "value_type": "IntArg"}}]}]}}})"),
             with_node(R"("op_kind": 2, "metadata": [{"key": "k", "value": "v"}])"),
         }) {
      check_same_as_reference(json);
    }
  }
  SECTION("doubles spelled nan and inf") {
    auto program = read_program_json(
        with_arg(R"({"value_type": "FloatListArg", "value": {"values": [nan, -inf, inf]}})"),
        "t.json");
    const auto* list = program->methods[0]->graph->nodes[0]->inputs[0]->arg->value.AsFloatListArg();
    REQUIRE(list != nullptr);
    REQUIRE(list->values.size() == 3);
    CHECK(std::isnan(list->values[0]));
    CHECK(list->values[1] == -std::numeric_limits<double>::infinity());
    CHECK(list->values[2] == std::numeric_limits<double>::infinity());
  }
  SECTION("a long integer list keeps its order and values") {
    std::string values;
    for (int i = 0; i < 100000; ++i) values += (i ? "," : "") + std::to_string(i * 7 - 3);
    auto json = with_arg(R"({"value_type": "IntListArg", "value": {"values": [)" + values + "]}}");
    check_same_as_reference(json);
  }
}

TEST_CASE("JSON program errors name the file, the place and the problem") {
  auto error_of = [](const std::string& json) {
    try {
      (void)read_program_json(json, "bad.json");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      return std::string(e.what());
    }
    FAIL("accepted: " << json);
    return std::string();
  };
  const std::string method = R"({"name": "m", "graph": {"nodes": []}})";
  CHECK(error_of("{'methods': [\n  {\"name\": 3}]}") ==
        "bad.json: invalid JSON program: line 2, column 12: field 'name': expected a string");
  CHECK_THAT(error_of(R"({"nope": 1})"),
             Catch::Contains("line 1, column 2: unknown field 'nope' in table Program"));
  CHECK_THAT(error_of(R"({"methods": [], "methods": []})"),
             Catch::Contains("field 'methods' set more than once in table Program"));
  CHECK_THAT(error_of(R"({"methods": [{"name": "m", "graph": {}}]})"),
             Catch::Contains("required field 'nodes' is missing in table Graph"));
  CHECK_THAT(error_of(with_arg(R"({"value": {"value": 3}})")),
             Catch::Contains("missing type field for the union value 'value' in table Argument"));
  CHECK_THAT(error_of(with_arg(R"({"value_type": "NoSuchArg"})")),
             Catch::Contains("'NoSuchArg' is not a value of ArgumentValue"));
  CHECK_THAT(error_of(with_meta(R"({"dim_order": [2147483648]})")),
             Catch::Contains("2147483648 does not fit in a 32-bit field"));
  CHECK_THAT(error_of(with_meta(R"({"sizes": [{"max": 9223372036854775808}]})")),
             Catch::Contains("does not fit"));
  CHECK_THAT(error_of(with_meta(R"({"dim_order": [1.0]})")),
             Catch::Contains("'1.0' is not an integer"));
  CHECK_THAT(error_of(with_arg(R"({"value_type": "BoolArg", "value": {"value": 2}})")),
             Catch::Contains("is not a boolean"));
  CHECK_THAT(error_of(with_meta(R"({"dtype": "FLOAT BYTE"})")),
             Catch::Contains("is not a value of ScalarType"));
  CHECK_THAT(error_of("{'methods': [" + method + "]} {}"),
             Catch::Contains("unexpected text after the program object"));
  CHECK_THAT(error_of(R"({"version": "abc)"), Catch::Contains("unterminated string"));
  CHECK_THAT(error_of("{\"version\": \"a\nb\"}"), Catch::Contains("control character"));
  CHECK_THAT(error_of(R"({"version": "\ud800"})"), Catch::Contains("unpaired high surrogate"));
  CHECK_THAT(error_of(R"({"version": "\q"})"), Catch::Contains("unknown escape"));
  CHECK_THAT(error_of(R"({"methods": [)"),
             Catch::Contains("expected '{', found the end of the text"));
  CHECK_THAT(error_of("{/* open"), Catch::Contains("unterminated /* comment"));
  CHECK_THAT(error_of(R"({"methods": null})"),
             Catch::Contains("required field 'methods' is missing"));
  // A union value whose _type names a table-less member.
  CHECK_THAT(error_of(with_arg(R"({"value_type": "NONE", "value": {}})")),
             Catch::Contains("has no table"));
  std::string deep = with_arg(R"({"value_type": "GraphArg", "value": {"name": "g", "graph": @}})");
  std::string nested = R"({"nodes": [{"name": "i", "inputs": [{"arg": {"value_type": "GraphArg",
      "value": {"name": "g", "graph": @}}}]}]})";
  for (int i = 0; i < 80; ++i) deep.replace(deep.find('@'), 1, nested);
  deep.replace(deep.find('@'), 1, R"({"nodes": []})");
  CHECK_THAT(error_of(deep), Catch::Contains("nested deeper than 512 objects and lists"));
}
