// The shard options a manifest records (shard_fields()): one row per option, read and
// written by the manifest's reader and writer, and the rows pack's option table names.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "containers/shard_fields.h"
#include "ptepack/base/error.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/pack/pack.h"
#include "test_fixtures.h"

using namespace ptepack;

namespace {

// A version-2 manifest with every shard option at a value other than its default.
Manifest recorded() {
  auto m = test::manifest_with_shard_options();
  m.version = kManifestProgramsVersion;  // placement is recorded in version 2
  m.programs.push_back({"a.pte", std::string(64, 'b'), 99, {"forward"}, {}, {}});
  return m;
}

}  // namespace

TEST_CASE("shard fields: one row per option, the same options pack's table names") {
  std::set<std::string_view> fields;
  std::set<std::string_view> flags;
  for (const auto& row : shard_fields()) {
    CHECK(fields.insert(row.field).second);
    CHECK(flags.insert(row.flag).second);
  }
  std::set<std::string_view> pack_flags;
  for (const auto& option : shard_options()) pack_flags.insert(option.flag);
  CHECK(pack_flags == flags);
  CHECK(fields.size() == 8);
}

TEST_CASE("shard fields: each is written under its field and read back") {
  const auto m = recorded();
  const auto text = manifest_to_json(m);
  const auto doc = nlohmann::json::parse(text);
  for (const auto& row : shard_fields()) {
    INFO(row.field);
    CHECK(doc.contains(std::string(row.field)));
  }
  const auto back = parse_manifest(text, "m.json");
  CHECK(back.max_shard_bytes == m.max_shard_bytes);
  CHECK(back.cap_mode == m.cap_mode);
  CHECK(back.oversize_own_shard);
  CHECK(back.alignment == m.alignment);
  CHECK(back.shard_prefix == m.shard_prefix);
  CHECK(back.placement_single);
  CHECK(back.max_shard_tensors == m.max_shard_tensors);
  CHECK(manifest_to_json(back) == text);
}

TEST_CASE("shard fields: a default is written as the format says, optional ones left out") {
  Manifest m;  // every option at its default
  const auto doc = nlohmann::json::parse(manifest_to_json(m));
  CHECK(doc.at("shard_format") == "ptd");
  CHECK(doc.at("cap_mode") == "file");
  CHECK(doc.at("max_shard_bytes").is_null());
  for (const char* optional :
       {"oversize", "alignment", "max_shard_tensors", "placement", "shard_prefix"}) {
    INFO(optional);
    CHECK_FALSE(doc.contains(optional));
  }
}

TEST_CASE("shard fields: a value of the wrong kind is refused, naming the field") {
  const auto text = manifest_to_json(recorded());
  for (const auto& row : shard_fields()) {
    auto doc = nlohmann::json::parse(text);
    doc[std::string(row.field)] = nlohmann::json::object({{"x", 1}});
    INFO(row.field);
    try {
      (void)parse_manifest(doc.dump(), "m.json");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      const std::string what = e.what();
      CHECK(what.starts_with("m.json: manifest field "));
      CHECK(what.find(std::string(row.field) + ":") != std::string::npos);
    }
  }
}
