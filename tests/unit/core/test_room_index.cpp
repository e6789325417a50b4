// The shard planner's room index against a scan of every shard with the same rule.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/room_index.h"
#include "test_support.h"

using ptepack::detail::RoomIndex;

namespace {

// The rule, shard by shard: a group growing the header by h = qA + r bytes
// (r < A) with `payload` data bytes needs room >= payload + qA, and A more
// when r exceeds the shard's slack; rooms are stored plus one.
size_t first_by_scan(const std::vector<RoomIndex::Room>& rooms, uint64_t alignment, size_t from,
                     uint64_t header, uint64_t payload) {
  for (size_t s = from; s < rooms.size(); ++s) {
    uint64_t need = payload + header / alignment * alignment;
    if (header % alignment > rooms[s].slack) need += alignment;
    if (rooms[s].after_header > need) return s;
  }
  return RoomIndex::npos;
}

}  // namespace

TEST_CASE("room index: the first fitting shard is the one a scan finds") {
  ptepack::test::Xorshift next(0xD1B54A32D192ED03ull);
  size_t found = 0;
  size_t queries = 0;
  for (uint64_t alignment : {uint64_t{1}, uint64_t{8}, uint64_t{16}, uint64_t{128}}) {
    for (int round = 0; round < 40; ++round) {
      RoomIndex index(alignment);
      std::vector<RoomIndex::Room> rooms;
      const size_t count = 1 + next(70);
      auto random_room = [&] {
        // Small rooms around the alignment, every slack; some shards closed (0).
        RoomIndex::Room room{next(5) == 0 ? 0 : 1 + next(3 * alignment + 40),
                             alignment == 1 ? 0 : next(alignment)};
        return room;
      };
      for (size_t i = 0; i < count; ++i) {
        rooms.push_back(random_room());
        index.push(rooms.back());
      }
      for (int step = 0; step < 200; ++step) {
        if (next(4) == 0) {  // rooms change as groups are placed
          size_t s = next(rooms.size());
          rooms[s] = random_room();
          index.set(s, rooms[s]);
        }
        const uint64_t header = alignment == 1 ? 0 : next(3 * alignment);
        const uint64_t payload = next(2 * alignment + 40);
        const size_t from = next(rooms.size() + 1);
        const size_t expected = first_by_scan(rooms, alignment, from, header, payload);
        INFO("alignment " << alignment << " round " << round << " step " << step);
        REQUIRE(index.first_fit(from, header, payload) == expected);
        found += expected != RoomIndex::npos;
        ++queries;
      }
    }
  }
  CHECK(queries == 4 * 40 * 200);
  CHECK(found > queries / 4);  // both answers are common
  CHECK(found < queries * 3 / 4);
}
