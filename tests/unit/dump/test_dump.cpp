// dump: what an artifact holds, checked against an independent read of the
// manifest (nlohmann/json) and the fixture's bytes.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "ptepack/base/error.h"
#include "ptepack/dump/dump.h"
#include "test_fixtures.h"

namespace fs = std::filesystem;
using namespace ptepack::test;

namespace {

nlohmann::json dump_json(const fs::path& path, ptepack::DumpOptions options = {}) {
  options.json = true;
  options.jobs = 1;
  return nlohmann::json::parse(ptepack::dump_artifact(path, options));
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string out;
  for (unsigned char c : digest) {
    out += "0123456789abcdef"[c >> 4];
    out += "0123456789abcdef"[c & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("dump: a packed directory lists every tensor its manifest records", "[dump]") {
  TempDir dir;
  const auto out = dir / "ptes";
  (void)pack_into({pte_fixture("xnnpack_conv.pte"), pte_fixture("portable_multi_method.pte")},
                  out, 300'000);
  const auto manifest = nlohmann::json::parse(file_bytes(out / "manifest.json"));
  const auto dump = dump_json(out);
  CHECK(dump["format"] == "ptepack.dump");
  CHECK(dump["kind"] == "directory of programs");
  REQUIRE(dump["tensors"].size() == manifest["tensors"].size());
  for (const auto& [key, t] : manifest["tensors"].items()) {
    INFO(key);
    REQUIRE(dump["tensors"].contains(key));
    CHECK(dump["tensors"][key]["sha256"] == t["sha256"]);
    CHECK(dump["tensors"][key]["nbytes"] == t["nbytes"]);
    CHECK(dump["tensors"][key]["shard"] == t["shard"]);
  }
  CHECK(dump["summary"]["key_count"] == manifest["tensors"].size());
}

TEST_CASE("dump: --key lists the matching tensors, totals cover everything", "[dump]") {
  TempDir dir;
  (void)pack_into({pte_fixture("xnnpack_conv.pte"), pte_fixture("portable_multi_method.pte")},
                  dir / "ptes");
  ptepack::DumpOptions options;
  options.keys = {"forward/*"};
  const auto all = dump_json(dir / "ptes");
  const auto some = dump_json(dir / "ptes", options);
  REQUIRE_FALSE(some["tensors"].empty());
  CHECK(some["tensors"].size() < all["tensors"].size());
  for (const auto& [key, t] : some["tensors"].items()) CHECK(key.rfind("forward/", 0) == 0);
  CHECK(some["summary"] == all["summary"]);
}

TEST_CASE("dump: the digests listed are the SHA-256 of the bytes at the offsets listed",
          "[dump]") {
  ptepack::DumpOptions options;
  options.offsets = true;
  const auto dump = dump_json(pte_fixture("external_pair.pte"), options);
  REQUIRE_FALSE(dump["tensors"].empty());
  for (const auto& [key, t] : dump["tensors"].items()) {
    INFO(key);
    const auto bytes = file_bytes(t["file"].get<std::string>());
    const auto offset = t["offset"].get<uint64_t>();
    const auto size = t["nbytes"].get<uint64_t>();
    REQUIRE(offset + size <= bytes.size());
    CHECK(t["sha256"] == sha256_hex(bytes.substr(offset, size)));
  }
}

TEST_CASE("dump: --width keeps every text line within the width", "[dump]") {
  ptepack::DumpOptions options;
  options.width = 60;
  const auto text = ptepack::dump_artifact(pte_fixture("portable_multi_method.pte"), options);
  REQUIRE_FALSE(text.empty());
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 60);
}

TEST_CASE("dump: an unreadable input writes nothing", "[dump]") {
  TempDir dir;
  const auto bytes = file_bytes(pte_fixture("xnnpack_conv.pte"));
  std::ofstream(dir / "cut.pte", std::ios::binary) << bytes.substr(0, 1000);
  size_t written = 0;
  CHECK_THROWS_AS(ptepack::dump_artifact(dir / "cut.pte", {},
                                         [&](std::string_view chunk) { written += chunk.size(); }),
                  ptepack::Error);
  CHECK(written == 0);
}
