// Key lookups: the ordered cursor and the hashed tensor index agree with the ordered maps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "base/ordered_cursor.h"
#include "ptepack/tensors/tensor.h"

using namespace ptepack;

TEST_CASE("an ordered cursor asked in key order finds exactly what find() finds") {
  const std::map<std::string, int> map{{"a", 1}, {"layers.1.w", 2}, {"layers.10.w", 3}, {"z", 4}};
  const std::set<std::string> set{"layers.1.w", "m/x", "z"};
  OrderedCursor in_map(map);
  OrderedCursor in_set(set);
  // Asked keys interleave present and absent ones, before, between and after the entries.
  for (std::string key :
       {"", "a", "b", "layers.1.w", "layers.10", "layers.10.w", "m/x", "z", "zz"}) {
    auto it = in_map.find(key);
    CHECK((it == in_map.end() ? map.end() : it) == map.find(key));
    CHECK(in_set.contains(key) == (set.count(key) > 0));
  }
  const std::set<std::string> none;
  OrderedCursor empty(none);
  CHECK_FALSE(empty.contains(std::string("a")));
}

TEST_CASE("a tensor lookup numbers entries in key order and finds each by its key") {
  TensorTable table;
  for (const char* key : {"b", "a", "layers.2.w", "layers.10.w"})
    table[key].bytes.size = table.size();
  const TensorLookup lookup(table);
  REQUIRE(lookup.size() == table.size());
  size_t i = 0;
  for (const auto& [key, data] : table) {
    CHECK(lookup.find(key) == i);
    CHECK(&lookup.entry(i) == &*table.find(key));
    CHECK(lookup.data(key) == &data);
    ++i;
  }
  CHECK(lookup.find("layers.1") == TensorLookup::npos);
  CHECK(lookup.data("") == nullptr);
}

TEST_CASE("a tensor lookup over many keys and over entries of several tables") {
  // Enough keys with long common prefixes that probes run into occupied slots.
  TensorTable first;
  TensorTable second;
  std::mt19937_64 random(7);
  std::set<std::string> absent;
  for (int i = 0; i < 20000; ++i) {
    const std::string key = "model.layers." + std::to_string(random() % 1000000) + ".weight";
    if (first.count(key) || second.count(key)) continue;
    (i % 3 == 0 ? second : first)[key].bytes.size = static_cast<uint64_t>(i);
    absent.insert(key + ".x");
  }
  const TensorLookup whole(first);
  REQUIRE(whole.size() == first.size());
  size_t n = 0;
  for (const auto& entry : first) CHECK(whole.find(entry.first) == n++);
  for (const auto& [key, data] : second) CHECK(whole.find(key) == TensorLookup::npos);
  for (const auto& key : absent) CHECK(whole.data(key) == nullptr);

  // Views of two tables' entries in key order, as verify builds them.
  std::vector<const TensorTable::value_type*> entries;
  for (const auto* table : {&first, &second}) {
    for (const auto& entry : *table) entries.push_back(&entry);
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  const TensorLookup merged(entries);
  REQUIRE(merged.size() == first.size() + second.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    CHECK(merged.find(entries[i]->first) == i);
    CHECK(merged.data(entries[i]->first) == &entries[i]->second);
  }
  CHECK(merged.find("") == TensorLookup::npos);
  const TensorLookup empty(TensorTable{});
  CHECK(empty.find("a") == TensorLookup::npos);
}
