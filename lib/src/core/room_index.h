// The shard planner's index of shards by room (internal; unit-tested on its own).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace ptepack::detail {

// Max-tree over the shards' room, so that the first shard that may take a
// group is found in O(log shards) rather than by trying every shard.
//
// A shard's room is what follows its smallest header padded to the header
// alignment A, and that header's padding (`slack`, < A). A group growing the
// header by at least h = qA + r (r < A) bytes and taking `payload` data bytes
// then fits only if room >= payload + qA, plus A more when r > slack: the
// padded header grows by qA, and by one more A unless the padding absorbs r.
// That is the first size check fits() makes, so leaving out the shards that
// fail it changes no decision. Each node keeps, for kLevels slack thresholds,
// the largest room among its shards with at least that slack, which prunes
// subtrees on both terms. Without a header term (payload caps, no cap) A is 1.
// Rooms are stored plus one: a shard with 0 never matches.
class RoomIndex {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);
  struct Room {
    uint64_t after_header = 0;  // plus one; 0 when nothing fits
    uint64_t slack = 0;
  };

  explicit RoomIndex(uint64_t alignment)
      : alignment_(alignment), width_(std::max<uint64_t>(alignment / kLevels, 1)) {}

  void push(Room room) {
    if (count_ == leaves_) {
      std::vector<Room> old(rooms_.begin(), rooms_.begin() + static_cast<std::ptrdiff_t>(count_));
      leaves_ = leaves_ == 0 ? 1 : 2 * leaves_;
      rooms_.assign(leaves_, Room{});
      tree_.assign(2 * leaves_, Levels{});
      for (size_t i = 0; i < old.size(); ++i) {
        rooms_[i] = old[i];
        tree_[leaves_ + i] = levels_of(old[i]);
      }
      for (size_t n = leaves_ - 1; n >= 1; --n) pull(n);
    }
    set(count_++, room);
  }

  void set(size_t index, Room room) {
    rooms_[index] = room;
    size_t n = leaves_ + index;
    tree_[n] = levels_of(room);
    for (n /= 2; n >= 1; n /= 2) pull(n);
  }

  // The first shard >= from that may take a group growing the header by at
  // least `header` bytes and taking `payload` data bytes, or npos.
  [[nodiscard]] size_t first_fit(size_t from, uint64_t header, uint64_t payload) const {
    if (count_ == 0) return npos;
    Query query{header % alignment_, saturated(payload, header / alignment_ * alignment_)};
    return find(1, 0, leaves_, from, query);
  }

 private:
  static constexpr size_t kLevels = 8;
  using Levels = std::array<uint64_t, kLevels>;  // level k: slack >= k * width_
  struct Query {
    uint64_t rest;  // r
    uint64_t need;  // payload + qA
  };

  static uint64_t saturated(uint64_t a, uint64_t b) {
    return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                        : a + b;
  }

  [[nodiscard]] Levels levels_of(Room room) const {
    Levels levels{};
    for (size_t k = 0; k < kLevels; ++k) {
      if (room.slack >= k * width_) levels[k] = room.after_header;
    }
    return levels;
  }

  void pull(size_t n) {
    for (size_t k = 0; k < kLevels; ++k)
      tree_[n][k] = std::max(tree_[2 * n][k], tree_[2 * n + 1][k]);
  }

  // Rooms are plus one, so "room >= need" is "stored > need".
  [[nodiscard]] bool leaf_fits(Room room, const Query& q) const {
    uint64_t need = q.rest > room.slack ? saturated(q.need, alignment_) : q.need;
    return room.after_header > need;
  }

  [[nodiscard]] bool may_fit(const Levels& levels, const Query& q) const {
    return levels[std::min<uint64_t>(q.rest / width_, kLevels - 1)] > q.need ||
           levels[0] > saturated(q.need, alignment_);
  }

  size_t find(size_t node, size_t lo, size_t hi, size_t from, const Query& q) const {
    if (hi <= from || lo >= count_ || !may_fit(tree_[node], q)) return npos;
    if (hi - lo == 1) return leaf_fits(rooms_[lo], q) ? lo : npos;
    size_t mid = lo + (hi - lo) / 2;
    size_t left = find(2 * node, lo, mid, from, q);
    return left != npos ? left : find(2 * node + 1, mid, hi, from, q);
  }

  uint64_t alignment_;
  uint64_t width_;
  size_t leaves_ = 0;
  size_t count_ = 0;
  std::vector<Room> rooms_;   // by shard
  std::vector<Levels> tree_;  // heap order from 1; leaves at [leaves_, 2 * leaves_)
};

}  // namespace ptepack::detail
