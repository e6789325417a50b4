// Deterministic first-fit shard planning on incrementally tracked file sizes.
#include "ptepack/core/shard_plan.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <map>

#include "core/room_index.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "containers/flat_tensor.h"
#include "containers/safetensors.h"
#include "core/shard_layout.h"

namespace ptepack {
namespace {

uint64_t add(uint64_t a, uint64_t b) {
  auto sum = checked_add(a, b);
  if (!sum) fail(ErrorCode::conflict, "shard size computation overflows");
  return *sum;
}

uint64_t aligned(uint64_t value, uint64_t alignment) {
  auto out = align_up(value, alignment);
  if (!out) fail(ErrorCode::conflict, "shard size computation overflows");
  return *out;
}

// A shard file is its header, padded to `header_alignment`, then the data
// section: .ptd pads the header to --alignment, safetensors to 8 bytes.
struct Geometry {
  ShardFormat format;
  uint64_t header_alignment;
  uint64_t segment_alignment;  // .ptd segments start on it; safetensors packs tensors
  [[nodiscard]] uint64_t file_size(uint64_t header, uint64_t data) const {
    return add(aligned(header, header_alignment), data);
  }
  // Where the next group's bytes would start after `data` bytes.
  [[nodiscard]] uint64_t next_start(uint64_t data) const {
    return format == ShardFormat::ptd ? aligned(data, segment_alignment) : data;
  }
};

// What the planner knows about one shard's exact size. The header length is
// kept as a range, [header_lo, header_hi], that collapses to one value
// whenever the exact layout is built (an "anchor"); the data section is
// append-only and known exactly.
struct Fill {
  uint64_t header_lo = 0;
  uint64_t header_hi = 0;
  bool header_hi_unknown = false;
  uint64_t data = 0;
  size_t last_owner = 0;  // tensor index of the last group's owner (safetensors order check)
  size_t max_key = 0;     // tensor index of the shard's largest key, aliases included
  // .ptd groups of one key sorting after every key of the shard, rejected on
  // the exact layout since the shard last changed: the smallest payload
  // rejected, by key length, rank and whether the entry is opaque. Such a
  // group's entry is built last, so the header it makes depends on those three
  // alone, and its bytes only add to the data section: a group of the same
  // three with at least that payload makes a file at least as large, and is
  // rejected without another layout.
  std::map<std::array<uint64_t, 3>, uint64_t> rejected;

  // The header length is known exactly (not a range).
  [[nodiscard]] bool exact() const { return !header_hi_unknown && header_lo == header_hi; }
};

// The tensor index of the largest key among `start` and the group's members.
size_t largest_key(const std::vector<StoredTensor>& tensors, size_t start,
                   const StorageGroup& group) {
  for (size_t index : group.members) {
    if (tensors[start].key < tensors[index].key) start = index;
  }
  return start;
}

// One group's header bytes and how far the .ptd estimate may be off.
struct GroupCost {
  uint64_t header_hi = 0;  // .ptd: header bytes the group adds at most
  uint64_t header_lo = 0;  // .ptd: at least
  uint64_t payload = 0;    // raw bytes
  // File mode: bytes a shard grows by at least, before header padding:
  // header_lo (.ptd) or the shortest JSON member and comma (safetensors), plus payload.
  uint64_t least_growth = 0;
};

GroupCost group_cost(const std::vector<StoredTensor>& tensors, const StorageGroup& group,
                     const ShardingOptions& options) {
  GroupCost cost;
  cost.payload = group.nbytes;
  if (options.format == ShardFormat::ptd) {
    // head_bound_entry and head_bound_segment count what a group adds, but
    // for padding that depends on position (string starts, the first
    // DataSegment's alignment, the root's) and vtables, which the file-level
    // bound budgets once (at most 80 bytes) and which a new table variant may
    // add at any step. Modelled byte by byte, a group changes the header by
    // its bounds -16 .. +26 bytes; the planner uses -32 .. +88. A lower bound
    // set too low, or an upper one too high, only costs exact layouts.
    for (size_t index : group.members) {
      const auto& t = tensors[index];
      cost.header_hi = add(cost.header_hi,
                           ptd::head_bound_entry(t.key.size(), t.data.shape.size(), t.data.opaque));
    }
    cost.header_hi = add(cost.header_hi, ptd::head_bound_segment());
    cost.header_lo = cost.header_hi > 32 ? cost.header_hi - 32 : 0;
    cost.header_hi = add(cost.header_hi, 8 + 80);
    cost.least_growth = add(cost.header_lo, cost.payload);
  } else if (options.max_shard_bytes && options.cap_mode == CapMode::file) {
    // The owner's member with its shortest offsets ("[0,n]"), as grown() counts out of order.
    const auto& owner = tensors[group.members[0]];
    cost.least_growth = add(add(safetensors::entry_json_size(owner.key, owner.data.dtype,
                                                             owner.data.shape, 0, cost.payload),
                                1),
                            cost.payload);
  }
  return cost;
}

// Fill after adding group g (the caller decides whether it fits).
// `fill` belongs to a shard holding at least one group.
Fill grown(const Fill& fill, const std::vector<StoredTensor>& tensors, const StorageGroup& group,
           const GroupCost& cost, const Geometry& geometry) {
  Fill next;
  const auto& owner = tensors[group.members[0]];
  next.last_owner = group.members[0];
  next.max_key = largest_key(tensors, fill.max_key, group);
  if (geometry.format == ShardFormat::ptd) {
    next.data = add(aligned(fill.data, geometry.segment_alignment), cost.payload);
    next.header_lo = add(fill.header_lo, cost.header_lo);
    next.header_hi = add(fill.header_hi, cost.header_hi);
    next.header_hi_unknown = fill.header_hi_unknown;
    return next;
  }
  // safetensors: the owner is appended to the JSON header and its bytes to the
  // data section. Groups arrive in owner-key order, so it sorts last and no
  // other member's offsets move: the new length is exact. (Out of order, the
  // later members' offsets would grow; only the exact layout can tell.)
  next.data = add(fill.data, cost.payload);
  bool in_order = tensors[fill.last_owner].key < owner.key;
  // Out of order the member's own offsets are unknown: count its shortest form.
  uint64_t begin = in_order ? fill.data : 0;
  uint64_t member = safetensors::entry_json_size(owner.key, owner.data.dtype, owner.data.shape,
                                                 begin, begin + cost.payload);
  uint64_t grow = add(member, 1);  // and the comma before it
  next.header_lo = add(fill.header_lo, grow);
  next.header_hi = add(fill.header_hi, grow);
  next.header_hi_unknown = fill.header_hi_unknown || !in_order;
  return next;
}

// Fill of a shard whose exact layout is known.
Fill anchored(const ShardSizer::Sizes& layout, const Geometry& geometry, size_t last_owner,
              size_t max_key) {
  Fill fill;
  fill.header_lo = fill.header_hi = layout.header_size;
  fill.data = layout.file_size - aligned(layout.header_size, geometry.header_alignment);
  fill.last_owner = last_owner;
  fill.max_key = max_key;
  return fill;
}

}  // namespace

std::string_view shard_extension(ShardFormat format) {
  return format == ShardFormat::ptd ? ".ptd" : ".safetensors";
}

std::string shard_file_name(std::string_view prefix, std::string_view sha256_hex,
                            ShardFormat format) {
  return fmt::format("{}-{}{}", prefix, sha256_hex.substr(0, 16), shard_extension(format));
}

namespace {

// The error for group g, which no shard can hold: its needs, and what would make it fit.
std::string oversize_message(const std::vector<StoredTensor>& tensors,
                             const std::vector<StorageGroup>& groups, size_t g,
                             const ShardingOptions& options) {
  const bool payload_mode = options.cap_mode == CapMode::payload;
  auto need_of = [&](size_t group) {
    return payload_mode ? group_cost(tensors, groups[group], options).payload
                        : layout_shard(tensors, groups, {group}, options).file_size;
  };
  const uint64_t cap = *options.max_shard_bytes;
  const uint64_t need = need_of(g);
  const uint64_t payload = group_cost(tensors, groups[g], options).payload;
  // The smallest cap every tensor fits alone (only computed on this error path).
  uint64_t smallest = need;
  for (size_t other = 0; other < groups.size(); ++other)
    smallest = std::max(smallest, need_of(other));
  std::string remedies = fmt::format(
      "--max-shard-bytes {} or more (the smallest cap every tensor "
      "fits)",
      smallest);
  if (!payload_mode && payload <= cap) {
    remedies += fmt::format(", --cap-mode payload (it has {} payload bytes)", payload);
  }
  remedies += ", or --oversize own-shard (it gets a shard of its own over the cap)";
  return fmt::format(
      "tensor {} needs {} bytes in a shard ({} mode) but --max-shard-bytes is {}; "
      "use {}",
      quote(tensors[groups[g].members[0]].key), need, cap_mode_name(options.cap_mode), cap,
      remedies);
}

}  // namespace

namespace {

// .ptd: a shard's keys in key order with what its header's size depends on,
// so that an exact size is a replay of the header model over them
// (ptd::HeaderSizeModel, equal to the builder's), not a layout built from
// copied and sorted entries. A shard's list is brought up to date only when it
// needs an exact size (most never do): its new keys are sorted and merged in.
// layout_shard checks the entries when the shards are laid out.
struct KeyShape {
  size_t tensor;
  uint64_t key_length;
  uint64_t rank;
  bool opaque;
};
struct ShardKeys {
  std::vector<KeyShape> sorted;
  size_t merged_groups = 0;  // the shard's first groups, whose keys `sorted` holds
};

constexpr size_t kNoGroup = static_cast<size_t>(-1);

// First-fit over the groups in order, each shard's size tracked incrementally
// (Fill) and made exact only when the bounds cannot decide.
class Planner {
 public:
  Planner(const std::vector<StoredTensor>& tensors, const std::vector<StorageGroup>& groups,
          const ShardingOptions& options)
      : tensors_(tensors),
        groups_(groups),
        options_(options),
        geometry_{options.format, options.format == ShardFormat::ptd ? options.alignment : 8,
                  options.alignment},
        file_cap_(options.max_shard_bytes && options.cap_mode == CapMode::file),
        rooms_(file_cap_ ? geometry_.header_alignment : 1) {}

  std::vector<PlannedShard> run() {
    for (size_t g = 0; g < groups_.size(); ++g) {
      auto cost = group_cost(tensors_, groups_[g], options_);
      if (!place_first_fit(g, cost)) open_shard(g, cost);
    }
    return std::move(shards_);
  }

 private:
  ShardSizer::Sizes exact_layout(const std::vector<size_t>& shard_groups) {
    return sizer_.size(tensors_, groups_, shard_groups, options_);
  }
  [[nodiscard]] KeyShape shape_of(size_t index) const {
    const auto& t = tensors_[index];
    return KeyShape{index, t.key.size(), t.data.shape.size(), t.data.opaque};
  }
  [[nodiscard]] bool by_key(const KeyShape& a, const KeyShape& b) const {
    return tensors_[a.tensor].key < tensors_[b.tensor].key;
  }
  void merge_into(std::vector<KeyShape>& into, std::vector<KeyShape>& keys);
  ShardSizer::Sizes exact_sizes(size_t s, size_t g, uint64_t data);
  bool fits(size_t s, size_t g, const GroupCost& cost, Fill& out);
  bool fits_exactly(size_t s, size_t g, const GroupCost& cost, Fill& out);
  void place(size_t s, size_t g, const GroupCost& cost, Fill next);
  detail::RoomIndex::Room room(size_t s) const;
  bool place_first_fit(size_t g, const GroupCost& cost);
  void open_shard(size_t g, const GroupCost& cost);

  const std::vector<StoredTensor>& tensors_;
  const std::vector<StorageGroup>& groups_;
  const ShardingOptions& options_;
  const Geometry geometry_;
  const bool file_cap_;
  std::vector<PlannedShard> shards_;
  std::vector<Fill> fills_;
  std::vector<bool> sealed_;  // an oversize shard, or one holding max_shard_tensors groups
  ShardSizer sizer_;          // the exact sizes layout_shard gives
  std::vector<ShardKeys> shard_keys_;  // by shard (.ptd only)
  std::vector<KeyShape> new_keys_, merged_;
  ptd::HeaderSizeModel model_;
  // Room in each shard; see room().
  detail::RoomIndex rooms_;
};

// Sorts `keys` and merges them into `into`.
void Planner::merge_into(std::vector<KeyShape>& into, std::vector<KeyShape>& keys) {
  auto less = [this](const KeyShape& a, const KeyShape& b) { return by_key(a, b); };
  std::sort(keys.begin(), keys.end(), less);
  merged_.clear();
  merged_.reserve(into.size() + keys.size());
  auto from = into.begin();
  for (const auto& k : keys) {
    auto at = std::upper_bound(from, into.end(), k, less);
    merged_.insert(merged_.end(), from, at);
    merged_.push_back(k);
    from = at;
  }
  merged_.insert(merged_.end(), from, into.end());
  into.swap(merged_);
}

// Exact sizes of shard s, with group g added unless g is kNoGroup; `data` is the
// data section's size (tracked exactly).
ShardSizer::Sizes Planner::exact_sizes(size_t s, size_t g, uint64_t data) {
  if (options_.format != ShardFormat::ptd) {
    auto shard_groups = shards_[s].groups;
    if (g != kNoGroup) shard_groups.push_back(g);
    return exact_layout(shard_groups);
  }
  if (shard_keys_.size() <= s) shard_keys_.resize(s + 1);
  auto& keys = shard_keys_[s];
  const auto& placed = shards_[s].groups;
  new_keys_.clear();
  for (; keys.merged_groups < placed.size(); ++keys.merged_groups) {
    for (size_t index : groups_[placed[keys.merged_groups]].members)
      new_keys_.push_back(shape_of(index));
  }
  if (!new_keys_.empty()) merge_into(keys.sorted, new_keys_);
  model_.reset();
  auto less = [this](const KeyShape& a, const KeyShape& b) { return by_key(a, b); };
  auto with = keys.sorted.begin();
  if (g != kNoGroup) {  // the group's members are sorted by key
    for (size_t index : groups_[g].members) {
      auto k = shape_of(index);
      auto at = std::upper_bound(with, keys.sorted.end(), k, less);
      for (; with != at; ++with) model_.add(with->key_length, with->rank, with->opaque);
      model_.add(k.key_length, k.rank, k.opaque);
    }
  }
  for (; with != keys.sorted.end(); ++with) model_.add(with->key_length, with->rank, with->opaque);
  const uint64_t segments = placed.size() + (g != kNoGroup ? 1 : 0);
  const uint64_t header = ptd::extended_header_size + model_.flatbuffer_size(segments);
  return {header, geometry_.file_size(header, data)};
}

// Whether group g fits shard s; on success `out` is the shard's fill with g.
bool Planner::fits(size_t s, size_t g, const GroupCost& cost, Fill& out) {
  if (sealed_[s]) return false;
  auto& fill = fills_[s];
  if (options_.max_shard_bytes && options_.cap_mode == CapMode::payload) {
    if (add(shards_[s].payload_bytes, cost.payload) > *options_.max_shard_bytes) return false;
    out = grown(fill, tensors_, groups_[g], cost, geometry_);
    return true;
  }
  out = grown(fill, tensors_, groups_[g], cost, geometry_);
  if (!file_cap_) return true;
  const uint64_t cap = *options_.max_shard_bytes;
  auto decide = [&]() -> int {  // 1 fits, 0 does not, -1 cannot tell
    if (geometry_.file_size(out.header_lo, out.data) > cap) return 0;
    if (!out.header_hi_unknown && geometry_.file_size(out.header_hi, out.data) <= cap) return 1;
    return -1;
  };
  int verdict = decide();
  if (verdict < 0 && !fill.exact()) {
    // Re-anchor the shard on its exact layout, then try again.
    auto rejected = std::move(fill.rejected);
    fill = anchored(exact_sizes(s, kNoGroup, fill.data), geometry_, fill.last_owner, fill.max_key);
    fill.rejected = std::move(rejected);
    out = grown(fill, tensors_, groups_[g], cost, geometry_);
    verdict = decide();
  }
  if (verdict >= 0) return verdict == 1;
  return fits_exactly(s, g, cost, out);
}

// The bounds cannot tell: the exact layout with g decides, remembered for
// .ptd groups of one key sorting last (see Fill::rejected).
bool Planner::fits_exactly(size_t s, size_t g, const GroupCost& cost, Fill& out) {
  auto& fill = fills_[s];
  const auto& members = groups_[g].members;
  const auto& first = tensors_[members[0]];
  bool memo = options_.format == ShardFormat::ptd && members.size() == 1 &&
              tensors_[fill.max_key].key < first.key;
  std::array<uint64_t, 3> key{first.key.size(), first.data.shape.size(),
                              uint64_t{first.data.opaque}};
  if (memo) {
    auto seen = fill.rejected.find(key);
    if (seen != fill.rejected.end() && cost.payload >= seen->second) return false;
  }
  auto layout = exact_sizes(s, g, out.data);
  if (layout.file_size <= *options_.max_shard_bytes) {
    out = anchored(layout, geometry_, members[0], out.max_key);
    return true;
  }
  if (memo) {
    auto [seen, fresh] = fill.rejected.try_emplace(key, cost.payload);
    if (!fresh) seen->second = std::min(seen->second, cost.payload);
  }
  return false;
}

void Planner::place(size_t s, size_t g, const GroupCost& cost, Fill next) {
  auto& shard = shards_[s];
  shard.groups.push_back(g);
  shard.payload_bytes = add(shard.payload_bytes, cost.payload);
  fills_[s] = std::move(next);
  if (options_.max_shard_tensors && shard.groups.size() >= *options_.max_shard_tensors) {
    sealed_[s] = true;
  }
  shard.size_bound = fills_[s].header_hi_unknown
                         ? exact_layout(shard.groups).file_size
                         : geometry_.file_size(fills_[s].header_hi, fills_[s].data);
}

// Room in shard s for RoomIndex. File mode: the cap minus the shard's
// smallest header padded, minus where a next group's bytes would start.
// Payload mode: the cap minus the payload so far. No cap: unbounded.
detail::RoomIndex::Room Planner::room(size_t s) const {
  if (sealed_[s]) return {};
  if (!options_.max_shard_bytes) return {std::numeric_limits<uint64_t>::max(), 0};
  const uint64_t cap = *options_.max_shard_bytes;
  if (!file_cap_) {
    const uint64_t used = shards_[s].payload_bytes;
    return {used < cap ? cap - used + 1 : 1, 0};
  }
  const uint64_t header = aligned(fills_[s].header_lo, geometry_.header_alignment);
  const uint64_t used = add(header, geometry_.next_start(fills_[s].data));
  if (used > cap) return {};
  return {cap - used + 1, header - fills_[s].header_lo};
}

// Group g into the first shard that holds it; false when none does.
bool Planner::place_first_fit(size_t g, const GroupCost& cost) {
  const uint64_t header = file_cap_ ? cost.least_growth - cost.payload : 0;
  bool placed = false;
  for (size_t s = rooms_.first_fit(0, header, cost.payload);
       s != detail::RoomIndex::npos && !placed; s = rooms_.first_fit(s + 1, header, cost.payload)) {
    Fill next;
    placed = fits(s, g, cost, next);
    if (placed) place(s, g, cost, std::move(next));
    rooms_.set(s, room(s));  // placing, or re-anchoring, changes it
  }
  return placed;
}

// A new shard starts from the exact layout of its first group.
void Planner::open_shard(size_t g, const GroupCost& cost) {
  auto layout = exact_layout({g});
  const bool fits_alone =
      !options_.max_shard_bytes ||
      cap_measure(options_.cap_mode, layout.file_size, cost.payload) <= *options_.max_shard_bytes;
  if (!fits_alone && !options_.oversize_own_shard) {
    fail(ErrorCode::conflict, "{}", oversize_message(tensors_, groups_, g, options_));
  }
  shards_.emplace_back();
  fills_.emplace_back();
  sealed_.push_back(!fits_alone ||
                    (options_.max_shard_tensors && *options_.max_shard_tensors <= 1));
  shards_.back().groups.push_back(g);
  shards_.back().payload_bytes = cost.payload;
  shards_.back().size_bound = layout.file_size;
  shards_.back().oversize = !fits_alone;
  fills_.back() = anchored(layout, geometry_, groups_[g].members[0],
                           largest_key(tensors_, groups_[g].members[0], groups_[g]));
  rooms_.push(room(shards_.size() - 1));
}

}  // namespace

std::vector<PlannedShard> plan_shards(const std::vector<StoredTensor>& tensors,
                                      const std::vector<StorageGroup>& groups,
                                      const ShardingOptions& options) {
  return Planner(tensors, groups, options).run();
}

}  // namespace ptepack
