// verify: every fixture whole, damage found and named, the report's figures.
#include <catch2/catch.hpp>

#include <algorithm>
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

bool mentions(const std::vector<ptepack::Problem>& problems, const std::string& word) {
  for (const auto& p : problems) {
    if (p.text.find(word) != std::string::npos) return true;
  }
  return false;
}

// The identifiers of the problems found, in order.
std::vector<std::string> ids_of(const ptepack::VerifyReport& report) {
  std::vector<std::string> ids;
  for (const auto& p : report.problems) ids.emplace_back(ptepack::problem_id_name(p.id));
  return ids;
}

// Whether some problem has identifier `id` and names `file` as its file.
bool has_problem(const ptepack::VerifyReport& report, std::string_view id, const fs::path& file) {
  return std::any_of(report.problems.begin(), report.problems.end(), [&](const auto& p) {
    return ptepack::problem_id_name(p.id) == id && fs::path(p.file) == file;
  });
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

std::string fmt_ids(const ptepack::VerifyReport& report) {
  std::string out;
  for (const auto& p : report.problems)
    out += std::string(ptepack::problem_id_name(p.id)) + " " + p.file + ": " + p.text + "\n";
  return out;
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
    CHECK(report.kind == ptepack::ArtifactKind::pte);
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
  CHECK(whole.kind == ptepack::ArtifactKind::pte_directory);
  CHECK(whole.files_checked == shards.size() + 2);  // and the two programs

  SECTION("a byte flipped in a shard's data") {
    flip_byte(out / shards.front(), fs::file_size(out / shards.front()) - 1);
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, shards.front()));
    INFO(fmt_ids(report));
    CHECK(has_problem(report, "file_changed", out / shards.front()));
    CHECK(has_problem(report, "tensor_bytes", out / shards.front()));
  }
  SECTION("a shard missing") {
    fs::remove(out / shards.back());
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, shards.back()));
    CHECK(mentions(report.problems, "missing"));
    INFO(fmt_ids(report));
    CHECK(has_problem(report, "file_missing", out / shards.back()));
  }
  SECTION("a program changed") {
    flip_byte(out / "xnnpack_conv.pte", 100);
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, "xnnpack_conv.pte"));
    INFO(fmt_ids(report));
    CHECK(has_problem(report, "file_changed", out / "xnnpack_conv.pte"));
  }
  SECTION("a file the manifest does not list") {
    std::ofstream(out / "stray.bin") << "x";
    const auto report = verify(out);
    CHECK_FALSE(report.ok());
    CHECK(mentions(report.problems, "stray.bin"));
    CHECK(ids_of(report) == std::vector<std::string>{"file_stray"});
    CHECK(has_problem(report, "file_stray", out / "stray.bin"));
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
  CHECK(ids_of(report) == std::vector<std::string>{"file_unreadable"});
  try {
    (void)verify(dir / "absent.pte");
    FAIL("a missing path was verified");
  } catch (const ptepack::Error& e) {
    CHECK(e.code() == ptepack::ErrorCode::io);
  }
}

TEST_CASE("verify: problem identifiers are distinct and stable", "[verify]") {
  // The documented list (docs/problems.md), in enum order: never renamed or reused.
  const std::vector<std::string> documented{
      "file_unreadable", "file_missing",   "file_stray",        "file_changed",
      "shard_name",      "shard_contents", "tensor_bytes",      "manifest_inconsistent",
      "package_layout",  "program_rules",  "signature_missing", "signature_invalid",
      "release_rollback"};
  for (size_t i = 0; i < documented.size(); ++i) {
    CHECK(ptepack::problem_id_name(static_cast<ptepack::ProblemId>(i)) == documented[i]);
  }
}

TEST_CASE("verify: the text and JSON renderings carry the verdict", "[verify]") {
  const auto report = verify(pte_fixture("xnnpack_conv.pte"));
  const auto json = ptepack::render_verify_json(report);
  CHECK(json.find("\"ok\": true") != std::string::npos);
  CHECK(json.find("\"problem_details\": []") != std::string::npos);
  const auto text = ptepack::render_verify_text(report);
  CHECK(text.find("xnnpack_conv.pte") != std::string::npos);
}
