// The one plan of a directory output (core/directory_plan.h): kept shards first, new
// shards placed, each program's list, and the manifest a written plan describes.
#include <catch2/catch.hpp>

#include "test_support.h"

#include "core/directory_plan.h"
#include "ptepack/base/error.h"

using namespace ptepack;

namespace {

Digest digest_of(uint8_t fill) {
  Digest d;
  d.fill(fill);
  return d;
}

// The keys a manifest lists per shard, in its order.
std::vector<std::vector<std::string>> shard_keys(const Manifest& m) {
  std::vector<std::vector<std::string>> out;
  for (const auto& s : m.shards) out.push_back(s.keys);
  return out;
}

// OLD: one shard holding c(50), d(50) and e, an alias of d; its file is 400 bytes.
Manifest released_plan() {
  Manifest m;
  m.version = kManifestProgramsVersion;
  m.shards.push_back(
      {"weights-cccccccccccccccc.ptd", std::string(64, 'c'), 400, 100, {"c", "d", "e"}});
  m.tensors["c"] = test::manifest_tensor(m.shards[0].file, 50, 3);
  m.tensors["d"] = test::manifest_tensor(m.shards[0].file, 50, 4);
  m.tensors["e"] = test::manifest_tensor(m.shards[0].file, 50, 4, "d");
  return m;
}

// describe_directory, then every entry describe_tensors hands over, kept in
// manifest.tensors (checked to come in key order).
void describe(const DirectoryPlan& plan, const std::vector<StoredTensor>& tensors,
              const std::vector<Digest>& digests, const ShardingOptions& options,
              const std::string& prefix, Manifest& manifest) {
  describe_directory(plan, digests, options, prefix, manifest);
  REQUIRE(manifest.tensors.empty());  // entered by describe_tensors alone
  describe_tensors(plan, tensors, manifest.shards,
                   [&](const std::string& key, const ManifestTensor& entry) {
                     CHECK((manifest.tensors.empty() || manifest.tensors.rbegin()->first < key));
                     manifest.tensors.emplace(key, entry);
                   });
}

}  // namespace

TEST_CASE("directory plan: a program graph's tensors in new shards, described by their digests") {
  // b duplicates a: one stored group, b its alias.
  std::vector<StoredTensor> tensors{test::stored_tensor("a", 64, 1),
                                    test::stored_tensor("b", 64, 1),
                                    test::stored_tensor("c", 32, 2)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  ShardingOptions options;
  auto plan = plan_directory(tensors, groups, {}, options);
  CHECK(plan.kept.empty());
  REQUIRE(plan.placed.size() == 1);
  CHECK(plan.shard_count() == 1);
  CHECK(plan.keys[0] == std::vector<std::string>{"a", "b", "c"});
  CHECK(plan.shard_payload(0) == 96);
  CHECK(plan.shard_size(0) == plan.contents[0].size);
  CHECK(plan.contents[0].size > 96);   // a header before the segments
  CHECK(plan.program_shards.empty());  // no .pte programs

  Manifest manifest;
  describe(plan, tensors, {digest_of(0xab)}, options, "weights", manifest);
  REQUIRE(manifest.shards.size() == 1);
  CHECK(manifest.shards[0].file == "weights-abababababababab.ptd");
  CHECK(manifest.shards[0].sha256 == to_hex(digest_of(0xab)));
  CHECK(manifest.total_size == 96);
  CHECK(manifest.tensors.at("b").alias_of == std::optional<std::string>("a"));
  CHECK(!manifest.tensors.at("a").alias_of);
  CHECK(manifest.tensors.at("c").shard == manifest.shards[0].file);
  CHECK(!manifest.tensors.at("c").alias_of);  // after an alias: the reused entry reset
  CHECK(manifest.tensors.at("c").nbytes == 32);
  // Defaults are not recorded; other values are.
  CHECK(!manifest.shard_prefix);
  CHECK(!manifest.alignment);
  CHECK(!manifest.placement_single);
  CHECK(!manifest.oversize_own_shard);

  Manifest other;
  options.alignment = 4096;
  describe(plan, tensors, {digest_of(0xab)}, options, "model", other);
  CHECK(other.shards[0].file == "model-abababababababab.ptd");
  CHECK(other.shard_prefix == std::optional<std::string>("model"));
  CHECK(other.alignment == std::optional<uint64_t>(4096));
}

TEST_CASE("directory plan: programs load the shards of their sharing sets") {
  // a: both programs; b: program 0; c: program 1.
  std::vector<StoredTensor> tensors{test::stored_tensor("a", 64, 1),
                                    test::stored_tensor("b", 32, 2),
                                    test::stored_tensor("c", 16, 3)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  ProgramUse use{2, {{0, 1}, {0}, {1}}, true};
  auto plan = plan_directory(tensors, groups, use, ShardingOptions{});
  REQUIRE(plan.placed.size() == 3);  // {0,1}, then {0}, then {1}
  CHECK(plan.keys == std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"c"}});
  CHECK(plan.program_shards == std::vector<std::vector<size_t>>{{0, 1}, {0, 2}});
  CHECK(!plan.placement_single);

  Manifest manifest;
  manifest.programs.push_back({"p0.pte", {}, 0, {"forward"}, {}, {}});
  manifest.programs.push_back({"p1.pte", {}, 0, {"forward"}, {}, {}});
  describe(plan, tensors, {digest_of(1), digest_of(2), digest_of(3)}, ShardingOptions{}, "weights",
           manifest);
  CHECK(manifest.programs[0].shards ==
        std::vector<std::string>{manifest.shards[0].file, manifest.shards[1].file});
  CHECK(manifest.programs[1].shards ==
        std::vector<std::string>{manifest.shards[0].file, manifest.shards[2].file});
  CHECK(manifest.shards[0].programs == std::vector<std::string>{"p0.pte", "p1.pte"});
  CHECK(manifest.shards[2].programs == std::vector<std::string>{"p1.pte"});

  // --placement single: one first-fit over everything, recorded in the manifest.
  use.by_sharing_set = false;
  plan = plan_directory(tensors, groups, use, ShardingOptions{});
  REQUIRE(plan.placed.size() == 1);
  CHECK(plan.program_shards == std::vector<std::vector<size_t>>{{0}, {0}});
  CHECK(plan.placement_single);
  Manifest single;
  describe(plan, tensors, {digest_of(9)}, ShardingOptions{}, "weights", single);
  CHECK(single.placement_single);
}

TEST_CASE("directory plan: --base's kept shards come first and serve their keys") {
  const auto old = released_plan();
  // NEW reads c, d, e as OLD stored them, and a new tensor f.
  std::vector<StoredTensor> tensors{
      test::stored_tensor("c", 50, 3), test::stored_tensor("d", 50, 4),
      test::stored_tensor("e", 50, 4), test::stored_tensor("f", 8, 6)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  ShardingOptions options;
  auto reuse = plan_reuse(tensors, old, options, "weights");
  REQUIRE(reuse.shards.size() == 1);
  ProgramUse use{1, {{0}, {0}, {0}, {0}}, false};
  auto plan = plan_directory(tensors, groups, use, options, {}, reuse, &old);
  REQUIRE(plan.kept.size() == 1);
  CHECK(plan.kept[0].file == old.shards[0].file);
  CHECK(plan.kept[0].keys == std::vector<std::string>{"c", "d", "e"});
  REQUIRE(plan.placed.size() == 1);
  CHECK(plan.keys[0] == std::vector<std::string>{"f"});  // only what the kept shard lacks
  CHECK(plan.shard_size(0) == 400);
  CHECK(plan.shard_payload(1) == 8);
  CHECK(plan.program_shards == std::vector<std::vector<size_t>>{{0, 1}});

  Manifest manifest;
  manifest.programs.push_back({"p.pte", {}, 0, {"forward"}, {}, {}});
  describe(plan, tensors, {digest_of(0x66)}, options, "weights", manifest);
  CHECK(shard_keys(manifest) == std::vector<std::vector<std::string>>{{"c", "d", "e"}, {"f"}});
  CHECK(manifest.shards[0].sha256 == old.shards[0].sha256);
  CHECK(manifest.total_size == 108);
  CHECK(manifest.tensors.at("e").alias_of == std::optional<std::string>("d"));  // OLD's alias
  CHECK(manifest.tensors.at("e").shard == old.shards[0].file);
  CHECK(manifest.programs[0].shards.size() == 2);
  CHECK(manifest.shards[0].programs.empty());  // one program: shards name none
  CHECK(!manifest.oversize_own_shard);

  // A kept shard over NEW's cap, admitted alone: the manifest says "oversize".
  options.max_shard_bytes = 200;
  options.oversize_own_shard = true;
  Manifest capped;
  describe(plan, tensors, {digest_of(0x66)}, options, "weights", capped);
  CHECK(capped.oversize_own_shard);
}

TEST_CASE("directory plan: the planner's refusal and a digest count that does not match") {
  std::vector<StoredTensor> tensors{test::stored_tensor("big", 4096, 1)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  ShardingOptions options;
  options.max_shard_bytes = 1024;
  try {
    (void)plan_directory(tensors, groups, {}, options);
    FAIL("a tensor over the cap was planned");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::conflict);
    CHECK(std::string(e.what()).find("big") != std::string::npos);
  }
  try {  // the output named in front, when given
    (void)plan_directory(tensors, groups, {}, options, "out");
    FAIL("a tensor over the cap was planned");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("out: ", 0) == 0);
  }
  options.max_shard_bytes.reset();
  auto plan = plan_directory(tensors, groups, {}, options);
  Manifest manifest;
  CHECK_THROWS_AS(describe_directory(plan, {}, options, "weights", manifest), Error);
}
