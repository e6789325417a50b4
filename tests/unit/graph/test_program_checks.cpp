// A program read in place: its key analysis (ProgramKeys) and verify's program checks, one
// broken rule at a time, on the merged two-method fixture.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "graph/program_checks.h"
#include "graph/program_keys.h"
#include "pte/data_checks.h"
#include "ptepack/graph/merge.h"
#include "ptepack/verify/reader.h"
#include "test_support.h"
#include "verify/verify_support.h"

using namespace ptepack;

namespace {

ProgramBuffer encoded(const nb::ProgramT& program) {
  const auto bytes = write_program_binary(program);
  return read_program_buffer(std::vector<uint8_t>(bytes.begin(), bytes.end()), "t.ptg");
}

// The fixture's two methods merged: what pack writes as program.ptg, and its data.
MergedProgram merged_fixture() {
  std::vector<MergeInput> inputs;
  for (const char* stem : {"prefill", "decode"}) {
    auto a =
        load_artifact(test::data_path(std::string(stem) + ".json"), {}, true, ProgramForm::tree);
    inputs.push_back({a.name, std::move(a.program_tree), std::move(a.data), std::nullopt});
  }
  return merge_programs(std::move(inputs));
}

std::vector<std::string> problems_of(const nb::ProgramT& program, const TensorTable& data) {
  const auto buffer = encoded(program);
  const ProgramKeys keys(buffer.root());
  std::vector<std::string> problems;
  check_packed_program(buffer.root(), keys, TensorLookup(data), "t.ptg", problems);
  return problems;
}

nb::NamedTensorRefT& constant(nb::ProgramT& program, size_t method, const std::string& name) {
  for (auto& c : program.methods.at(method)->constants) {
    if (c->name == name) return *c;
  }
  FAIL("no constant " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("ProgramKeys: every key once, with its methods, roles and mutability") {
  const auto buffer = read_program_file_buffer(test::data_path("two_methods.json"));
  const ProgramKeys keys(buffer.root());

  // The fixture's own facts.
  const auto* embeddings = keys.find("tok_embeddings.weight");
  REQUIRE(embeddings != nullptr);
  CHECK(keys.methods(*embeddings) == std::vector<std::string_view>{"decode", "prefill"});
  CHECK(embeddings->has(KeyRole::constant));
  CHECK_FALSE(embeddings->has(KeyRole::scale));
  CHECK_FALSE(embeddings->mutated);
  CHECK(keys.referenced_by(*embeddings, "prefill"));
  CHECK_FALSE(keys.referenced_by(*embeddings, "prefil"));
  const auto* scales = keys.find("layers.0.attention.wq.scales");
  REQUIRE(scales != nullptr);
  CHECK(scales->has(KeyRole::scale));
  CHECK(scales->needs_data());
  CHECK(keys.mutated() == std::vector<std::string_view>{"kv_cache", "pos"});
  CHECK(keys.is_mutated("pos"));  // only decode mutates it; prefill reads it
  CHECK(keys.methods(*keys.find("pos")) == std::vector<std::string_view>{"decode", "prefill"});
  CHECK(keys.find("kv_cache")->has(KeyRole::mutable_buffer));
  CHECK(keys.find("kv_cache")->has(KeyRole::mutation_target));
  CHECK_FALSE(keys.find("kv_cache")->needs_data());
  CHECK(keys.find("no such key") == nullptr);
  CHECK_FALSE(keys.is_mutated("no such key"));

  // The same as a walk of the object tree collected in ordered sets.
  const auto tree = read_program_file(test::data_path("two_methods.json"));
  std::map<std::string, std::pair<std::set<std::string>, unsigned>> expected;
  std::set<std::string> mutated;
  for (const auto& m : tree->methods) {
    for (const auto& c : m->constants) {
      if (c->mutated) mutated.insert(c->data_key);
    }
    for_each_data_key(*m, [&](const std::string& key, KeyRole role) {
      expected[key].first.insert(m->name);
      expected[key].second |= 1U << static_cast<unsigned>(role);
      if (role == KeyRole::mutable_buffer || role == KeyRole::mutation_target) mutated.insert(key);
    });
  }
  REQUIRE(keys.uses().size() == expected.size());
  auto use = keys.uses().begin();
  for (const auto& [key, entry] : expected) {
    INFO(key);
    CHECK(use->key == key);
    CHECK(keys.methods(*use) ==
          std::vector<std::string_view>(entry.first.begin(), entry.first.end()));
    CHECK(use->roles == entry.second);
    CHECK(use->mutated == (mutated.count(key) > 0));
    ++use;
  }
}

TEST_CASE("verify's program checks find each broken rule of a packed program") {
  auto packed = merged_fixture();
  auto& program = *packed.program;
  auto& data = packed.tensors;
  REQUIRE(problems_of(program, data).empty());

  auto only = [&](const std::string& expected) {
    const auto problems = problems_of(program, data);
    CHECK(problems == std::vector<std::string>{expected});
  };
  SECTION("an immutable key outside its method's namespace") {
    auto& c = constant(program, 0, "p_wq_weight");  // prefill
    data.emplace("elsewhere/wq", data.at(c.data_key));
    data.erase(c.data_key);
    c.data_key = "elsewhere/wq";
    only("t.ptg: method 'prefill': immutable key 'elsewhere/wq' is not in the prefill/ namespace");
  }
  SECTION("an immutable key read by two methods") {
    data.erase("prefill/tok_embeddings.weight");
    constant(program, 0, "p_tok_embeddings_weight").data_key = "decode/tok_embeddings.weight";
    const auto problems = problems_of(program, data);
    CHECK(problems ==
          std::vector<std::string>{
              "t.ptg: immutable key 'decode/tok_embeddings.weight' is referenced by several "
              "methods (decode, prefill)",
              "t.ptg: method 'prefill': immutable key 'decode/tok_embeddings.weight' is not in "
              "the prefill/ namespace"});
  }
  SECTION("a mutable key outside state/") {
    for (size_t m = 0; m < 2; ++m) constant(program, m, "b_pos").data_key = "pos";
    for (auto& method : program.methods) {
      for (auto& spec : method->output_specs) {
        if (spec->target == "state/pos") spec->target = "pos";
      }
    }
    data.emplace("pos", data.at("state/pos"));
    data.erase("state/pos");
    only("t.ptg: mutable key 'pos' is not in the state/ namespace");
  }
  SECTION("stored data nothing references") {
    data.emplace("decode/unused", data.at("decode/tok_embeddings.weight"));
    only("t.ptg: key 'decode/unused' is stored but no method references it");
  }
  SECTION("a referenced key without data") {
    data.erase("decode/layers.0.attention.wq.scales");
    only("t.ptg: key 'decode/layers.0.attention.wq.scales' (method decode) has no data");
  }
  SECTION("a method twice") {
    program.methods[1]->name = "prefill";
    const auto problems = problems_of(program, data);
    CHECK(std::count(problems.begin(), problems.end(), "t.ptg: method 'prefill' appears twice") ==
          1);
  }
  SECTION("constant data that disagrees with its meta") {
    data.at("prefill/_lifted_tensor_constant0").dtype = DType::INT;
    only(
        "t.ptg: method 'prefill': constant 'c_lifted_tensor_constant0' (key "
        "'prefill/_lifted_tensor_constant0'): graph declares dtype FLOAT but data is INT");
  }
}
