// artifact: what an input is (sniffed by content, the manifest parsed, never
// searched as text) and which data files a program is loaded with.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/io/input_file.h"
#include "ptepack/pte/pte.h"
#include "ptepack/verify/reader.h"
#include "test_fixtures.h"

namespace fs = std::filesystem;
using ptepack::ArtifactKind;
using ptepack::load_artifact;
using namespace ptepack::test;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

ptepack::pte::Program read_program(const fs::path& path) {
  return ptepack::pte::read(ptepack::InputFile::open(path));
}

}  // namespace

TEST_CASE("artifact: every input kind is recognised by its content", "[artifact]") {
  TempDir dir;
  CHECK(load_artifact(pte_fixture("xnnpack_conv.pte")).kind == ArtifactKind::pte);
  CHECK(load_artifact(pte_fixture("external_pair.ptd")).kind == ArtifactKind::ptd);
  CHECK(load_artifact(data_path("two_methods.ptg"), {data_path("prefill.safetensors")}).kind ==
        ArtifactKind::graph);
  CHECK(load_artifact(data_path("prefill.safetensors")).kind == ArtifactKind::safetensors);
  // Content decides, not the name: a .pte under another extension is still one.
  fs::copy_file(pte_fixture("xnnpack_conv.pte"), dir / "model.bin");
  CHECK(load_artifact(dir / "model.bin").kind == ArtifactKind::pte);

  (void)pack_into({data_path("prefill.json"), data_path("decode.json")}, dir / "graphs");
  (void)pack_into({data_path("prefill.json"), data_path("decode.json")}, dir / "graphs.ptn");
  (void)pack_into({pte_fixture("xnnpack_conv.pte"), pte_fixture("portable_multi_method.pte")},
                  dir / "ptes");
  CHECK(load_artifact(dir / "graphs").kind == ArtifactKind::graph_directory);
  CHECK(load_artifact(dir / "graphs" / "manifest.json").kind == ArtifactKind::graph_directory);
  CHECK(load_artifact(dir / "graphs.ptn").kind == ArtifactKind::package);
  CHECK(load_artifact(dir / "ptes").kind == ArtifactKind::pte_directory);
  CHECK(load_artifact(dir / "ptes" / "manifest.json").kind == ArtifactKind::pte_directory);
}

TEST_CASE("artifact: a manifest rewritten by a JSON tool is the same directory", "[artifact]") {
  TempDir dir;
  (void)pack_into({pte_fixture("xnnpack_conv.pte"), pte_fixture("portable_multi_method.pte")},
                  dir / "ptes");
  const auto manifest = nlohmann::json::parse(file_bytes(dir / "ptes" / "manifest.json"));
  for (int indent : {-1, 4}) {  // compact (jq -c) and json.dump(indent=4)
    write_text(dir / "ptes" / "manifest.json", manifest.dump(indent));
    const auto a = load_artifact(dir / "ptes");
    CHECK(a.kind == ArtifactKind::pte_directory);
    CHECK(a.pte_programs.size() == 2);
    REQUIRE(a.manifest);
    CHECK(a.manifest->version == 2);
  }
}

TEST_CASE("artifact: an unknown or empty file is refused, naming it", "[artifact]") {
  TempDir dir;
  write_text(dir / "empty.pte", "");
  write_text(dir / "noise.bin", std::string(64, 'x'));
  for (const auto* name : {"empty.pte", "noise.bin"}) {
    try {
      (void)load_artifact(dir / name);
      FAIL("accepted " << name);
    } catch (const ptepack::Error& e) {
      CHECK(std::string(e.what()).find(name) != std::string::npos);
      CHECK(e.code() != ptepack::ErrorCode::internal);
    }
  }
  CHECK_THROWS_AS(load_artifact(dir / "missing.pte"), ptepack::Error);
}

TEST_CASE("artifact: a program's default data files, one rule", "[artifact]") {
  SECTION("a program graph loads the same-stem .safetensors beside it") {
    TempDir dir;
    fs::copy_file(data_path("two_methods.ptg"), dir / "m.ptg");
    CHECK(ptepack::default_data(dir / "m.ptg", nullptr).files.empty());
    fs::copy_file(data_path("prefill.safetensors"), dir / "m.safetensors");
    const auto found = ptepack::default_data(dir / "m.ptg", nullptr);
    REQUIRE(found.files.size() == 1);
    CHECK(found.files[0] == dir / "m.safetensors");
    CHECK(load_artifact(dir / "m.ptg").data_files ==
          std::vector<std::string>{(dir / "m.safetensors").string()});
    CHECK(load_artifact(dir / "m.ptg", {}, false).data_files.empty());
  }
  SECTION("a .pte with EXTERNAL tensors loads the same-stem .ptd beside it") {
    const auto path = pte_fixture("external_pair.pte");
    const auto program = read_program(path);
    const auto found = ptepack::default_data(path, &program);
    REQUIRE(found.files.size() == 1);
    CHECK(found.files[0].filename() == "external_pair.ptd");
    CHECK_FALSE(found.named_keys);
    CHECK_FALSE(found.note);
  }
  SECTION("a .pte without EXTERNAL tensors needs none") {
    const auto path = pte_fixture("xnnpack_conv.pte");
    const auto program = read_program(path);
    CHECK(ptepack::default_data(path, &program).files.empty());
  }
  SECTION("a program inside a packed directory loads the shards its manifest lists") {
    TempDir dir;
    (void)pack_into({pte_fixture("xnnpack_conv.pte"), pte_fixture("portable_multi_method.pte")},
                    dir / "ptes", 300'000);
    const auto manifest = nlohmann::json::parse(file_bytes(dir / "ptes" / "manifest.json"));
    for (const auto& entry : manifest["programs"]) {
      const auto path = dir / "ptes" / entry["file"].get<std::string>();
      const auto program = read_program(path);
      const auto found = ptepack::default_data(path, &program);
      std::vector<std::string> names;
      for (const auto& f : found.files) names.push_back(f.filename().string());
      CHECK(names == entry["shards"].get<std::vector<std::string>>());
      REQUIRE(found.named_keys);
      CHECK(*found.named_keys == entry["named_data"].get<std::vector<std::string>>());
      REQUIRE(found.note);
      CHECK(found.note->find("manifest") != std::string::npos);
    }
  }
}

TEST_CASE("artifact: directory_paths names the directory and its manifest", "[artifact]") {
  TempDir dir;
  (void)pack_into({data_path("prefill.json")}, dir / "out");
  const auto from_dir = ptepack::directory_paths(dir / "out");
  const auto from_manifest = ptepack::directory_paths(dir / "out" / "manifest.json");
  CHECK(from_dir.dir == from_manifest.dir);
  CHECK(from_dir.manifest == from_manifest.manifest);
  CHECK(from_dir.manifest.filename() == "manifest.json");
}
