// Program graph reading: wire compatibility with the reference encoder, JSON form, hostile bytes.
#include <catch2/catch.hpp>

#include "ptepack/base/error.h"
#include "ptepack/graph/program.h"
#include "ptepack/io/input_file.h"
#include "graph/program_access.h"
#include "test_support.h"

using namespace ptepack;

TEST_CASE("the reference-encoded .ptg decodes to the same program as its JSON form") {
  auto binary = read_program_file(test::data_path("two_methods.ptg"));
  auto json = read_program_file(test::data_path("two_methods.json"));
  REQUIRE(binary->methods.size() == 2);
  CHECK(binary->methods[0]->name == "prefill");
  CHECK(binary->methods[1]->name == "decode");
  CHECK(binary->version == "1");
  CHECK(*binary == *json);
  // Re-encoding is deterministic and round-trips.
  auto bytes = write_program_binary(*binary);
  CHECK(bytes == write_program_binary(*json));
  auto again = read_program_binary(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      "again");
  CHECK(*again == *binary);
  CHECK(write_program_binary(*again) == bytes);
}

TEST_CASE("decoded fields match the fixture") {
  auto program = read_program_file(test::data_path("two_methods.ptg"));
  const auto& decode = *program->methods[1];
  REQUIRE(decode.constants.size() == 4);
  CHECK(decode.constants[0]->data_key == "tok_embeddings.weight");
  CHECK(decode.constants[3]->data_key == "pos");
  CHECK(decode.constants[3]->mutated);
  REQUIRE(decode.mutable_buffers.size() == 1);
  CHECK(decode.mutable_buffers[0]->fqn == "kv_cache");
  const auto& quant = decode.constants[1]->meta->quant;
  REQUIRE(quant);
  REQUIRE(quant->scheme.type == nb::QuantScheme::AffineGroup);
  CHECK(quant->scheme.AsAffineGroup()->scale_data_key == "layers.0.attention.wq.scales");
  CHECK(quant->scheme.AsAffineGroup()->quant_min == -8);
}

TEST_CASE("JSON output of a program parses back to the same program") {
  auto program = read_program_file(test::data_path("two_methods.ptg"));
  auto json = program_to_json(*program);
  auto back = read_program_json(json, "rendered");
  CHECK(*back == *program);
}

TEST_CASE("hostile program bytes are rejected with invalid_input") {
  auto file = InputFile::open(test::data_path("two_methods.ptg"));
  auto bytes = file->read_range(0, file->size());
  SECTION("every truncation") {
    for (size_t n = 0; n < bytes.size(); n += (n < 512 ? 1 : 37)) {
      try {
        (void)read_program_binary(std::span<const uint8_t>(bytes.data(), n), "cut.ptg");
        FAIL("truncation at " << n << " was accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::invalid_input);
      }
    }
  }
  SECTION("wrong identifier") {
    auto copy = bytes;
    copy[4] = 'X';
    CHECK_THROWS_WITH(read_program_binary(copy, "bad.ptg"), Catch::Contains("NPTG"));
  }
  SECTION("an unknown ScalarType value") {
    auto program = read_program_file(test::data_path("two_methods.ptg"));
    program->methods[0]->constants[0]->meta->dtype = static_cast<nb::ScalarType>(42);
    auto encoded = write_program_binary(*program);
    std::vector<uint8_t> raw(encoded.begin(), encoded.end());
    CHECK_THROWS_WITH(read_program_binary(raw, "enum.ptg"),
                      Catch::Contains("unknown dtype value 42"));
  }
  SECTION("invalid JSON names the problem") {
    CHECK_THROWS_WITH(read_program_json("{\"methods\": [{\"name\": 3}", "bad.json"),
                      Catch::Contains("bad.json"));
    CHECK_THROWS_WITH(read_program_json("{\"nope\": 1}", "x.json"),
                      Catch::Contains("invalid JSON program"));
  }
}

TEST_CASE("a union tag without its member is an input error (in place and unpacked)") {
  // The verifier accepts a known union tag whose table is absent; the readers
  // used to dereference it (a crash in dump and verify).
  const std::string node = R"({"name": "n", "inputs": [{"name": "x", "arg": {"value_type":
      "TensorArg"}}]})";
  const std::string argument =
      R"({"methods": [{"name": "m", "graph": {"nodes": [)" + node + "]}}]}";
  const std::string quant = R"({"methods": [{"name": "m", "graph": {"nodes": []},
      "constants": [{"name": "a", "data_key": "b", "meta": {"quant": {"scheme_type":
      "AffineGroup"}}}]}]})";
  for (const auto& [json, message] :
       {std::pair{argument,
                  "m.json: method 'm': node 'n': argument of type TensorArg has no value"},
        std::pair{quant,
                  "m.json: method 'm': tensor 'a': quant scheme of type AffineGroup has no "
                  "value"}}) {
    INFO(json);
    try {
      (void)read_program_json_buffer(json, "m.json");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      CHECK(std::string(e.what()) == message);
    }
    CHECK_THROWS_WITH(read_program_json(json, "m.json"), message);
  }
}

TEST_CASE("a program buffer reads in place what its object tree holds") {
  auto buffer = read_program_file_buffer(test::data_path("two_methods.ptg"));
  REQUIRE(buffer);
  const auto& root = buffer.root();
  REQUIRE(root.methods()->size() == 2);
  CHECK(access::text(root.methods()->Get(1)->name()) == "decode");
  auto moved = std::move(buffer);  // the root stays valid: the bytes do not move
  CHECK(&moved.root() == &root);
  CHECK_FALSE(buffer);  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty
  auto tree = unpack_program(std::move(moved));
  CHECK(*tree == *read_program_file(test::data_path("two_methods.json")));
}

namespace {

std::string buffer_text(const flatbuffers::DetachedBuffer& buffer) {
  return {reinterpret_cast<const char*>(buffer.data()), buffer.size()};
}

// The fixture with every method's constants and nodes repeated until the
// encoded program is about `target` bytes.
ProgramPtr grown_fixture(size_t target) {
  auto program = read_program_file(test::data_path("two_methods.ptg"));
  auto size = write_program_binary(*program).size();
  auto rounds = target / size + 1;
  for (auto& method : program->methods) {
    auto constants = method->constants.size();
    auto nodes = method->graph->nodes.size();
    for (size_t r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < constants; ++i) {
        method->constants.push_back(std::make_unique<nb::NamedTensorRefT>(*method->constants[i]));
        method->constants.back()->data_key += "." + std::to_string(r);
      }
      for (size_t i = 0; i < nodes; ++i) {
        method->graph->nodes.push_back(std::make_unique<nb::NodeT>(*method->graph->nodes[i]));
      }
    }
  }
  return program;
}

}  // namespace

TEST_CASE("write_program_buffer gives write_program_binary's bytes and frees the program") {
  auto check = [](ProgramPtr program, size_t hint) {
    auto expected = write_program_binary(*program);
    auto buffer = write_program_buffer(std::move(program), hint);
    CHECK(buffer_text(buffer) == expected);
  };
  SECTION("the fixture, on the heap") {
    check(read_program_file(test::data_path("two_methods.ptg")), 64);
  }
  SECTION("an empty version and no methods") { check(std::make_unique<nb::ProgramT>(), 64); }
  SECTION("a program larger than its reserved pages, grown by remapping") {
    auto program = grown_fixture(6 << 20);
    auto expected = write_program_binary(*program);
    REQUIRE(expected.size() > 3 * (1 << 20));
    check(std::move(program), 1 << 20);  // 1.5 MiB reserved, about 6 MiB written
  }
  SECTION("a heap buffer that grows") { check(grown_fixture(2 << 20), 1024); }
  SECTION("the bytes read back to the same program") {
    auto program = grown_fixture(2 << 20);
    auto copy = std::make_unique<nb::ProgramT>(*program);
    auto buffer = write_program_buffer(std::move(copy), 4 << 20);
    auto again = read_program_binary({buffer.data(), buffer.size()}, "buffer.ptg");
    CHECK(*again == *program);
  }
}
