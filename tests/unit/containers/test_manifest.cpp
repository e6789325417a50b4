// manifest.json written by the streaming writer, checked byte for byte against a DOM
// built with nlohmann/json and printed by json_text (the layout every JSON output shares).
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "json/json_util.h"
#include "json/json_writer.h"
#include "ptepack/base/error.h"
#include "ptepack/containers/manifest.h"

namespace ptepack {
namespace {

using ordered = nlohmann::json;

// The reference: the same document as a nlohmann DOM (keys sorted by std::map).
std::string reference_manifest_json(const Manifest& m) {
  ordered j;
  j["format"] = kManifestFormat;
  j["version"] = m.version;
  if (m.version == kManifestProgramsVersion) {
    ordered programs = ordered::array();
    for (const auto& p : m.programs) {
      programs.push_back(ordered{{"file", p.file},
                                 {"sha256", p.sha256},
                                 {"size", p.size},
                                 {"methods", p.methods},
                                 {"shards", p.shards},
                                 {"named_data", p.named_data}});
    }
    j["programs"] = std::move(programs);
  } else {
    j["program"] =
        ordered{{"file", m.program.file}, {"sha256", m.program.sha256}, {"size", m.program.size}};
  }
  j["shard_format"] = shard_format_name(m.shard_format);
  j["max_shard_bytes"] = m.max_shard_bytes ? ordered(*m.max_shard_bytes) : ordered(nullptr);
  j["cap_mode"] = cap_mode_name(m.cap_mode);
  if (m.oversize_own_shard) j["oversize"] = "own-shard";
  if (m.alignment) j["alignment"] = *m.alignment;
  if (m.shard_prefix) j["shard_prefix"] = *m.shard_prefix;
  if (m.placement_single) j["placement"] = "single";
  if (m.max_shard_tensors) j["max_shard_tensors"] = *m.max_shard_tensors;
  ordered shards = ordered::array();
  for (const auto& s : m.shards) {
    shards.push_back(ordered{{"file", s.file},
                             {"sha256", s.sha256},
                             {"size", s.size},
                             {"payload_bytes", s.payload_bytes},
                             {"keys", s.keys}});
  }
  j["shards"] = std::move(shards);
  ordered tensors = ordered::object();
  for (const auto& [key, t] : m.tensors) {
    ordered entry{{"shard", t.shard},   {"sha256", to_hex(t.sha256)},
                  {"nbytes", t.nbytes}, {"dtype", dtype_name(t.dtype)},
                  {"shape", t.shape},   {"mutable", t.is_mutable}};
    if (t.alias_of) entry["alias_of"] = *t.alias_of;
    if (!t.dim_order.empty()) entry["dim_order"] = t.dim_order;
    if (t.opaque) entry["opaque"] = true;
    tensors[key] = std::move(entry);
  }
  j["tensors"] = std::move(tensors);
  j["state"] = m.state;
  // Each key of a shard list, with the first shard that lists it.
  ordered weight_map = ordered::object();
  for (const auto& s : m.shards) {
    for (const auto& key : s.keys) {
      if (!weight_map.contains(key)) weight_map[key] = s.file;
    }
  }
  j["metadata"] = ordered{{"total_size", m.total_size}};
  j["weight_map"] = std::move(weight_map);
  return json_text(j);
}

ManifestTensor tensor(std::string shard, Shape shape) {
  ManifestTensor t;
  t.shard = std::move(shard);
  t.sha256.fill(0xa5);
  t.nbytes = 24;
  t.dtype = DType::FLOAT;
  t.shape = std::move(shape);
  return t;
}

Manifest sample(int version) {
  Manifest m;
  m.version = version;
  m.shard_format = ShardFormat::ptd;
  m.cap_mode = CapMode::file;
  m.total_size = 1234;
  if (version == kManifestProgramsVersion) {
    m.programs.push_back({"a.pte", std::string(64, 'b'), 99, {"forward", "m\"2"}, {"s.ptd"}, {}});
    m.programs.push_back({"b.pte", std::string(64, 'c'), 7, {}, {}, {"k1", "k2"}});
  } else {
    m.program = {"program.ptg", std::string(64, 'd'), 4096};
  }
  ManifestShard shard{"s.ptd", std::string(64, 'e'), 100, 80, {}};
  for (const std::string key : {"plain", "quote\"back\\slash", "tab\tnl\ncr\rff\fbs\b",
                                "ctl\x01\x1f\x7f", "utf8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                                "bad \xff\xfe utf8", "cut \xe2\x82", "/slash", ""}) {
    shard.keys.push_back(key);
    auto t = tensor("s.ptd", {2, 3, 0});
    m.tensors.emplace(key, t);
  }
  m.shards.push_back(shard);
  m.shards.push_back({"empty.ptd", std::string(64, 'f'), 0, 0, {}});
  auto alias = tensor("s.ptd", {});
  alias.alias_of = "plain";
  alias.dim_order = {1, 0};
  alias.opaque = true;
  alias.is_mutable = true;
  m.tensors.emplace("z alias", alias);
  m.state = {"state/x", "state/\u00e9"};
  return m;
}

TEST_CASE("manifest_to_json equals the DOM's text, byte for byte") {
  for (int version : {kManifestVersion, kManifestProgramsVersion}) {
    for (bool capped : {false, true}) {
      auto m = sample(version);
      if (capped) {
        m.max_shard_bytes = uint64_t{1} << 40;
        m.oversize_own_shard = true;
        m.cap_mode = CapMode::payload;
        m.alignment = 4096;
        m.shard_prefix = "w-1.x";
        m.max_shard_tensors = 7;
        if (version == kManifestProgramsVersion) m.placement_single = true;
      }
      CHECK(manifest_to_json(m) == reference_manifest_json(m));
    }
  }
  Manifest empty;  // nothing listed at all
  empty.shard_format = ShardFormat::safetensors;
  empty.cap_mode = CapMode::file;
  CHECK(manifest_to_json(empty) == reference_manifest_json(empty));
  auto negative = sample(kManifestVersion);  // a shape the reader would refuse still prints
  negative.tensors.begin()->second.shape = {-1, 5};
  CHECK(manifest_to_json(negative) == reference_manifest_json(negative));
}

TEST_CASE("write_manifest_json hands over manifest_to_json's text in pieces") {
  // 20,000 tensors: several pieces of about 1 MiB, split between entries.
  auto m = sample(kManifestProgramsVersion);
  auto& shard = m.shards.front();
  for (int i = 0; i < 20000; ++i) {
    auto key = "layers." + std::to_string(i) + ".weight";
    shard.keys.push_back(key);
    m.tensors.emplace(key, tensor("s.ptd", {64, 64}));
  }
  std::sort(shard.keys.begin(), shard.keys.end());
  std::string joined;
  size_t pieces = 0;
  write_manifest_json(m, [&](std::string_view piece) {
    joined += piece;
    ++pieces;
  });
  const auto text = manifest_to_json(m);
  CHECK(pieces >= 3);
  CHECK(text.size() > 2 * (size_t{1} << 20));
  CHECK(joined == text);
  // A small manifest is one piece.
  pieces = 0;
  write_manifest_json(sample(kManifestVersion), [&](std::string_view) { ++pieces; });
  CHECK(pieces == 1);
  // The tensor entries handed over one at a time (one object, refilled) instead of the
  // map's (left empty here): the same text.
  auto streamed = m;
  streamed.tensors.clear();
  const ManifestTensorSource source = [&](const ManifestTensorVisitor& each) {
    ManifestTensor entry;
    for (const auto& [key, t] : m.tensors) {
      entry = t;
      each(key, entry);
    }
  };
  std::string from_source;
  write_manifest_json(
      streamed, [&](std::string_view piece) { from_source += piece; }, &source);
  CHECK(from_source == text);
}

TEST_CASE("the reader checks the weight_map against the shards' key lists") {
  Manifest m;
  m.shard_format = ShardFormat::ptd;
  m.cap_mode = CapMode::file;
  m.program = {"program.ptg", std::string(64, 'd'), 4096};
  m.shards.push_back({"s.ptd", std::string(64, 'e'), 100, 48, {"a", "plain", "z"}});
  // "plain" is in both: its first shard maps it.
  m.shards.push_back({"t.ptd", std::string(64, 'f'), 100, 24, {"plain", "second"}});
  for (const char* key : {"a", "plain", "second", "z"}) {
    m.tensors.emplace(key, tensor(key == std::string("second") ? "t.ptd" : "s.ptd", {2, 3}));
  }
  const auto text = manifest_to_json(m);
  auto parsed = parse_manifest(text, "m.json");
  CHECK(manifest_to_json(parsed) == text);
  const WeightMap expected{{"a", "s.ptd"}, {"plain", "s.ptd"}, {"second", "t.ptd"}, {"z", "s.ptd"}};
  CHECK(weight_map_of(parsed) == expected);
  const auto keys = sorted_shard_keys(parsed);
  REQUIRE(keys.size() == 5);
  CHECK(keys[1].key == "plain");
  CHECK(keys[1].shard == 0);  // shard order within a key
  CHECK(keys[1].position == 1);
  CHECK(keys[2].key == "plain");
  CHECK(keys[2].shard == 1);
  CHECK(keys[2].position == 0);

  auto edited = [&](auto&& edit) {
    auto j = nlohmann::json::parse(text);
    edit(j["weight_map"]);
    try {
      (void)parse_manifest(j.dump(), "m.json");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      return std::string(e.what());
    }
    FAIL("accepted");
    return std::string();
  };
  CHECK(edited([](auto& w) { w["plain"] = "t.ptd"; }) ==
        "m.json: manifest field weight_map['plain']: names 't.ptd', but the key's first shard "
        "is 's.ptd'");
  CHECK(edited([](auto& w) { w["b"] = "s.ptd"; }) ==
        "m.json: manifest field weight_map['b']: is not a key of any shard");
  CHECK(edited([](auto& w) { w.erase("second"); }) ==
        "m.json: manifest field weight_map['second']: missing (a shard lists the key)");
  CHECK(edited([](auto& w) { w.erase("z"); }) ==  // the last key
        "m.json: manifest field weight_map['z']: missing (a shard lists the key)");
  CHECK(edited([](auto& w) { w["plain"] = "../x"; }) ==
        "m.json: manifest field weight_map['plain']: expected a plain file name");
}

TEST_CASE("JsonWriter lays DOM values out in place and streams in pieces") {
  // Nested DOMs of every kind at several depths, beside written values.
  ordered inner{{"list", {1, 2, {{"max", nullptr}, {"min", 3}}}},
                {"empty_list", ordered::array()},
                {"empty_object", ordered::object()},
                {"fill", 0.25},
                {"text", "line\nbreak \xff"}};
  ordered reference{
      {"a", inner}, {"b", {{"c", inner}, {"d", "x"}}}, {"e", ordered::array({inner})}, {"f", 7}};
  for (size_t drain_every : {size_t{0}, size_t{1}}) {
    JsonWriter w;
    std::string streamed;
    auto drain = [&] {
      if (drain_every != 0) streamed += w.take();
    };
    w.begin_object();
    w.key("a");
    w.dom(inner);
    drain();
    w.key("b");
    w.begin_object();
    w.key("c");
    w.dom(inner);
    drain();
    w.field("d", "x");
    w.end_object();
    w.key("e");
    w.begin_array();
    w.dom(inner);
    w.end_array();
    drain();
    w.field("f", 7);
    w.end_object();
    streamed += std::move(w).finish();
    CHECK(streamed == json_text(reference));
  }
  JsonWriter root;  // a DOM as the whole document
  root.dom(inner);
  CHECK(std::move(root).finish() == json_text(inner));
}

TEST_CASE("recorded shard options round-trip and are checked") {
  Manifest m;
  m.version = kManifestProgramsVersion;
  m.shard_format = ShardFormat::ptd;
  m.cap_mode = CapMode::file;
  m.programs.push_back({"a.pte", std::string(64, 'a'), 10, {"forward"}, {}, {}});
  m.alignment = 64;
  m.shard_prefix = "w";
  m.placement_single = true;
  m.max_shard_tensors = 3;
  const auto text = manifest_to_json(m);
  const auto parsed = parse_manifest(text, "m.json");
  CHECK(parsed.alignment == m.alignment);
  CHECK(parsed.shard_prefix == m.shard_prefix);
  CHECK(parsed.placement_single);
  CHECK(parsed.max_shard_tensors == m.max_shard_tensors);
  auto refused = [&](const std::string& from, const std::string& to) {
    auto bad = text;
    const auto at = bad.find(from);
    REQUIRE(at != std::string::npos);
    bad.replace(at, from.size(), to);
    CHECK_THROWS_AS(parse_manifest(bad, "m.json"), Error);
  };
  refused("\"alignment\": 64", "\"alignment\": 48");
  refused("\"placement\": \"single\"", "\"placement\": \"sets\"");
  refused("\"max_shard_tensors\": 3", "\"max_shard_tensors\": 0");
  refused("\"shard_prefix\": \"w\"", "\"shard_prefix\": \"a/b\"");
  auto graph = m;  // placement is a version-2 option
  graph.version = kManifestVersion;
  graph.programs.clear();
  graph.program = {"program.ptg", std::string(64, 'd'), 10};
  CHECK_THROWS_AS(parse_manifest(manifest_to_json(graph), "m.json"), Error);
  graph.placement_single = false;
  CHECK_NOTHROW(parse_manifest(manifest_to_json(graph), "m.json"));
}

}  // namespace
}  // namespace ptepack
