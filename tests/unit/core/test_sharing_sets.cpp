// Placement by sharing set (docs/shard-planner.md): each group's set is the union of its
// members' programs, sets are placed larger first, ties by their smallest owner key.
#include <catch2/catch.hpp>

#include "test_support.h"

#include "ptepack/core/shard_plan.h"
#include "core/sharing_sets.h"
#include "ptepack/core/storage.h"

using namespace ptepack;

namespace {

// The owner keys of each set's groups, in placement order.
std::vector<std::vector<std::string>> sets_by_owner(const std::vector<StoredTensor>& tensors,
                                                    const std::vector<StorageGroup>& groups,
                                                    const SharingSets& sets) {
  std::vector<std::vector<std::string>> out(sets.sets.size());
  for (size_t g = 0; g < groups.size(); ++g)
    out[sets.set_of[g]].push_back(tensors[groups[g].members.front()].key);
  return out;
}

}  // namespace

TEST_CASE("sharing sets: a group's set is the union of all its members' programs") {
  // a (program 0) and b (program 1) hold the same bytes: one group used by both. c is
  // program 0's alone. Taken from the first member only, the group would land in {0}
  // beside c, and program 1 would not list the shard that holds its bytes.
  std::vector<StoredTensor> tensors{test::stored_tensor("a", 64, 1), test::stored_tensor("b", 64, 1), test::stored_tensor("c", 32, 2)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  REQUIRE(groups.size() == 2);
  std::vector<SharingSet> users{{0}, {1}, {0}};
  auto sets = sharing_sets(tensors, groups, users);
  CHECK(sets.sets == std::vector<SharingSet>{{0, 1}, {0}});
  CHECK(sets_by_owner(tensors, groups, sets) ==
        std::vector<std::vector<std::string>>{{"a"}, {"c"}});

  // Placed by set: never in one shard, though both fit one uncapped shard.
  auto shards = plan_shards_by_set(tensors, groups, sets, ShardingOptions{});
  REQUIRE(shards.size() == 2);
  CHECK(shards[0].groups == std::vector<size_t>{0});
  CHECK(shards[1].groups == std::vector<size_t>{1});
}

TEST_CASE("sharing sets: larger sets first, then by their smallest owner key") {
  // Owner keys are chosen so that key order alone would give another order.
  std::vector<StoredTensor> tensors{
      test::stored_tensor("a_only2", 8, 1),   // {2}
      test::stored_tensor("b_only0", 8, 2),   // {0}
      test::stored_tensor("c_pair12", 8, 3),  // {1, 2}
      test::stored_tensor("d_all", 8, 4),     // {0, 1, 2}
      test::stored_tensor("e_pair01", 8, 5),  // {0, 1}
      test::stored_tensor("f_only0", 8, 6),   // {0}
      test::stored_tensor("g_all", 8, 7),     // {0, 1, 2}
  };
  auto groups = group_tensors(tensors, DedupRule::bytes);
  REQUIRE(groups.size() == tensors.size());
  std::vector<SharingSet> users{{2}, {0}, {1, 2}, {0, 1, 2}, {0, 1}, {0}, {0, 1, 2}};
  auto sets = sharing_sets(tensors, groups, users);
  CHECK(sets.sets == std::vector<SharingSet>{{0, 1, 2}, {1, 2}, {0, 1}, {2}, {0}});
  CHECK(sets_by_owner(tensors, groups, sets) ==
        std::vector<std::vector<std::string>>{
            {"d_all", "g_all"}, {"c_pair12"}, {"e_pair01"}, {"a_only2"}, {"b_only0", "f_only0"}});
  auto shards = plan_shards_by_set(tensors, groups, sets, ShardingOptions{});
  REQUIRE(shards.size() == 5);
  CHECK(shards[0].groups == std::vector<size_t>{3, 6});
  CHECK(shards[4].groups == std::vector<size_t>{1, 5});
}
