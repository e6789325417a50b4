// The shard planner: first-fit order, caps, the fit-alone error, dedup grouping.
#include <catch2/catch.hpp>

#include "ptepack/base/error.h"
#include "ptepack/packing/shard_layout.h"
#include "ptepack/packing/shard_plan.h"

using namespace ptepack;

namespace {

StoredTensor tensor(const std::string& key, uint64_t nbytes, uint8_t fill,
                    bool is_mutable = false) {
  StoredTensor t;
  t.key = key;
  t.data.dtype = DType::BYTE;
  t.data.shape = {static_cast<int64_t>(nbytes)};
  t.data.bytes.size = nbytes;
  t.sha256.fill(fill);
  t.is_mutable = is_mutable;
  return t;
}

std::vector<std::vector<std::string>> owners(const std::vector<StoredTensor>& tensors,
                                             const std::vector<StorageGroup>& groups,
                                             const std::vector<PlannedShard>& shards) {
  std::vector<std::vector<std::string>> out;
  for (const auto& s : shards) {
    out.emplace_back();
    for (size_t g : s.groups) out.back().push_back(tensors[groups[g].members[0]].key);
  }
  return out;
}

}  // namespace

TEST_CASE("first-fit fills earlier shards where next-fit would not") {
  // Keys in order a(60) b(50) c(30) d(45), cap 100 payload.
  // first-fit: [a c] [b d]   next-fit would give: [a] [b c] [d]
  std::vector<StoredTensor> tensors{tensor("a", 60, 1), tensor("b", 50, 2), tensor("c", 30, 3),
                                    tensor("d", 45, 4)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  ShardingOptions options;
  options.max_shard_bytes = 100;
  options.cap_mode = CapMode::payload;
  auto plan = plan_shards(tensors, groups, options);
  CHECK(owners(tensors, groups, plan) ==
        std::vector<std::vector<std::string>>{{"a", "c"}, {"b", "d"}});
  CHECK(plan[0].payload_bytes == 90);
  CHECK(plan[1].payload_bytes == 95);
}

TEST_CASE("without a cap everything goes into one shard; no tensors, no shards") {
  std::vector<StoredTensor> tensors{tensor("a", 60, 1), tensor("b", 50, 2)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  auto plan = plan_shards(tensors, groups, ShardingOptions{});
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].groups.size() == 2);
  CHECK(plan_shards({}, {}, ShardingOptions{}).empty());
}

TEST_CASE("a group that cannot fit an empty shard is an error naming key and sizes") {
  std::vector<StoredTensor> tensors{tensor("big.weight", 5000, 1)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  ShardingOptions options;
  options.max_shard_bytes = 4096;
  try {
    (void)plan_shards(tensors, groups, options);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::conflict);
    CHECK_THAT(e.what(), Catch::Contains("'big.weight'") && Catch::Contains("4096") &&
                             Catch::Contains("needs"));
  }
}

TEST_CASE("file mode counts headers and alignment; bounds never undercount") {
  std::vector<StoredTensor> tensors;
  for (int i = 0; i < 20; ++i)
    tensors.push_back(tensor("layer." + std::to_string(i) + ".w", 1000, static_cast<uint8_t>(i)));
  auto groups = group_tensors(tensors, DedupRule::bytes);
  for (uint64_t alignment : {uint64_t{128}, uint64_t{4096}}) {
    ShardingOptions options;
    options.alignment = alignment;
    options.max_shard_bytes = 5 * 4096 + 4096;
    auto plan = plan_shards(tensors, groups, options);
    size_t placed = 0;
    for (const auto& s : plan) {
      CHECK(s.size_bound <= *options.max_shard_bytes);
      CHECK(s.size_bound >= s.payload_bytes);
      placed += s.groups.size();
    }
    CHECK(placed == groups.size());
    if (alignment == 4096) CHECK(plan.size() == 4);  // 5 segments of 4 KiB + a 4 KiB head each
  }
}

TEST_CASE("dedup grouping: owner is the smallest key, state never shares") {
  std::vector<StoredTensor> tensors{tensor("a/x", 8, 7), tensor("b/x", 8, 7), tensor("c/y", 8, 9),
                                    tensor("state/p", 8, 7, true), tensor("state/q", 8, 7, true)};
  tensors[2].data.dtype = DType::CHAR;  // same bytes as nothing else
  auto groups = group_tensors(tensors, DedupRule::dtype_shape_bytes);
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].members == std::vector<size_t>{0, 1});
  CHECK(groups[2].members == std::vector<size_t>{3});
  CHECK(groups[3].members == std::vector<size_t>{4});
  // Same bytes, other dtype: one .ptd segment, two safetensors entries.
  tensors[1].data.dtype = DType::CHAR;
  CHECK(group_tensors(tensors, DedupRule::bytes).size() == 4);
  CHECK(group_tensors(tensors, DedupRule::dtype_shape_bytes).size() == 5);
}

TEST_CASE("file mode: a cap equal to the exact file size still takes every group") {
  std::vector<StoredTensor> tensors{tensor("a", 3000, 1), tensor("b", 3000, 2)};
  auto groups = group_tensors(tensors, DedupRule::bytes);
  for (auto format : {ShardFormat::ptd, ShardFormat::safetensors}) {
    ShardingOptions options;
    options.format = format;
    options.alignment = 4096;
    uint64_t exact = layout_shard(tensors, groups, {0, 1}, options).file_size;
    options.max_shard_bytes = exact;
    auto plan = plan_shards(tensors, groups, options);
    CHECK(plan.size() == 1);
    CHECK(plan[0].size_bound == exact);
    options.max_shard_bytes = exact - 1;
    CHECK(plan_shards(tensors, groups, options).size() == 2);
  }
}
