// The table of pack's shard options (shard_options()): every row a distinct flag and given
// field, a manifest of defaults supplies nothing, a manifest recording other values supplies
// each one, and GivenShardOptions::any sees each field.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/pack/pack.h"
#include "test_fixtures.h"

using namespace ptepack;

TEST_CASE("shard options: one row per flag and given field") {
  std::set<std::string_view> flags;
  std::vector<bool GivenShardOptions::*> fields;
  for (const auto& option : shard_options()) {
    CHECK(option.flag.starts_with("--"));
    CHECK(flags.insert(option.flag).second);
    CHECK(std::find(fields.begin(), fields.end(), option.given) == fields.end());
    fields.push_back(option.given);
  }
  CHECK(flags.size() == 8);
}

TEST_CASE("shard options: a manifest of defaults supplies none") {
  const Manifest defaults;
  for (const auto& option : shard_options()) {
    PackOptions options;
    INFO(option.flag);
    CHECK_FALSE(option.take(defaults, options).has_value());
  }
}

TEST_CASE("shard options: each recorded value is taken, and named as typed") {
  auto m = test::manifest_with_shard_options();
  PackOptions options;
  std::string typed;
  for (const auto& option : shard_options()) {
    auto note = option.take(m, options);
    INFO(option.flag);
    CHECK(note.has_value() == (option.flag != "--shard-format"));  // ptd is the default
    if (note) CHECK(note->starts_with(std::string(option.flag) + " "));
    if (note) typed += *note + ";";
  }
  CHECK(typed ==
        "--max-shard-bytes 3000;--cap-mode payload;--oversize own-shard;--alignment 64;"
        "--shard-prefix w;--placement single;--max-shard-tensors 5;");
  CHECK(options.sharding.max_shard_bytes == 3000U);
  CHECK(options.sharding.cap_mode == CapMode::payload);
  CHECK(options.sharding.oversize_own_shard);
  CHECK(options.sharding.alignment == 64U);
  CHECK(options.shard_prefix == "w");
  CHECK(options.placement == Placement::single);
  CHECK(options.sharding.max_shard_tensors == 5U);
  // Safetensors shards have no segment alignment: the format, taken first, keeps it out.
  m.shard_format = ShardFormat::safetensors;
  PackOptions st;
  for (const auto& option : shard_options()) {
    auto note = option.take(m, st);
    if (option.flag == "--shard-format") CHECK(note == "--shard-format safetensors");
    if (option.flag == "--alignment") CHECK_FALSE(note.has_value());
  }
  CHECK(st.sharding.format == ShardFormat::safetensors);
}

TEST_CASE("shard options: any() sees each given field") {
  CHECK_FALSE(GivenShardOptions{}.any());
  for (const auto& option : shard_options()) {
    GivenShardOptions given;
    given.*option.given = true;
    INFO(option.flag);
    CHECK(given.any());
  }
}
