// Tests for the safetensors reader, index reader and writer layout, incl. hostile headers.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/byte_reader.h"
#include "ptepack/base/error.h"
#include "json/json_util.h"
#include "containers/safetensors.h"
#include "ptepack/hash/sha256.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ptepack;
using nlohmann::json;

namespace {

const std::string kData = PTEPACK_TEST_DATA_DIR;

using ptepack::test::TempDir;

using ptepack::test::write_file;

// A safetensors file from a literal header (unpadded) and data bytes.
std::string blob(const std::string& header, const std::string& data = "") {
  std::string out;
  put_u64(out, header.size());
  return out + header + data;
}

std::string tensor_bytes(const TensorData& tensor) {
  std::string out(static_cast<size_t>(tensor.bytes.size), '\0');
  tensor.bytes.file->read_at(tensor.bytes.offset,
                             std::span(reinterpret_cast<uint8_t*>(out.data()), out.size()));
  return out;
}

template <typename F>
void require_error(F&& call, ErrorCode code, const std::string& needle) {
  try {
    call();
    FAIL("expected an error containing: " << needle);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    CHECK_THAT(e.what(), Catch::Contains(needle));
  }
}

// Reads `bytes` as a whole safetensors file named "<dir>/t.safetensors".
safetensors::File read_blob(const TempDir& dir, const std::string& bytes) {
  write_file(dir / "t.safetensors", bytes);
  return safetensors::read(InputFile::open(dir / "t.safetensors"));
}

void require_blob_error(const std::string& bytes, const std::string& needle) {
  TempDir dir;
  require_error([&] { read_blob(dir, bytes); }, ErrorCode::invalid_input, needle);
}

std::string entry(const std::string& dtype, const std::string& shape, uint64_t begin,
                  uint64_t end) {
  return fmt::format(R"({{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", dtype, shape, begin,
                     end);
}

// Runs the independent Python reader and returns its parsed JSON output.
json python_read(const fs::path& path, const std::string& extra = "") {
  std::string script = kData + "/../tools/st_reader.py";
  std::string command = "python3 '" + script + "' " + extra + " '" + path.string() + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  int status = ::pclose(pipe);
  INFO(command);
  REQUIRE(status == 0);
  return json::parse(out);
}

void require_python_agrees(const fs::path& path, const safetensors::File& file,
                           const std::string& extra = "") {
  json py = python_read(path, extra);
  CHECK(py["data_start"].get<uint64_t>() == file.data_start);
  CHECK(py["metadata"].get<std::map<std::string, std::string>>() == file.metadata);
  REQUIRE(py["tensors"].size() == file.tensors.size());
  auto it = file.tensors.begin();
  for (const json& t : py["tensors"]) {
    const auto& [key, tensor] = *it++;
    INFO(key);
    CHECK(t["key"].get<std::string>() == key);
    CHECK(t["dtype"].get<std::string>() == safetensors_code(tensor.dtype));
    CHECK(t["shape"].get<Shape>() == tensor.shape);
    CHECK(t["offset"].get<uint64_t>() == tensor.bytes.offset);
    CHECK(t["nbytes"].get<uint64_t>() == tensor.bytes.size);
    CHECK(t["sha256"].get<std::string>() == to_hex(sha256(tensor_bytes(tensor))));
  }
}

}  // namespace

TEST_CASE("safetensors: reads the prefill and decode fixtures", "[safetensors]") {
  auto prefill = safetensors::read(InputFile::open(kData + "/prefill.safetensors"));
  auto decode = safetensors::read(InputFile::open(kData + "/decode.safetensors"));
  const std::vector<std::string> keys = {"_lifted_tensor_constant0",
                                         "layers.0.attention.wq.scales",
                                         "layers.0.attention.wq.weight",
                                         "layers.0.attention.wq.zero_points",
                                         "pos",
                                         "tok_embeddings.weight"};
  for (const auto* file : {&prefill, &decode}) {
    std::vector<std::string> got;
    for (const auto& [key, tensor] : file->tensors) got.push_back(key);
    CHECK(got == keys);
    CHECK(file->metadata.empty());
    CHECK(file->data_start == 488);
    const TensorData& weight = file->tensors.at("layers.0.attention.wq.weight");
    CHECK(weight.dtype == DType::BYTE);
    CHECK(weight.shape == Shape{16, 8});
    CHECK(weight.bytes.size == 128);
    CHECK(file->tensors.at("layers.0.attention.wq.zero_points").dtype == DType::CHAR);
    CHECK(file->tensors.at("tok_embeddings.weight").shape == Shape{32, 16});
    CHECK(file->tensors.at("pos").dtype == DType::LONG);
  }
  const TensorData& c0 = prefill.tensors.at("_lifted_tensor_constant0");
  CHECK(c0.dtype == DType::FLOAT);
  CHECK(c0.shape.empty());
  CHECK(c0.bytes.offset == 488);
  CHECK(c0.bytes.size == 4);
  const TensorData& d0 = decode.tensors.at("_lifted_tensor_constant0");
  CHECK(d0.dtype == DType::LONG);
  CHECK(d0.shape.empty());
  CHECK(d0.bytes.size == 8);
  CHECK(decode.tensors.at("layers.0.attention.wq.scales").bytes.offset == 488 + 8);
  CHECK(decode.tensors.at("tok_embeddings.weight").bytes.offset == 488 + 224);
}

TEST_CASE("safetensors: the Python reader agrees on the fixtures", "[safetensors]") {
  for (const char* name : {"prefill.safetensors", "decode.safetensors"}) {
    fs::path path = kData + "/" + name;
    require_python_agrees(path, safetensors::read(InputFile::open(path)));
  }
}

TEST_CASE("safetensors: plan_file writes files that read back", "[safetensors]") {
  TempDir dir;
  // Given in the order the data is laid out; the header still lists keys sorted.
  std::vector<safetensors::Entry> entries = {
      {"zeta", DType::FLOAT, {2, 3}, 24}, {"alpha \"quoted\"\n", DType::LONG, {}, 8},
      {"empty", DType::HALF, {0, 5}, 0},  {"b\xc3\xa9ta", DType::BFLOAT16, {3}, 6},
      {"flags", DType::BOOL, {5}, 5},
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "a \"b\""}};
  auto layout = safetensors::plan_file(entries, metadata);
  CHECK(layout.head.size() % 8 == 0);
  CHECK(layout.data_offsets.size() == entries.size());
  CHECK(layout.data_offsets[0] == layout.head.size());
  CHECK(layout.data_offsets[1] == layout.head.size() + 24);
  CHECK(layout.data_offsets[4] == layout.head.size() + 38);
  CHECK(layout.file_size == layout.head.size() + 43);
  CHECK(layout.head.substr(8, 16) == R"({"__metadata__":)");
  CHECK_THAT(layout.head, Catch::Contains(R"("alpha \"quoted\"\n":{"dtype":"I64","shape":[],)"
                                          R"("data_offsets":[24,32]},"b)"));
  // Only space padding (fewer than 8) follows the closing brace.
  const size_t close = layout.head.rfind('}');
  CHECK(layout.head.find_first_not_of(' ', close + 1) == std::string::npos);
  CHECK(layout.head.size() - close - 1 < 8);
  // Same input, same bytes.
  CHECK(safetensors::plan_file(entries, metadata).head == layout.head);

  std::string contents = layout.head;
  std::vector<std::string> payloads;
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string bytes;
    for (uint64_t b = 0; b < entries[i].nbytes; ++b) bytes += static_cast<char>('A' + i + b);
    payloads.push_back(bytes);
    contents += bytes;
  }
  REQUIRE(contents.size() == layout.file_size);
  write_file(dir / "w.safetensors", contents);
  auto file = safetensors::read(InputFile::open(dir / "w.safetensors"));
  CHECK(file.metadata == metadata);
  CHECK(file.data_start == layout.head.size());
  REQUIRE(file.tensors.size() == entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorData& t = file.tensors.at(entries[i].key);
    CHECK(t.dtype == entries[i].dtype);
    CHECK(t.shape == entries[i].shape);
    CHECK(t.bytes.offset == layout.data_offsets[i]);
    CHECK(tensor_bytes(t) == payloads[i]);
  }
  require_python_agrees(dir / "w.safetensors", file);
}

TEST_CASE("safetensors: plan_file header form", "[safetensors]") {
  auto layout =
      safetensors::plan_file({{"b", DType::FLOAT, {2}, 8}, {"a", DType::CHAR, {}, 1}}, {});
  std::string json_text = R"({"a":{"dtype":"I8","shape":[],"data_offsets":[8,9]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const size_t padded = (json_text.size() + 7) / 8 * 8;
  std::string expected;
  put_u64(expected, padded);
  expected += json_text + std::string(padded - json_text.size(), ' ');
  CHECK(layout.head == expected);
  CHECK(layout.data_offsets == std::vector<uint64_t>{120, 128});
  CHECK(layout.file_size == 129);
  auto empty = safetensors::plan_file({}, {});
  CHECK(empty.head == std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  CHECK(empty.file_size == 16);
}

TEST_CASE("safetensors: plan_file rejects what the reader would reject", "[safetensors]") {
  using E = safetensors::Entry;
  auto plan = [](std::vector<E> entries) { safetensors::plan_file(entries, {}); };
  require_error(
      [&] {
        plan({{"a", DType::FLOAT, {2}, 8}, {"a", DType::BYTE, {}, 1}});
      },
      ErrorCode::invalid_input, "duplicate tensor key 'a'");
  require_error(
      [&] {
        plan({{"", DType::FLOAT, {}, 4}});
      },
      ErrorCode::invalid_input, "empty tensor key");
  require_error(
      [&] {
        plan({{"__metadata__", DType::FLOAT, {}, 4}});
      },
      ErrorCode::invalid_input, "reserved");
  require_error(
      [&] {
        plan({{"w", DType::FLOAT, {2}, 7}});
      },
      ErrorCode::invalid_input, "tensor 'w' has 7 bytes, which do not match F32 [2]");
  require_error(
      [&] {
        plan({{"w", DType::FLOAT, {-2}, 8}});
      },
      ErrorCode::invalid_input, "do not match F32 [-2]");
  require_error(
      [&] {
        plan({{"bad\xff", DType::BYTE, {}, 1}});
      },
      ErrorCode::invalid_input, "is not valid UTF-8");
  require_error(
      [&] {
        plan({{std::string(5000, 'k'), DType::BYTE, {}, 1}});
      },
      ErrorCode::invalid_input, "longer than the limit of 4096 bytes");
  require_error(
      [&] {
        plan({{"w", DType::BYTE, Shape(33, 1), 1}});
      },
      ErrorCode::invalid_input, "tensor 'w' has rank 33, above the limit of 32");
}

namespace {

// 8-byte length, braces, each member (offsets in the given order), commas between them.
uint64_t exact_header_size(const std::vector<safetensors::Entry>& entries) {
  uint64_t size = 8 + 2 + (entries.empty() ? 0 : entries.size() - 1);
  uint64_t offset = 0;
  for (const auto& e : entries) {
    size += safetensors::entry_json_size(e.key, e.dtype, e.shape, offset, offset + e.nbytes);
    offset += e.nbytes;
  }
  return size;
}

}  // namespace

TEST_CASE("safetensors: header size is the sum of its members for any entries", "[safetensors]") {
  std::mt19937_64 rng(20240607);
  const std::vector<DType> dtypes = {DType::BYTE,  DType::CHAR,     DType::SHORT,  DType::INT,
                                     DType::LONG,  DType::HALF,     DType::FLOAT,  DType::DOUBLE,
                                     DType::BOOL,  DType::BFLOAT16, DType::UINT16, DType::UINT32,
                                     DType::UINT64};
  const std::vector<std::string> pieces = {
      "a", "Z", "0", ".", "\"", "\\", "\n", "\x01", "\x7f", "\xc3\xa9", "\xe2\x82\xac", "/", " "};
  bool saw_20_digits = false;
  for (int round = 0; round < 300; ++round) {
    std::vector<safetensors::Entry> entries;
    std::map<std::string, std::string> metadata;
    for (uint64_t i = rng() % 4; i > 0; --i) {
      metadata[pieces[rng() % pieces.size()] + std::to_string(i)] = pieces[rng() % pieces.size()];
    }
    // Huge tensors in some rounds push offsets to 20 digits (the sum stays below 2^64).
    const bool huge = round % 3 == 0;
    const size_t count = 1 + rng() % 6;
    for (size_t i = 0; i < count; ++i) {
      safetensors::Entry e;
      for (uint64_t n = 1 + rng() % 8; n > 0; --n) e.key += pieces[rng() % pieces.size()];
      e.key += "#" + std::to_string(i);
      e.dtype = huge ? DType::BYTE : dtypes[rng() % dtypes.size()];
      if (huge) {
        e.shape = {static_cast<int64_t>((std::numeric_limits<uint64_t>::max() >> 3) / count -
                                        rng() % 1000)};
      } else {
        for (uint64_t r = rng() % 5; r > 0; --r) e.shape.push_back(static_cast<int64_t>(rng() % 7));
        if (rng() % 4 == 0) e.shape.push_back(std::numeric_limits<int32_t>::max());
      }
      e.nbytes = *byte_size(e.dtype, e.shape);
      entries.push_back(e);
    }
    if (huge) {
      const auto max = std::numeric_limits<int64_t>::max();
      entries.push_back({"tail", DType::BYTE, {max}, static_cast<uint64_t>(max)});
    }
    auto layout = safetensors::plan_file(entries, metadata);
    INFO("round " << round);
    CHECK(layout.head.size() == (layout.header_size + 7) / 8 * 8);
    if (metadata.empty()) CHECK(layout.header_size == exact_header_size(entries));
    if (layout.file_size > 10'000'000'000'000'000'000ULL) saw_20_digits = true;
  }
  CHECK(saw_20_digits);
  // The widest single entry: a 19-digit dim, and offsets of 20 digits in the second entry.
  const int64_t dim = std::numeric_limits<int64_t>::max() - 1000;
  std::vector<safetensors::Entry> widest = {{"a", DType::BOOL, {dim}, static_cast<uint64_t>(dim)},
                                            {"b", DType::BOOL, {dim}, static_cast<uint64_t>(dim)}};
  auto layout = safetensors::plan_file(widest, {});
  CHECK_THAT(layout.head, Catch::Contains("[9223372036854774807,18446744073709549614]"));
  CHECK(layout.header_size == exact_header_size(widest));
}

TEST_CASE("safetensors: reads a file stored inside a larger file", "[safetensors]") {
  TempDir dir;
  const std::string fixture = test::file_bytes(kData + "/prefill.safetensors");
  write_file(dir / "outer.bin", std::string(13, 'P') + fixture + std::string(29, 'S'));
  auto outer = InputFile::open(dir / "outer.bin");
  const std::string member = "outer.ptn:program.safetensors";
  auto inner = safetensors::read(outer, 13, fixture.size(), member);
  auto whole = safetensors::read(InputFile::open(kData + "/prefill.safetensors"));
  CHECK(inner.data_start == 13 + whole.data_start);
  REQUIRE(inner.tensors.size() == whole.tensors.size());
  for (const auto& [key, tensor] : whole.tensors) {
    const TensorData& embedded = inner.tensors.at(key);
    CHECK(embedded.bytes.file == outer);
    CHECK(embedded.bytes.offset == tensor.bytes.offset + 13);
    CHECK(tensor_bytes(embedded) == tensor_bytes(tensor));
  }
  require_python_agrees(dir / "outer.bin", inner,
                        fmt::format("--offset 13 --size {}", fixture.size()));
  // The member's range is what counts: one byte more or less breaks the tiling.
  require_error([&] { safetensors::read(outer, 13, fixture.size() - 1, member); },
                ErrorCode::invalid_input,
                member +
                    ": tensor 'tok_embeddings.weight' has data_offsets [220, 2268] past the "
                    "end of the data section (2267 bytes)");
  require_error([&] { safetensors::read(outer, 13, fixture.size() + 1, member); },
                ErrorCode::invalid_input,
                member +
                    ": the last 1 bytes of the data section (from offset 2268) belong to no "
                    "tensor");
  require_error([&] { safetensors::read(outer, 14, outer->size() - 13, member); },
                ErrorCode::invalid_input,
                fmt::format("{}: {} bytes at offset 14 lie outside the file ({} bytes)", member,
                            outer->size() - 13, outer->size()));
}

namespace {

// A shard holding one U8 [1] tensor per key, whose byte is the key's first character.
void write_shard(const fs::path& path, const std::vector<std::string>& keys) {
  std::vector<safetensors::Entry> entries;
  std::string data;
  for (const auto& key : keys) {
    entries.push_back({key, DType::BYTE, {1}, 1});
    data += key.front();
  }
  write_file(path, safetensors::plan_file(entries, {}).head + data);
}

}  // namespace

TEST_CASE("safetensors: index_json form", "[safetensors]") {
  CHECK(safetensors::index_json(12, {{"a", "s1"}, {"b", "s2"}}) ==
        "{\n  \"metadata\": {\n    \"total_size\": 12\n  },\n  \"weight_map\": {\n"
        "    \"a\": \"s1\",\n    \"b\": \"s2\"\n  }\n}\n");
  CHECK(safetensors::index_json(0, {}) ==
        "{\n  \"metadata\": {\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n");
  // The same text as a DOM printed by json_text, escapes included.
  const std::vector<std::pair<std::string_view, std::string_view>> odd{
      {"", "e"}, {"q\"\\\n\x01", "f"}, {"\xc3\xa9", "g.safetensors"}};
  nlohmann::json dom{
      {"metadata", {{"total_size", 7}}},
      {"weight_map", {{"", "e"}, {"q\"\\\n\x01", "f"}, {"\xc3\xa9", "g.safetensors"}}}};
  CHECK(safetensors::index_json(7, odd) == json_text(dom));
  CHECK_THROWS_WITH(safetensors::index_json(1, {{"bad \xff", "s"}}),
                    Catch::Contains("not valid UTF-8"));
}

TEST_CASE("safetensors: reads a sharded set through its index", "[safetensors]") {
  TempDir dir;
  fs::create_directory(dir / "sub");
  write_shard(dir / "one.safetensors", {"a", "b"});
  write_shard(dir / "sub" / "two.safetensors", {"c"});
  const fs::path index = dir / "model.safetensors.index.json";
  // Two spellings of one shard: it is still opened and checked once, as one file.
  write_file(index, safetensors::index_json(3, {{"a", "one.safetensors"},
                                                {"b", "./one.safetensors"},
                                                {"c", "sub/two.safetensors"}}));
  auto table = safetensors::read_index(index);
  REQUIRE(table.size() == 3);
  CHECK(table.at("a").bytes.file == table.at("b").bytes.file);
  CHECK(table.at("c").bytes.file->path().filename() == "two.safetensors");
  CHECK(tensor_bytes(table.at("b")) == "b");
  CHECK(tensor_bytes(table.at("c")) == "c");
  CHECK(table.at("c").dtype == DType::BYTE);
  CHECK(table.at("c").shape == Shape{1});

  write_file(index, R"({"weight_map":{}})");
  CHECK(safetensors::read_index(index).empty());
}

TEST_CASE("safetensors: index rejections", "[safetensors]") {
  TempDir root;
  const fs::path dir = root / "set";
  fs::create_directory(dir);
  write_shard(dir / "one.safetensors", {"a", "b"});
  write_shard(dir / "two.safetensors", {"b"});
  write_file(dir / "bad.safetensors", "garbage");
  write_shard(root / "outside.safetensors", {"a"});
  fs::create_symlink("../outside.safetensors", dir / "link.safetensors");
  const fs::path index = dir / "model.safetensors.index.json";
  auto expect = [&](const std::string& text, ErrorCode code, const std::string& needle) {
    write_file(index, text);
    require_error([&] { safetensors::read_index(index); }, code, needle);
  };
  auto with_map = [](const std::string& members) {
    return R"({"metadata":{"total_size":2},"weight_map":{)" + members + "}}";
  };
  const auto bad = ErrorCode::invalid_input;
  expect(with_map(R"("a":"../outside.safetensors")"), bad,
         index.string() + ": shard '../outside.safetensors' of key 'a' has a '..' component");
  expect(with_map(R"("a":"sub/../../outside.safetensors")"), bad, "has a '..' component");
  expect(with_map(R"("a":"/tmp/x.safetensors")"), bad,
         "shard '/tmp/x.safetensors' of key 'a' is an absolute path");
  expect(with_map(R"("a":"link.safetensors")"), bad,
         "shard 'link.safetensors' of key 'a' resolves to " +
             fs::canonical(root / "outside.safetensors").string() +
             ", not to a file inside the index's directory");
  expect(with_map(R"("a":".")"), bad, "not to a file inside the index's directory");
  expect(with_map(R"("a":"missing.safetensors")"), ErrorCode::io,
         "shard 'missing.safetensors' (holding 'a') does not exist");
  expect(with_map(R"("a":"one.safetensors","b":"one.safetensors","z":"one.safetensors")"), bad,
         "key 'z' is mapped to shard 'one.safetensors', which does not contain it");
  expect(with_map(R"("a":"one.safetensors")"), bad,
         "shard 'one.safetensors' holds 'b', which the weight_map does not list");
  expect(with_map(R"("a":"one.safetensors","b":"two.safetensors")"), bad,
         "shard 'one.safetensors' holds 'b', which the weight_map maps to 'two.safetensors'");
  expect(with_map(R"("a":"bad.safetensors")"), bad,
         "bad.safetensors: 7 bytes is too short for the 8-byte header length");
  expect(with_map(R"("a":"one.safetensors","a":"one.safetensors")"), bad, "duplicate key 'a'");
  expect(with_map(R"("a":7)"), bad, "weight_map value of 'a' is not a string");
  expect(with_map(R"("a":"")"), bad, "key 'a' maps to an empty shard name");
  expect(with_map(R"("":"one.safetensors")"), bad, "empty tensor key");
  expect(R"({"metadata":{}})", bad, "index has no \"weight_map\"");
  expect(R"({"weight_map":[]})", bad, "\"weight_map\" is not an object");
  expect(R"({"metadata":3,"weight_map":{}})", bad, "\"metadata\" is not an object");
  expect("[]", bad, "index is not a JSON object");
  expect(std::string(10000, '['), bad, index.string() + ": JSON nested deeper than 64 levels");
  expect(R"({"weight_map":{"a":"one.safetensors"})", bad,
         index.string() + ": invalid JSON at offset 37: syntax error while parsing object");
}

TEST_CASE("safetensors: parse_json_strict", "[safetensors]") {
  const std::string text = R"({"x":[1,{"y":null},-2,2.5,true],"z":"s"})";
  CHECK(parse_json_strict(text, "t.json") == json::parse(text));
  require_error([] { (void)parse_json_strict(R"({"a":{"b":1,"b":2}})", "t.json"); },
                ErrorCode::invalid_input, "t.json: duplicate key 'b'");
  require_error([] { (void)parse_json_strict(R"([{"a":1},{"a":2,"a":3}])", "t.json"); },
                ErrorCode::invalid_input, "t.json: duplicate key 'a'");
  const std::string deepest = std::string(64, '[') + std::string(64, ']');
  CHECK(parse_json_strict(deepest, "t.json").is_array());
  require_error([] { (void)parse_json_strict(std::string(65, '['), "t.json"); },
                ErrorCode::invalid_input, "t.json: JSON nested deeper than 64 levels");
  std::string objects;
  for (int i = 0; i < 10000; ++i) objects += R"({"a":)";
  require_error([&] { (void)parse_json_strict(objects, "t.json"); }, ErrorCode::invalid_input,
                "nested deeper than 64 levels");
  require_error([] { (void)parse_json_strict("[\"\xc3\"]", "t.json"); }, ErrorCode::invalid_input,
                "t.json: invalid JSON at offset 3: syntax error");
  require_error([] { (void)parse_json_strict("", "t.json"); }, ErrorCode::invalid_input,
                "t.json: invalid JSON at offset 0: syntax error while parsing value - unexpected "
                "end of input; expected '[', '{', or a literal");
}

TEST_CASE("safetensors: truncation at every byte is invalid_input", "[safetensors][corrupt]") {
  TempDir dir;
  for (const char* name : {"prefill.safetensors", "decode.safetensors"}) {
    const std::string fixture = test::file_bytes(kData + "/" + name);
    write_file(dir / "full.safetensors", fixture);
    auto file = InputFile::open(dir / "full.safetensors");
    for (uint64_t size = 0; size < fixture.size(); ++size) {
      INFO(name << " cut to " << size << " bytes");
      try {
        safetensors::read(file, 0, size, "cut");
        FAIL("a truncated file was accepted");
      } catch (const Error& e) {
        REQUIRE(e.code() == ErrorCode::invalid_input);
        REQUIRE_THAT(e.what(), Catch::StartsWith("cut: "));
      }
    }
    // Real truncated files take the whole-file path.
    for (size_t size :
         {size_t{0}, size_t{7}, size_t{8}, size_t{300}, size_t{488}, fixture.size() - 1}) {
      require_blob_error(fixture.substr(0, size), "t.safetensors: ");
    }
  }
}

namespace {

// A file written once and then patched in place: rewriting whole files per variant is slow, and
// InputFile's positioned reads see every patch.
class PatchableFile {
 public:
  PatchableFile(const fs::path& path, const std::string& bytes) {
    write_file(path, bytes);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd_ >= 0);
    file_ = InputFile::open(path);
  }
  ~PatchableFile() { ::close(fd_); }
  PatchableFile(const PatchableFile&) = delete;
  PatchableFile& operator=(const PatchableFile&) = delete;
  void patch(uint64_t offset, const std::string& bytes) {
    REQUIRE(::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
            static_cast<ssize_t>(bytes.size()));
  }
  [[nodiscard]] const InputFilePtr& file() const { return file_; }

 private:
  int fd_ = -1;
  InputFilePtr file_;
};

}  // namespace

TEST_CASE("safetensors: a shortened header length is invalid_input", "[safetensors][corrupt]") {
  TempDir dir;
  PatchableFile target(dir / "t.safetensors", test::file_bytes(kData + "/prefill.safetensors"));
  for (uint64_t length = 0; length < 480; ++length) {
    std::string field;
    put_u64(field, length);
    target.patch(0, field);
    INFO("header length " << length);
    require_error([&] { safetensors::read(target.file()); }, ErrorCode::invalid_input,
                  "t.safetensors: ");
  }
}

TEST_CASE("safetensors: overwritten header bytes never crash", "[safetensors][corrupt]") {
  TempDir dir;
  const std::string fixture = test::file_bytes(kData + "/decode.safetensors");
  PatchableFile target(dir / "t.safetensors", fixture);
  size_t rejected = 0;
  for (size_t at = 0; at < 488; ++at) {
    for (char replacement : {'\0', '\xff', '"', '9', '[', '{', '-', ',', ' ', '}', ':'}) {
      if (fixture[at] == replacement) continue;
      target.patch(at, std::string(1, replacement));
      try {
        // Accepted only when still consistent, e.g. a changed character inside a key.
        auto file = safetensors::read(target.file());
        CHECK(file.tensors.size() == 6);
      } catch (const Error& e) {
        INFO("byte " << at << ": " << e.what());
        REQUIRE(e.code() == ErrorCode::invalid_input);
        ++rejected;
      }
    }
    target.patch(at, fixture.substr(at, 1));
  }
  CHECK(rejected > 2000);
}

TEST_CASE("safetensors: header length above the limit", "[safetensors]") {
  TempDir dir;
  std::string bytes;
  put_u64(bytes, Limits::max_header_bytes + 1);
  write_file(dir / "big.safetensors", bytes);
  fs::resize_file(dir / "big.safetensors", Limits::max_header_bytes + 64);  // sparse
  require_error([&] { safetensors::read(InputFile::open(dir / "big.safetensors")); },
                ErrorCode::invalid_input, "header length 268435457 exceeds the limit of 268435456");
}

TEST_CASE("safetensors: rejects malformed headers with a precise message", "[safetensors]") {
  const std::string four(4, '\0');
  auto one = [&](const std::string& value, const std::string& data = std::string(4, '\0')) {
    return blob(R"({"a":)" + value + "}", data);
  };
  auto two = [&](const std::string& a, const std::string& b, size_t data) {
    return blob(R"({"a":)" + a + R"(,"b":)" + b + "}", std::string(data, '\0'));
  };
  std::string huge_length(8, '\xff');
  std::string past_end;
  put_u64(past_end, 3);
  std::string ones = "[1";
  for (int i = 0; i < 32; ++i) ones += ",1";
  ones += "]";
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"\x01\x02\x03", "3 bytes is too short for the 8-byte header length"},
      {huge_length + "{}", "header length 18446744073709551615 exceeds the 2 bytes that follow"},
      {past_end + "{}", "header length 3 exceeds the 2 bytes that follow the length field"},
      {two(entry("F32", "[1]", 0, 4), entry("F32", "[1]", 4, 8), 8).replace(10, 1, "b"),
       "duplicate tensor key 'b'"},
      {one(R"({"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]})"),
       "tensor 'a' has a duplicate field 'dtype'"},
      {blob(R"({"__metadata__":{},"__metadata__":{}})"), "duplicate key '__metadata__'"},
      {blob(R"({"__metadata__":{"k":"1","k":"2"}})"), "duplicate __metadata__ key 'k'"},
      {two(entry("F32", "[1]", 0, 4), entry("F32", "[1]", 8, 12), 12),
       "gap of 4 bytes in the data section at offset 4, before tensor 'b' [8, 12]"},
      {two(entry("U8", "[8]", 0, 8), entry("U8", "[8]", 4, 12), 12),
       "tensor 'b' data_offsets [4, 12] overlap tensor 'a', which ends at 8"},
      {two(entry("F32", "[1]", 0, 4), entry("F32", "[1]", 0, 4), 4),
       "tensor 'b' data_offsets [0, 4] overlap tensor 'a', which ends at 4"},
      {two(entry("U8", "[8]", 0, 8), entry("U8", "[0]", 4, 4), 8),
       "tensor 'b' data_offsets [4, 4] overlap tensor 'a', which ends at 8"},
      {one(entry("F32", "[1]", 0, 4), std::string(6, '\0')),
       "the last 2 bytes of the data section (from offset 4) belong to no tensor"},
      {blob("{}", "xy"),
       "the last 2 bytes of the data section (from offset 0) belong to no tensor"},
      {one(entry("F32", "[2]", 0, 4)),
       "tensor 'a' has data_offsets [0, 4] holding 4 bytes, but F32 [2] needs 8 bytes"},
      {one(entry("U8", "[0]", 4, 0)),
       "tensor 'a' has data_offsets [4, 0] that end before they begin"},
      {one(entry("U8", "[6]", 0, 6)),
       "tensor 'a' has data_offsets [0, 6] past the end of the data section (4 bytes)"},
      {one(entry("Q7", "[4]", 0, 4)), "tensor 'a' has unsupported dtype 'Q7' (supported: F64"},
      {one(entry("F8_E4M3", "[4]", 0, 4)), "tensor 'a' has unsupported dtype 'F8_E4M3'"},
      {one(entry("U8", "[-1]", 0, 4)), "tensor 'a' has negative dim -1 in its shape"},
      {one(entry("U8", "[9223372036854775808]", 0, 4)),
       "tensor 'a' has dim 9223372036854775808 in its shape, which does not fit int64"},
      {one(entry("U8", "[18446744073709551616]", 0, 4)),
       "tensor 'a' has dim 18446744073709551616 in its shape, not an int64"},
      {one(entry("U8", "[1.5]", 0, 4)), "tensor 'a' has dim 1.5 in its shape, not an int64"},
      {one(entry("F32", "[4294967296,4294967296,16]", 0, 4)),
       "tensor 'a' has shape [4294967296, 4294967296, 16], whose byte size overflows 64 bits"},
      {one(entry("U8", ones, 0, 1)), "tensor 'a' has more than 32 dims"},
      {one(R"({"dtype":"U8","shape":[4],"data_offsets":[-1,3]})"),
       "tensor 'a' has negative data offset -1"},
      {one(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4,4]})"),
       "tensor 'a' has more than 2 data_offsets"},
      {one(R"({"dtype":"U8","shape":[4],"data_offsets":[4]})"),
       "tensor 'a' has 1 data_offsets, not [begin, end]"},
      {one(R"({"dtype":"U8","shape":[4],"data_offsets":[0,1e1]})"),
       "tensor 'a' has data offset 1e1, not a uint64"},
      {one(R"({"shape":[1],"data_offsets":[0,4]})"), "tensor 'a' has no \"dtype\""},
      {one(R"({"dtype":"F32","data_offsets":[0,4]})"), "tensor 'a' has no \"shape\""},
      {one(R"({"dtype":"F32","shape":[1]})"), "tensor 'a' has no \"data_offsets\""},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1})"),
       "tensor 'a' has unknown field 'extra'"},
      {one("[1]"), "tensor 'a' is an array, not an object"},
      {one(R"({"dtype":4})"), "tensor 'a' has a dtype that is a number, not a string"},
      {one(R"({"shape":"1"})"), "tensor 'a' has a shape that is a string, not an array"},
      {one(R"({"data_offsets":{}})"),
       "tensor 'a' has data_offsets that are an object, not an array"},
      {one(R"({"shape":[null]})"), "tensor 'a' has null in its shape, not a dim"},
      {one(R"({"data_offsets":[true]})"), "tensor 'a' has a boolean in its data_offsets"},
      {blob(R"({"__metadata__":[]})"), "__metadata__ is an array, not an object"},
      {blob(R"({"__metadata__":{"k":1}})"), "__metadata__ value of 'k' is a number, not a string"},
      {blob("[]"), "header is an array, not a JSON object"},
      {blob(R"({"":)" + entry("F32", "[1]", 0, 4) + "}", four), "empty tensor key"},
      {
          blob("{\"" + std::string(4097, 'k') + "\":{}}"),
          "tensor key 'kkkkkkkkkk",
      },
      {blob("{\"a\xff\":{}}"),
       "invalid JSON at offset 11: syntax error while parsing object key - invalid string: "
       "ill-formed UTF-8 byte; expected string literal"},
      {blob("{\"a\xc3\xa9\xe2\x82\":{}}"), "invalid JSON at offset 15: "},
      {blob("{} x"), "invalid JSON at offset 11: syntax error while parsing value"},
      {blob(""), "invalid JSON at offset 8: syntax error while parsing value - unexpected end"},
      {blob("{\"a\":NaN}"), "invalid JSON at offset 13"},
      // Deep nesting is rejected at its first bracket, whatever the depth.
      {blob(std::string(10000, '[')), "header is an array, not a JSON object"},
      {blob(R"({"a":)" + std::string(10000, '[')), "tensor 'a' is an array, not an object"},
      {blob(R"({"__metadata__":{"k":)" + std::string(10000, '[')),
       "__metadata__ value of 'k' is an array, not a string"},
      {blob(R"({"a":{"shape":)" + std::string(10000, '[')),
       "tensor 'a' has an array in its shape, not a dim"},
  };
  for (const Case& c : cases) {
    INFO("expected: " << c.message);
    require_blob_error(c.bytes, c.message);
  }
}

TEST_CASE("safetensors: the header is a JSON object padded with spaces only", "[safetensors]") {
  // What the reference reader accepts: no BOM or whitespace before the object,
  // nothing but spaces after it (a NUL and garbage after it were accepted once).
  require_blob_error(blob("\xEF\xBB\xBF{}"), "header does not start with '{'");
  require_blob_error(blob("  {}"), "header does not start with '{'");
  require_blob_error(blob("{} \n\t "), "bytes other than spaces after the JSON object");
  require_blob_error(blob(std::string("{}\0garbage", 10)), "header contains a NUL byte");
  require_blob_error(blob(std::string("{}\0 }", 5)), "header contains a NUL byte");
}

TEST_CASE("safetensors: accepts edge cases the format allows", "[safetensors]") {
  TempDir dir;
  CHECK(read_blob(dir, blob("{}")).tensors.empty());
  CHECK(read_blob(dir, blob("{}      ")).tensors.empty());  // space padding, as writers pad
  auto file =
      read_blob(dir, blob(R"({"__metadata__":{"format":"pt"},"e":)" + entry("F16", "[0,3]", 0, 0) +
                              R"(,"s":)" + entry("I16", "[]", 0, 2) + R"(,"z":)" +
                              entry("BOOL", "[-0]", 2, 2) + "}",
                          "xy"));
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(file.tensors.size() == 3);
  CHECK(file.tensors.at("e").shape == Shape{0, 3});
  CHECK(file.tensors.at("e").bytes.size == 0);
  CHECK(file.tensors.at("s").dtype == DType::SHORT);
  CHECK(tensor_bytes(file.tensors.at("s")) == "xy");
  CHECK(file.tensors.at("z").shape == Shape{0});
}

#ifdef NDEBUG  // about 600 MB of keys and header: release builds only
TEST_CASE("safetensors: the writer refuses a header its reader would refuse", "[safetensors]") {
  // Longest keys (4096 bytes), zero-byte tensors: just over 256 MiB of header.
  std::vector<safetensors::Entry> entries;
  const size_t count = (Limits::max_header_bytes / 4096) + 1;
  for (size_t i = 0; i < count; ++i) {
    auto key = std::to_string(i);
    key.insert(0, Limits::max_key_length - key.size(), 'k');
    entries.push_back({std::move(key), DType::BYTE, {0}, 0});
  }
  require_error([&] { (void)safetensors::plan_file(entries, {}); }, ErrorCode::invalid_input,
                fmt::format("for {} tensors would exceed the limit of 268435456 bytes", count));
  entries.resize(count / 2);
  CHECK(safetensors::plan_file(entries, {}).head.size() < Limits::max_header_bytes);
}
#endif
