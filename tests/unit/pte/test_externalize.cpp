// externalize: which bytes leave which ExecuTorch program, under which key
// (docs/rename-rules.md), on the fixtures of tests/data/pte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "hash/parallel_hash.h"
#include "ptepack/io/input_file.h"
#include "pte/externalize.h"
#include "test_fixtures.h"

namespace fs = std::filesystem;
using namespace ptepack;
using namespace ptepack::test;

namespace {

// Programs as pack reads them: each with its default data files.
struct Programs {
  std::vector<std::unique_ptr<ProgramFile>> files;
  std::vector<std::unique_ptr<TensorTable>> data;
  std::vector<ProgramSource> sources;
  RangeDigests digests;

  void add(const fs::path& path, const std::string& file_name) {
    auto program = pte::read(InputFile::open(path));
    auto table = std::make_unique<TensorTable>();
    for (const auto& f : default_data(path, &program).files) {
      auto more = load_data_file(f);
      table->insert(more.begin(), more.end());
    }
    files.push_back(std::make_unique<ProgramFile>(ProgramFile{file_name, std::move(program), {}}));
    data.push_back(std::move(table));
    sources.push_back({path.string(), files.back().get(), data.back().get()});
  }
  ExternalizedSet run() {
    for (const auto& s : sources) add_program_ranges(s, digests);
    digests.compute(1, nullptr);
    return externalize(sources, digests);
  }
};

std::set<std::string> keys_of(const ExternalizedSet& set) {
  std::set<std::string> keys;
  for (const auto& t : set.tensors) keys.insert(t.key);
  return keys;
}

// Every key sorted and once; every program's keys among them.
void check_well_formed(const ExternalizedSet& set) {
  for (size_t i = 1; i < set.tensors.size(); ++i)
    CHECK(set.tensors[i - 1].key < set.tensors[i].key);
  const auto keys = keys_of(set);
  for (const auto& p : set.programs) {
    CHECK(std::is_sorted(p.keys.begin(), p.keys.end()));
    for (const auto& k : p.keys) CHECK(keys.count(k) == 1);
  }
}

}  // namespace

TEST_CASE("externalize: constants get <method>/<name> keys, one rename each", "[pte]") {
  Programs in;
  in.add(pte_fixture("portable_multi_method.pte"), "portable_multi_method.pte");
  const auto set = in.run();
  check_well_formed(set);
  REQUIRE(set.programs.size() == 1);
  const auto& p = set.programs[0];
  REQUIRE_FALSE(p.renames.empty());
  for (const auto& r : p.renames) {
    INFO(r.to);
    CHECK(r.to.rfind(r.method + "/", 0) == 0);
    CHECK(std::binary_search(p.keys.begin(), p.keys.end(), r.to));
  }
}

TEST_CASE("externalize: EXTERNAL tensors keep their keys", "[pte]") {
  Programs in;
  in.add(pte_fixture("external_pair.pte"), "external_pair.pte");
  const auto set = in.run();
  check_well_formed(set);
  const auto keys = keys_of(set);
  const auto ptd = load_data_file(pte_fixture("external_pair.ptd"));
  for (const auto& [key, data] : ptd) CHECK(keys.count(key) == 1);
  for (const auto& r : set.programs[0].renames) CHECK(ptd.count(r.to) == 0);
}

TEST_CASE("externalize: one key with different bytes in two programs is qualified", "[pte]") {
  Programs in;
  in.add(pte_fixture("portable_multi_method.pte"), "portable_multi_method.pte");
  in.add(pte_fixture("portable_keyword_spotting.pte"), "portable_keyword_spotting.pte");
  const auto set = in.run();
  check_well_formed(set);
  const auto keys = keys_of(set);
  CHECK(keys.count("forward/constant_1@portable_multi_method") == 1);
  CHECK(keys.count("forward/constant_1@portable_keyword_spotting") == 1);
  CHECK(keys.count("forward/constant_1") == 0);

  SECTION("whatever the order of the programs") {
    Programs reversed;
    reversed.add(pte_fixture("portable_keyword_spotting.pte"), "portable_keyword_spotting.pte");
    reversed.add(pte_fixture("portable_multi_method.pte"), "portable_multi_method.pte");
    CHECK(keys_of(reversed.run()) == keys);
  }
}

TEST_CASE("externalize: the same program under two names shares every key", "[pte]") {
  Programs one;
  one.add(pte_fixture("xnnpack_conv.pte"), "a.pte");
  const auto alone = one.run();
  Programs two;
  two.add(pte_fixture("xnnpack_conv.pte"), "a.pte");
  two.add(pte_fixture("xnnpack_conv.pte"), "b.pte");
  const auto both = two.run();
  check_well_formed(both);
  CHECK(keys_of(both) == keys_of(alone));
  REQUIRE(both.programs.size() == 2);
  CHECK(both.programs[0].keys == both.programs[1].keys);
}
