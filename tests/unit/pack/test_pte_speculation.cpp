// A directory of .pte programs written while its inputs are hashed, on digests predicted
// from samples: the same files as one written after hashing, and a failed prediction
// caught and written again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "core/shard_layout.h"
#include "pack/pack_internal.h"
#include "ptepack/base/error.h"
#include "ptepack/pack/pack.h"
#include "ptepack/pte/pte.h"
#include "test_fixtures.h"

using namespace ptepack;

namespace {

constexpr uint64_t kWeight = 262144;  // ten named-data entries of the MLP fixture have this size

// xnnpack_stress_mlp.pte with its second 256 KiB named-data entry (its key kept) given
// the first's bytes (`copy_first`), with one byte flipped that no sample a prediction
// reads covers (`flip`: same length, same samples, different bytes).
std::filesystem::path edited_mlp(const std::filesystem::path& path, bool copy_first, bool flip) {
  const auto source = test::pte_fixture("xnnpack_stress_mlp.pte");
  auto bytes = test::file_bytes(source);
  const auto program = pte::read(InputFile::open(source));
  std::vector<ByteRange> weights;
  for (const auto& entry : program.named_data) {
    if (entry.bytes.size == kWeight) weights.push_back(entry.bytes);
  }
  REQUIRE(weights.size() >= 2);
  if (copy_first)
    bytes.replace(weights[1].offset, kWeight, bytes.substr(weights[0].offset, kWeight));
  if (flip) bytes[weights[1].offset + 100000] ^= 1;  // samples: 0-4K, 126K-130K, 252K-256K
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The MLP with two equal 256 KiB entries (`equal`), or two that differ by one
// byte outside the samples.
std::filesystem::path patched_mlp(const std::filesystem::path& dir, bool equal) {
  return edited_mlp(dir / "mlp.pte", true, !equal);
}

// A .ptd of named data the MLP's delegates may read: entries of distinct
// lengths (so no prediction samples them) that make hashing worth a prediction.
// Another `variant` gives other lengths and keys, and more of them, for a second input.
std::filesystem::path extra_data(const std::filesystem::path& dir, int variant = 0) {
  const uint64_t shift = 64 * static_cast<uint64_t>(variant);
  std::vector<uint64_t> sizes;
  for (int i = 1; i <= 3 + variant; ++i)
    sizes.push_back((uint64_t{2} << 20) + 16 * static_cast<uint64_t>(i) + shift);
  std::string blob;
  test::Xorshift random(7);
  for (uint64_t size : sizes) {
    for (uint64_t i = 0; i < size; ++i) blob += static_cast<char>(random(256));
  }
  const auto stem = "extra" + std::to_string(variant);
  const auto blob_path = dir / (stem + ".bin");
  std::ofstream(blob_path, std::ios::binary) << blob;
  auto file = InputFile::open(blob_path);
  std::vector<StoredTensor> tensors;
  uint64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    StoredTensor t;
    t.key = stem + "." + std::to_string(i);
    t.data.shape = {static_cast<int64_t>(sizes[i])};
    t.data.bytes = ByteRange{file, offset, sizes[i]};
    t.data.opaque = true;
    t.sha256.fill(static_cast<uint8_t>(i + 1));  // distinct: one group each
    tensors.push_back(std::move(t));
    offset += sizes[i];
  }
  const auto groups = group_tensors(tensors, DedupRule::bytes);
  std::vector<size_t> all(groups.size());
  for (size_t g = 0; g < all.size(); ++g) all[g] = g;
  const auto layout = layout_shard(tensors, groups, all, ShardingOptions{});
  std::string bytes = layout.head;
  bytes.resize(layout.file_size);
  for (const auto& p : layout.placements) {
    const auto& range = tensors[p.tensor].data.bytes;
    bytes.replace(p.offset, range.size, blob.substr(range.offset, range.size));
  }
  const auto path = dir / (stem + ".ptd");
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

PackSummary pack_with(const std::vector<std::string>& inputs, const std::filesystem::path& output,
                      uint64_t write_while_hashing_from, std::optional<uint64_t> cap,
                      unsigned jobs = 2) {
  PackOptions options;
  for (const auto& input : inputs) options.inputs.push_back(parse_input_spec(input));
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
    for (auto cap : {uncapped, std::optional<uint64_t>(uint64_t{3} << 20)}) {
      for (bool two : {false, true}) {
        CAPTURE(equal, cap.has_value(), two);
        test::TempDir dir;
        std::vector<std::string> inputs{patched_mlp(dir.path(), equal).string() + "@" +
                                        extra_data(dir.path()).string()};
        if (two) inputs.push_back(test::pte_fixture("xnnpack_conv.pte").string());
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

TEST_CASE(
    "a .pte directory is written after hashing: one thread, below the threshold, costly samples") {
  test::TempDir dir;
  const auto input = patched_mlp(dir.path(), true).string() + "@" + extra_data(dir.path()).string();
  CHECK_FALSE(pack_with({input}, dir.path() / "one", 1, std::nullopt, 1).written_while_hashing);
  CHECK_FALSE(pack_with({input}, dir.path() / "below", uint64_t{1} << 40, std::nullopt)
                  .written_while_hashing);
  CHECK(test::directory_files(dir.path() / "one") == test::directory_files(dir.path() / "below"));
  // The MLP alone: its ten 256 KiB entries of one length would be sampled, 4.6 % of what
  // is hashed (more than 1/64): not worth a prediction.
  const auto alone = patched_mlp(dir.path(), true).string();
  CHECK_FALSE(pack_with({alone}, dir.path() / "alone", 1, std::nullopt).written_while_hashing);
}

TEST_CASE(
    "pack writes a .pte while hashing: merged or not, the same file, predicted right or not") {
  for (bool equal : {true, false}) {
    for (bool merge : {false, true}) {
      CAPTURE(equal, merge);
      test::TempDir dir;
      std::vector<std::string> inputs{patched_mlp(dir.path(), equal).string() + "@" +
                                      extra_data(dir.path()).string()};
      if (merge) inputs.push_back("conv=" + test::pte_fixture("xnnpack_conv.pte").string());
      const auto after = pack_with(inputs, dir.path() / "after.pte", 0, std::nullopt);
      const auto during = pack_with(inputs, dir.path() / "during.pte", 1, std::nullopt);
      CHECK((test::file_bytes(dir.path() / "during.pte") ==
             test::file_bytes(dir.path() / "after.pte")));  // not printed: megabytes
      CHECK_FALSE(after.written_while_hashing);
      // A merge stores equal named data once, so a wrong prediction changes its file;
      // one program's file does not depend on those digests.
      CHECK(during.written_while_hashing == (equal || !merge));
      CHECK(during.output_bytes == after.output_bytes);
      CHECK(during.methods.size() == (merge ? 2u : 1u));
      CHECK(during.notes == after.notes);
    }
  }
}

TEST_CASE("a merge written while hashing is dropped when hashing finds a conflict") {
  test::TempDir dir;
  const auto extra = extra_data(dir.path()).string();
  // One key, bytes that differ outside the samples: predicted equal, found different.
  const auto flipped = edited_mlp(dir.path() / "flipped.pte", false, true).string() + "@" + extra;
  const auto original = "again=" + test::pte_fixture("xnnpack_stress_mlp.pte").string() + "@" +
                        extra_data(dir.path(), 1).string();
  const auto before = test::directory_files(dir.path());
  for (uint64_t from : {uint64_t{0}, uint64_t{1}}) {
    CAPTURE(from);
    try {
      (void)pack_with({flipped, original}, dir.path() / "merged.pte", from, std::nullopt);
      FAIL("the merge was not refused");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::conflict);
      CHECK_THAT(e.what(), Catch::Contains("has other bytes than in"));
    }
    CHECK((test::directory_files(dir.path()) == before));  // nothing written or left behind
  }
  // The same inputs without the flipped byte: no conflict, and the merge is written while
  // hashing, so the refusals above were of a merge written on a prediction.
  const auto same = edited_mlp(dir.path() / "same.pte", false, false).string() + "@" + extra;
  CHECK(pack_with({same, original}, dir.path() / "merged.pte", 1, std::nullopt)
            .written_while_hashing);
}

TEST_CASE("a merge with inline delegate data is written while hashing, the same as after") {
  // conv_inline.pte: xnnpack_conv.pte with its blob in backend_delegate_data, as an
  // export with extract_delegate_segments=False writes it (tests/data/pte/SOURCES.md).
  for (const char* variant : {"conv_inline.pte", "ethos_like.pte"}) {
    CAPTURE(variant);
    test::TempDir dir;
    const std::vector<std::string> inputs{
        patched_mlp(dir.path(), true).string() + "@" + extra_data(dir.path()).string(),
        "conv=" + test::pte_fixture(std::string("variants/") + variant).string()};
    const auto after = pack_with(inputs, dir.path() / "after.pte", 0, std::nullopt);
    const auto during = pack_with(inputs, dir.path() / "during.pte", 1, std::nullopt);
    CHECK((test::file_bytes(dir.path() / "during.pte") ==
           test::file_bytes(dir.path() / "after.pte")));
    CHECK(during.written_while_hashing);
    CHECK(during.methods.size() == 2u);
  }
}

TEST_CASE("a plan on predicted digests that fails in any way is a prediction not confirmed") {
  using detail::planned_on_prediction;
  int ran = 0;
  CHECK(planned_on_prediction([&] { ++ran; }));
  for (auto code : {ErrorCode::internal, ErrorCode::invalid_input, ErrorCode::conflict,
                    ErrorCode::usage, ErrorCode::io}) {
    CAPTURE(static_cast<int>(code));
    CHECK_FALSE(planned_on_prediction([&] {
      ++ran;
      fail(code, "digest of an unhashed range requested");
    }));
  }
  CHECK(ran == 6);
  // Not a ptepack error (out of memory, a broken invariant of the library): not hidden.
  CHECK_THROWS_AS(planned_on_prediction([] { throw std::bad_alloc(); }), std::bad_alloc);
}
