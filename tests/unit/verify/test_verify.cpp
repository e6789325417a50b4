// verify: every fixture whole, damage found and named, the report's figures.
#include <catch2/catch.hpp>

#include <fstream>

#include "ptepack/base/error.h"
#include "ptepack/verify/verify.h"
#include "test_fixtures.h"

namespace fs = std::filesystem;
using namespace ptepack::test;

namespace {

ptepack::VerifyReport verify(const fs::path& path) {
  ptepack::VerifyOptions options;
  options.jobs = 1;
  return ptepack::verify_artifact(path, options);
}

bool mentions(const std::vector<std::string>& lines, const std::string& word) {
  for (const auto& line : lines) {
    if (line.find(word) != std::string::npos) return true;
  }
  return false;
}

void flip_byte(const fs::path& path, uint64_t offset) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("verify: every ExecuTorch fixture is whole", "[verify]") {
  for (const auto* name :
       {"xnnpack_conv.pte", "xnnpack_quantized.pte", "xnnpack_stress_mlp.pte",
        "portable_add_no_header.pte", "portable_inline_constant_buffer.pte",
        "portable_keyword_spotting.pte", "portable_multi_method.pte", "external_pair.pte"}) {
    INFO(name);
    const auto report = verify(pte_fixture(name));
    CHECK(report.ok());
    CHECK(report.problems.empty());
    CHECK(report.kind == "pte program");
    CHECK(report.files_checked >= 1);
  }
  // The pair's constants live in its .ptd, which the program loads by default.
  const auto pair = verify(pte_fixture("external_pair.pte"));
  CHECK(pair.files_checked == 2);
  CHECK(pair.tensors_checked > 0);
}

TEST_CASE("verify: a packed directory is whole, and each kind of damage is named",
          "[verify]") {
  TempDir dir;
  const auto out = dir / "ptes";
  (void)pack_into({pte_fixture("xnnpack_conv.pte"), pte_fixture("portable_multi_method.pte")},
                  out, 300'000);
  const auto whole = verify(out);
  REQUIRE(whole.ok());
  const auto shards = listed_shards(out);
  REQUIRE(shards.size() >= 2);
  CHECK(whole.kind == "directory of programs");
  CHECK(whole.files_checked == shards.size() + 2);  // and the two programs

  SECTION("a byte flipped in a shard's data") {
    flip_byte(out / shards.front(), fs::file_size(out / shards.front()) - 1);
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, shards.front()));
  }
  SECTION("a shard missing") {
    fs::remove(out / shards.back());
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, shards.back()));
    CHECK(mentions(report.problems, "missing"));
  }
  SECTION("a program changed") {
    flip_byte(out / "xnnpack_conv.pte", 100);
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, "xnnpack_conv.pte"));
  }
  SECTION("a file the manifest does not list") {
    std::ofstream(out / "stray.bin") << "x";
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, "stray.bin"));
  }
}

TEST_CASE("verify: a truncated program is a problem, a missing path an I/O error",
          "[verify]") {
  TempDir dir;
  const auto bytes = file_bytes(pte_fixture("xnnpack_conv.pte"));
  std::ofstream(dir / "cut.pte", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const auto report = verify(dir / "cut.pte");
  CHECK_FALSE(report.ok());
  CHECK(mentions(report.problems, "cut.pte"));
  try {
    (void)verify(dir / "absent.pte");
    FAIL("a missing path was verified");
  } catch (const ptepack::Error& e) {
    CHECK(e.code() == ptepack::ErrorCode::io);
  }
}

TEST_CASE("verify: the text and JSON renderings carry the verdict", "[verify]") {
  const auto report = verify(pte_fixture("xnnpack_conv.pte"));
  const auto json = ptepack::render_verify_json(report);
  CHECK(json.find("\"ok\": true") != std::string::npos);
  const auto text = ptepack::render_verify_text(report);
  CHECK(text.find("xnnpack_conv.pte") != std::string::npos);
}
