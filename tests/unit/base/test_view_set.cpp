// The validator's flat set of names against std::unordered_set on the same operations.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/view_set.h"
#include "test_support.h"

using ptepack::detail::ViewSet;

TEST_CASE("view set: inserts and lookups agree with std::unordered_set") {
  ptepack::test::Xorshift next(0x6A09E667F3BCC908ull);
  // Names with long common prefixes, the empty name, and repeats; the strings
  // live in a list that outlives both sets.
  std::vector<std::string> names;
  names.emplace_back();
  for (int i = 0; i < 3000; ++i) {
    names.push_back("layers." + std::to_string(next(1500)) + std::string(next(4), 'x') + ".weight");
  }
  for (int reserve : {0, 10, 5000}) {
    ViewSet set;
    std::unordered_set<std::string_view> reference;
    set.reserve(static_cast<size_t>(reserve));
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string_view probe = names[next(names.size())];
      REQUIRE(set.contains(probe) == (reference.count(probe) > 0));
      REQUIRE(set.insert(names[i]) == reference.insert(names[i]).second);
      REQUIRE(set.size() == reference.size());
    }
    std::set<std::string_view> listed;
    set.for_each([&listed](std::string_view name) { CHECK(listed.insert(name).second); });
    CHECK(listed == std::set<std::string_view>(reference.begin(), reference.end()));
    CHECK(set.contains(""));
    CHECK_FALSE(set.contains("layers.x.weight"));
  }
  ViewSet empty;  // nothing allocated yet
  CHECK_FALSE(empty.contains("a"));
  CHECK_FALSE(empty.contains(""));
  CHECK(empty.size() == 0);
}
