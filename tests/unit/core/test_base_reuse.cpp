// Shard reuse across releases: the rule, its stale bound and the groups left to place.
#include <catch2/catch.hpp>

#include "test_support.h"

#include "core/base_reuse.h"

using namespace ptepack;

namespace {

// OLD: shard A holds a(60) b(40), shard B holds c(50) d(50) and e, an alias of d.
Manifest old_release() {
  Manifest m;
  m.version = kManifestProgramsVersion;
  m.shard_format = ShardFormat::ptd;
  m.cap_mode = CapMode::file;
  m.shards.push_back({"weights-aaaaaaaaaaaaaaaa.ptd", std::string(64, 'a'), 300, 100, {"a", "b"}});
  m.shards.push_back(
      {"weights-bbbbbbbbbbbbbbbb.ptd", std::string(64, 'b'), 300, 100, {"c", "d", "e"}});
  m.tensors["a"] = test::manifest_tensor(m.shards[0].file, 60, 1);
  m.tensors["b"] = test::manifest_tensor(m.shards[0].file, 40, 2);
  m.tensors["c"] = test::manifest_tensor(m.shards[1].file, 50, 3);
  m.tensors["d"] = test::manifest_tensor(m.shards[1].file, 50, 4);
  m.tensors["e"] = test::manifest_tensor(m.shards[1].file, 50, 4, "d");
  return m;
}

}  // namespace

TEST_CASE("a shard is kept while at most half its payload is stale") {
  const auto old = old_release();
  ShardingOptions options;
  // b and c gone: A keeps 60 of 100 (40 stale), B keeps 50 of 100 (50 stale: the bound).
  std::vector<StoredTensor> tensors{test::stored_tensor("a", 60, 1), test::stored_tensor("d", 50, 4), test::stored_tensor("e", 50, 4)};
  auto plan = plan_reuse(tensors, old, options, "weights");
  REQUIRE(plan.shards.size() == 2);
  CHECK(plan.shards[0].live == std::vector<std::string>{"a"});
  CHECK(plan.shards[0].stale == std::vector<std::string>{"b"});
  CHECK(plan.shards[0].stale_bytes == 40);
  CHECK(plan.shards[1].stale_bytes == 50);
  CHECK(plan.served_by == std::vector<size_t>{0, 1, 1});
  // Over the bound: only a left in A at a stricter 30 %.
  plan = plan_reuse(tensors, old, options, "weights", 30);
  CHECK(plan.shards.empty());
  CHECK(!plan.fresh_reason);
}

TEST_CASE("a key needed with other bytes, or an alias without its owner, keeps a shard out") {
  const auto old = old_release();
  ShardingOptions options;
  // b with new bytes: A cannot be kept (the key would be in two of the program's files).
  std::vector<StoredTensor> tensors{test::stored_tensor("a", 60, 1), test::stored_tensor("b", 40, 9), test::stored_tensor("c", 50, 3),
                                    test::stored_tensor("e", 50, 4)};
  auto plan = plan_reuse(tensors, old, options, "weights");
  REQUIRE(plan.shards.empty());  // A: other bytes; B: e without its owner d
  auto groups = group_tensors(tensors, DedupRule::bytes);
  CHECK(unserved_groups(groups, plan).size() == groups.size());
  // The owner back: B is kept, and a new key with d's bytes is stored again.
  tensors = {test::stored_tensor("a", 60, 1), test::stored_tensor("b", 40, 9), test::stored_tensor("c", 50, 3), test::stored_tensor("d", 50, 4),
             test::stored_tensor("e", 50, 4), test::stored_tensor("f", 50, 4)};
  plan = plan_reuse(tensors, old, options, "weights");
  REQUIRE(plan.shards.size() == 1);
  CHECK(plan.shards[0].old_index == 1);
  groups = group_tensors(tensors, DedupRule::bytes);
  auto left = unserved_groups(groups, plan);
  std::vector<std::string> owners;
  for (const auto& g : left) owners.push_back(tensors[g.members[0]].key);
  CHECK(owners == std::vector<std::string>{"a", "b", "f"});
}

TEST_CASE("another format, cap mode or prefix, or a shard over NEW's limits: fresh placement") {
  const auto old = old_release();
  std::vector<StoredTensor> tensors{test::stored_tensor("a", 60, 1), test::stored_tensor("b", 40, 2)};
  ShardingOptions options;
  options.format = ShardFormat::safetensors;
  auto plan = plan_reuse(tensors, old, options, "weights");
  CHECK(plan.shards.empty());
  CHECK(plan.fresh_reason);
  options = {};
  CHECK(plan_reuse(tensors, old, options, "w").fresh_reason);
  options.max_shard_bytes = 299;  // A's file is 300 bytes
  plan = plan_reuse(tensors, old, options, "weights");
  CHECK(plan.shards.empty());
  REQUIRE(plan.fresh_reason);
  CHECK(plan.fresh_reason->find("over --max-shard-bytes 299") != std::string::npos);
  options.max_shard_bytes = 300;
  CHECK(plan_reuse(tensors, old, options, "weights").shards.size() == 1);
  options.max_shard_tensors = 1;
  CHECK(plan_reuse(tensors, old, options, "weights").fresh_reason);
}
