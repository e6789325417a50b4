// A package written while it is hashed, on dedup groups predicted from samples: the same bytes
// as one written after hashing, and a failed prediction caught before anything is kept.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pack/pack_internal.h"
#include "ptepack/base/error.h"
#include "hash/parallel_hash.h"
#include "ptepack/pack/pack.h"
#include "test_support.h"

using namespace ptepack;

namespace {

struct Blob {
  std::string key;
  std::vector<uint8_t> bytes;
  bool is_mutable = false;
};

std::vector<uint8_t> pattern(size_t size, uint64_t seed) {
  test::Xorshift random(seed + 1);  // a zero state stays zero
  std::vector<uint8_t> bytes(size);
  for (auto& b : bytes) b = static_cast<uint8_t>(random(256));
  return bytes;
}

// The blobs (sorted by key) in one new data file, as pack's stored tensors.
detail::PreparedPack prepare(const std::filesystem::path& path, const std::vector<Blob>& blobs) {
  {
    std::ofstream out(path, std::ios::binary);
    for (const auto& b : blobs)
      out.write(reinterpret_cast<const char*>(b.bytes.data()),
                static_cast<std::streamsize>(b.bytes.size()));
  }
  auto file = InputFile::open(path);
  detail::PreparedPack prepared;
  PackOptions options;
  options.output = "out.ptn";
  prepared.dedup = detail::PackContext(options, OutputKind::package).dedup;  // as pack_graphs
  uint64_t offset = 0;
  for (const auto& b : blobs) {
    StoredTensor t;
    t.key = b.key;
    t.data.dtype = DType::BYTE;
    t.data.shape = {static_cast<int64_t>(b.bytes.size())};
    t.data.bytes = ByteRange{file, offset, b.bytes.size()};
    t.is_mutable = b.is_mutable;
    prepared.tensors.push_back(std::move(t));
    offset += b.bytes.size();
  }
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(builder.CreateString("a program's bytes"));
  prepared.program = builder.Release();
  return prepared;
}

void hash_all(detail::PreparedPack& prepared) {
  std::vector<ByteRange> ranges;
  for (const auto& t : prepared.tensors) ranges.push_back(t.data.bytes);
  auto digests = hash_ranges(ranges, 2);
  for (size_t i = 0; i < digests.size(); ++i) prepared.tensors[i].sha256 = digests[i];
}

// The package written after hashing: the reference.
std::string reference(detail::PreparedPack& prepared, const std::filesystem::path& path,
                      PackSummary& summary) {
  hash_all(prepared);
  summary.output = path.string();
  AtomicOutput output(path, AtomicOutput::Kind::file);
  detail::write_package(prepared, &output, nullptr, summary);
  output.commit();
  return test::file_bytes(path);
}

struct Speculated {
  bool confirmed = false;
  std::string bytes;  // what the speculative writer left, when confirmed
  PackSummary summary;
};

Speculated speculate(detail::PreparedPack& prepared, const std::filesystem::path& path) {
  for (auto& t : prepared.tensors) t.sha256 = Digest{};
  Speculated result;
  result.summary.output = path.string();
  AtomicOutput output(path, AtomicOutput::Kind::file);
  auto speculation = detail::write_package_while_hashing(prepared, output, nullptr, result.summary,
                                                         [&] { hash_all(prepared); });
  REQUIRE(speculation);  // a package's plan on predicted digests never fails
  result.confirmed = detail::confirm_package(prepared, *speculation, nullptr, result.summary);
  if (result.confirmed) {
    output.commit();
    result.bytes = test::file_bytes(path);
  }
  return result;
}

}  // namespace

TEST_CASE("package written while hashing: the bytes of one written after, when predicted right") {
  test::TempDir dir;
  // Duplicates of large and small tensors, a state tensor equal to a
  // constant (never an alias), tensors of unique length, an empty one.
  auto big = pattern(300 << 10, 1);
  auto small = pattern(5000, 2);
  std::vector<Blob> blobs = {{"a/big", big},
                             {"a/small", small},
                             {"b/big", big},
                             {"b/other", pattern(300 << 10, 3)},
                             {"b/small", small},
                             {"c/empty", {}},
                             {"c/odd", pattern(12345, 4)},
                             {"state/big", big, true}};
  auto prepared = prepare(dir / "data.bin", blobs);
  PackSummary expected_summary;
  auto expected = reference(prepared, dir / "reference.ptn", expected_summary);
  REQUIRE(expected_summary.aliases.size() == 2);

  auto result = speculate(prepared, dir / "speculative.ptn");
  REQUIRE(result.confirmed);
  CHECK((result.bytes == expected));  // not printed: megabytes
  CHECK(result.summary.aliases == expected_summary.aliases);
  CHECK(result.summary.stored_tensor_count == expected_summary.stored_tensor_count);
  CHECK(result.summary.stored_bytes == expected_summary.stored_bytes);
  CHECK(result.summary.output_bytes == expected_summary.output_bytes);
}

TEST_CASE("package written while hashing: a wrong prediction is caught") {
  test::TempDir dir;
  // Same length and the same three 4 KiB samples, different bytes between:
  // predicted duplicates that are not.
  auto first = pattern(64 << 10, 5);
  auto second = first;
  second[20000] ^= 0xff;
  auto prepared = prepare(dir / "data.bin", {{"m/first", first}, {"m/second", second}});
  auto result = speculate(prepared, dir / "speculative.ptn");
  CHECK_FALSE(result.confirmed);
  CHECK(result.summary.aliases.empty());
  CHECK(result.summary.output_bytes == 0);
  // Nothing kept: the data file is all the directory holds.
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    left.push_back(entry.path().filename().string());
  CHECK(left == std::vector<std::string>{"data.bin"});

  // Bytes that differ inside a sample are told apart before writing.
  second = first;
  second[100] ^= 0xff;
  prepared = prepare(dir / "data2.bin", {{"m/first", first}, {"m/second", second}});
  CHECK(speculate(prepared, dir / "speculative.ptn").confirmed);
}

TEST_CASE("package written while hashing: only for large packages with little to sample") {
  test::TempDir dir;
  auto prepared =
      prepare(dir / "data.bin", {{"a", pattern(1 << 20, 6)}, {"b", pattern(1 << 20, 7)}});
  CHECK(detail::worth_writing_while_hashing(prepared.tensors, 1 << 20));
  CHECK_FALSE(detail::worth_writing_while_hashing(prepared.tensors, 0));
  CHECK_FALSE(detail::worth_writing_while_hashing(prepared.tensors, (2 << 20) + 1));
  // Many small tensors of one length: sampling would read most of them.
  std::vector<Blob> many;
  for (uint64_t i = 0; i < 64; ++i) many.push_back({fmt::format("t{:02d}", i), pattern(4096, i)});
  prepared = prepare(dir / "data2.bin", many);
  CHECK_FALSE(detail::worth_writing_while_hashing(prepared.tensors, 1));
}

namespace {

// A one-method program binding each blob as a BYTE constant, and its safetensors.
void write_model(const std::filesystem::path& dir, const std::string& method,
                 const std::vector<Blob>& blobs) {
  nlohmann::json nodes = nlohmann::json::array(
      {{{"name", "x"}, {"op_kind", "PLACEHOLDER"}, {"outputs", {{{"name", "x"}}}}}});
  nlohmann::json constants = nlohmann::json::array();
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < blobs.size(); ++i) {
    const auto& b = blobs[i];
    const auto name = fmt::format("c{}", i);
    const auto size = b.bytes.size();
    constants.push_back(
        {{"name", name},
         {"data_key", b.key},
         {"kind", "PARAMETER"},
         {"meta", {{"dtype", "BYTE"}, {"sizes", {{{"min", size}, {"max", size}}}}}}});
    nodes.push_back({{"name", name}, {"op_kind", "PLACEHOLDER"}, {"outputs", {{{"name", name}}}}});
    header[b.key] = {{"dtype", "U8"}, {"shape", {size}}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  nodes.push_back(
      {{"name", "output"},
       {"op_kind", "OUTPUT"},
       {"inputs", {{{"arg", {{"value_type", "TensorListArg"}, {"value", {{"names", {"x"}}}}}}}}}});
  nlohmann::json program = {
      {"version", "1"},
      {"methods",
       {{{"name", method},
         {"graph",
          {{"nodes", nodes},
           {"inputs", {"x"}},
           {"outputs", {"x"}},
           {"tensor_values",
            {{{"name", "x"},
              {"meta", {{"dtype", "FLOAT"}, {"sizes", {{{"min", 4}, {"max", 4}}}}}}}}}}},
         {"constants", constants},
         {"output_specs", {{{"name", "x"}, {"kind", "USER_OUTPUT"}}}},
         {"mutable_buffers", nlohmann::json::array()}}}}};
  std::ofstream(dir / (method + ".json")) << program.dump();
  auto text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(dir / (method + ".safetensors"), std::ios::binary);
  const uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof length);
  out << text;
  for (const auto& b : blobs)
    out.write(reinterpret_cast<const char*>(b.bytes.data()),
              static_cast<std::streamsize>(b.bytes.size()));
}

// Options packing a.json and b.json of `dir` into dir/name at -j2 (never at -j1).
PackOptions model_options(const std::filesystem::path& dir, const std::string& name,
                          uint64_t write_while_hashing_from) {
  PackOptions options;
  options.inputs = {parse_input_spec((dir / "a.json").string()),
                    parse_input_spec((dir / "b.json").string())};
  options.output = dir / name;
  options.write_while_hashing_from = write_while_hashing_from;
  options.jobs = 2;
  return options;
}

std::string pack_model(const std::filesystem::path& dir, const std::string& name,
                       uint64_t write_while_hashing_from, PackSummary* summary) {
  auto options = model_options(dir, name, write_while_hashing_from);
  *summary = pack(options);
  return test::file_bytes(options.output);
}

// Methods a and b sharing a tensor; b's `near` has its length and samples,
// and its bytes too when the prediction is to hold.
void write_near_model(const std::filesystem::path& dir, bool predicted_right) {
  auto shared = pattern(1 << 20, 8);
  auto near = shared;
  if (!predicted_right) near[300000] ^= 1;
  write_model(dir, "a", {{"shared", shared}, {"own", pattern(1 << 20, 9)}});
  write_model(dir, "b", {{"near", near}, {"shared", shared}});
}

}  // namespace

TEST_CASE("pack writes a large package while hashing: the same bytes, predicted right or not") {
  for (bool predicted_right : {true, false}) {
    test::TempDir dir;
    write_near_model(dir.path(), predicted_right);
    PackSummary after, during;
    auto expected = pack_model(dir.path(), "after.ptn", 0, &after);
    auto written = pack_model(dir.path(), "during.ptn", 1, &during);
    CHECK((written == expected));  // not printed: megabytes
    CHECK_FALSE(after.written_while_hashing);
    CHECK(during.written_while_hashing == predicted_right);  // else written again
    CHECK(during.aliases == after.aliases);
    CHECK(during.aliases.size() == (predicted_right ? 2 : 1));
    CHECK(during.output_bytes == after.output_bytes);
    CHECK(during.stored_bytes == after.stored_bytes);
  }
}

TEST_CASE("pack writes a large directory while hashing: the same files, predicted right or not") {
  struct Shape {
    ShardFormat format;
    std::optional<uint64_t> cap;
  };
  for (const auto& shape :
       {Shape{ShardFormat::ptd, std::nullopt}, Shape{ShardFormat::ptd, uint64_t{1} << 21},
        Shape{ShardFormat::safetensors, uint64_t{1} << 21}}) {
    for (bool predicted_right : {true, false}) {
      INFO("format " << shard_format_name(shape.format) << ", cap " << shape.cap.value_or(0)
                     << ", predicted right " << predicted_right);
      test::TempDir dir;
      write_near_model(dir.path(), predicted_right);
      auto run = [&](const std::string& name, uint64_t from) {
        auto options = model_options(dir.path(), name, from);
        options.sharding.format = shape.format;
        options.sharding.max_shard_bytes = shape.cap;
        return pack(options);
      };
      auto after = run("after", 0);
      auto during = run("during", 1);
      CHECK_FALSE(after.written_while_hashing);
      CHECK(during.written_while_hashing == predicted_right);  // else written again
      auto expected = test::directory_files(dir / "after");
      CHECK(expected.size() >= 3);                           // program, manifest, shards
      CHECK((test::directory_files(dir / "during") == expected));  // not printed: megabytes
      CHECK(during.aliases == after.aliases);
      CHECK(during.aliases.size() == (predicted_right ? 2 : 1));
      CHECK(during.output_bytes == after.output_bytes);
      CHECK(during.stored_bytes == after.stored_bytes);
      CHECK(during.stored_tensor_count == after.stored_tensor_count);
      REQUIRE(during.shards.size() == after.shards.size());
      for (size_t s = 0; s < after.shards.size(); ++s) {
        CHECK(during.shards[s].file == after.shards[s].file);
        CHECK(during.shards[s].keys == after.shards[s].keys);
        CHECK(during.shards[s].size == after.shards[s].size);
        CHECK(during.shards[s].payload_bytes == after.shards[s].payload_bytes);
      }
    }
  }
}

TEST_CASE("a directory whose predicted plan fails where the real one fits is planned again") {
  // Two tensors of one length that agree on their samples: predicted as one
  // group, whose shard holds both (long) keys in its header. A cap that fits
  // each tensor alone with its own key rejects that shard; the real plan, two
  // shards, fits it.
  test::TempDir dir;
  auto first = pattern(1 << 20, 12);
  auto second = first;
  second[400000] ^= 1;
  const std::string key(200, 'k');
  write_model(dir.path(), "a", {{key, first}});
  write_model(dir.path(), "b", {{key, second}});
  auto run = [&](const std::string& name, uint64_t from, uint64_t cap, uint64_t tensors) {
    auto options = model_options(dir.path(), name, from);
    options.sharding.max_shard_bytes = cap;
    options.sharding.max_shard_tensors = tensors;
    return pack(options);
  };
  auto apart = run("apart", 0, uint64_t{4} << 20, 1);
  REQUIRE(apart.shards.size() == 2);
  const uint64_t cap = std::max(apart.shards[0].size, apart.shards[1].size);
  auto after = run("after", 0, cap, 0);
  auto during = run("during", 1, cap, 0);
  CHECK_FALSE(during.written_while_hashing);
  CHECK(during.shards.size() == 2);
  CHECK((test::directory_files(dir / "during") == test::directory_files(dir / "after")));
}

TEST_CASE("a corrupt input stops a directory written while hashing, leaving nothing") {
  test::TempDir dir;
  auto shared = pattern(1 << 20, 8);
  write_model(dir.path(), "a", {{"shared", shared}, {"own", pattern(1 << 20, 9)}});
  write_model(dir.path(), "b", {{"other", pattern(1 << 20, 13)}, {"shared", shared}});
  auto options = model_options(dir.path(), "packed", 0);
  (void)pack(options);
  // One byte of tensor data flipped in the middle of the shard.
  std::filesystem::path shard;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "packed"))
    if (entry.path().extension() == ".ptd") shard = entry.path();
  REQUIRE(!shard.empty());
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(std::filesystem::file_size(shard) / 2 + 4321);
    char byte = 0;
    file.seekg(at);
    file.get(byte);
    file.seekp(at);
    file.put(static_cast<char>(byte ^ 0x10));
  }
  auto before = test::directory_files(dir.path());
  options.inputs = {parse_input_spec((dir / "packed").string())};
  options.output = dir / "repacked";
  options.write_while_hashing_from = 1;
  try {
    (void)pack(options);
    FAIL("a corrupt input was packed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);  // file_changed (docs/problems.md)
    CHECK_THAT(e.what(), Catch::Contains("SHA-256 differs from the manifest (file changed)"));
  }
  CHECK((test::directory_files(dir.path()) == before));  // no output, no temporary
}
