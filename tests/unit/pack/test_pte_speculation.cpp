// A directory of .pte programs written while its inputs are hashed, on digests predicted
// from samples: the same files as one written after hashing, and a failed prediction
// caught and written again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/pack/pack.h"
#include "ptepack/pte/pte.h"
#include "test_fixtures.h"

using namespace ptepack;

namespace {

constexpr uint64_t kWeight = 262144;  // ten named-data entries of the MLP fixture have this size

// xnnpack_stress_mlp.pte with its second 256 KiB named-data entry given the first's
// bytes: all of them (`equal`), or all but one byte that no sample a prediction reads
// covers (same length, same samples, different bytes).
std::filesystem::path patched_mlp(const std::filesystem::path& dir, bool equal) {
  const auto source = test::pte_fixture("xnnpack_stress_mlp.pte");
  auto bytes = test::file_bytes(source);
  const auto program = pte::read(InputFile::open(source));
  std::vector<ByteRange> weights;
  for (const auto& entry : program.named_data) {
    if (entry.bytes.size == kWeight) weights.push_back(entry.bytes);
  }
  REQUIRE(weights.size() >= 2);
  bytes.replace(weights[1].offset, kWeight, bytes.substr(weights[0].offset, kWeight));
  if (!equal) bytes[weights[1].offset + 100000] ^= 1;  // samples: 0-4K, 126K-130K, 252K-256K
  const auto path = dir / "mlp.pte";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

PackSummary pack_with(const std::vector<std::filesystem::path>& inputs,
                      const std::filesystem::path& output, uint64_t write_while_hashing_from,
                      std::optional<uint64_t> cap, unsigned jobs = 2) {
  PackOptions options;
  for (const auto& input : inputs) options.inputs.push_back(parse_input_spec(input.string()));
  options.output = output;
  options.jobs = jobs;
  options.write_while_hashing_from = write_while_hashing_from;
  options.sharding.max_shard_bytes = cap;
  return pack(options);
}

}  // namespace

TEST_CASE("pack writes a .pte directory while hashing: the same files, predicted right or not") {
  const std::optional<uint64_t> uncapped;
  for (bool equal : {true, false}) {
    for (auto cap : {uncapped, std::optional<uint64_t>(uint64_t{1} << 20)}) {
      for (bool two : {false, true}) {
        CAPTURE(equal, cap.has_value(), two);
        test::TempDir dir;
        std::vector<std::filesystem::path> inputs{patched_mlp(dir.path(), equal)};
        if (two) inputs.push_back(test::pte_fixture("xnnpack_conv.pte"));
        const auto after = pack_with(inputs, dir.path() / "after", 0, cap);
        const auto during = pack_with(inputs, dir.path() / "during", 1, cap);
        CHECK((test::directory_files(dir.path() / "during") ==
               test::directory_files(dir.path() / "after")));  // not printed: megabytes
        CHECK_FALSE(after.written_while_hashing);
        CHECK(during.written_while_hashing == equal);  // a wrong prediction: written again
        CHECK(during.stored_tensor_count == after.stored_tensor_count);
        CHECK(during.stored_bytes == after.stored_bytes);
        CHECK(during.output_bytes == after.output_bytes);
        // Equal bytes are stored once; the near copy is stored on its own.
        CHECK(after.stored_bytes + (equal ? kWeight : 0) == after.referenced_bytes);
      }
    }
  }
}

TEST_CASE("a .pte directory is written after hashing on one thread and below the threshold") {
  test::TempDir dir;
  const auto input = patched_mlp(dir.path(), true);
  CHECK_FALSE(pack_with({input}, dir.path() / "one", 1, std::nullopt, 1).written_while_hashing);
  CHECK_FALSE(
      pack_with({input}, dir.path() / "below", uint64_t{1} << 40, std::nullopt).written_while_hashing);
  CHECK(test::directory_files(dir.path() / "one") == test::directory_files(dir.path() / "below"));
}
