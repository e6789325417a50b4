// Shard file layouts through the format writers' planners.
#include "core/shard_layout.h"

#include <algorithm>

#include "containers/flat_tensor.h"
#include "containers/safetensors.h"

namespace ptepack {

ShardLayout layout_shard(const std::vector<StoredTensor>& tensors,
                         const std::vector<StorageGroup>& groups,
                         const std::vector<size_t>& shard_groups, const ShardingOptions& options) {
  ShardLayout out;
  if (options.format == ShardFormat::ptd) {
    std::vector<ptd::Entry> entries;
    std::vector<uint64_t> segment_sizes;
    for (size_t g : shard_groups) {
      for (size_t index : groups[g].members) {
        const auto& t = tensors[index];
        entries.push_back({t.key, t.data.dtype, t.data.shape,
                           static_cast<uint32_t>(segment_sizes.size()), t.data.dim_order,
                           t.data.opaque});
      }
      segment_sizes.push_back(groups[g].nbytes);
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.key < b.key; });
    auto layout = ptd::plan_file(entries, segment_sizes, options.alignment);
    out.head = std::move(layout.head);
    out.header_size = layout.header_size;
    out.file_size = layout.file_size;
    for (size_t s = 0; s < shard_groups.size(); ++s) {
      out.placements.push_back({layout.segment_offsets[s], groups[shard_groups[s]].members[0]});
    }
    for (auto& e : entries) out.keys.push_back(std::move(e.key));
    return out;
  }
  std::vector<size_t> owners;
  for (size_t g : shard_groups) owners.push_back(groups[g].members[0]);
  std::sort(owners.begin(), owners.end(),
            [&](size_t a, size_t b) { return tensors[a].key < tensors[b].key; });
  std::vector<safetensors::Entry> entries;
  for (size_t index : owners) {
    const auto& t = tensors[index];
    entries.push_back({t.key, t.data.dtype, t.data.shape, t.data.bytes.size});
    out.keys.push_back(t.key);
  }
  auto layout = safetensors::plan_file(entries, {});
  out.head = std::move(layout.head);
  out.header_size = layout.header_size;
  out.file_size = layout.file_size;
  for (size_t k = 0; k < owners.size(); ++k)
    out.placements.push_back({layout.data_offsets[k], owners[k]});
  return out;
}

ShardSizer::Sizes ShardSizer::size(const std::vector<StoredTensor>& tensors,
                                   const std::vector<StorageGroup>& groups,
                                   const std::vector<size_t>& shard_groups,
                                   const ShardingOptions& options) {
  if (options.format != ShardFormat::ptd) {
    auto layout = layout_shard(tensors, groups, shard_groups, options);
    return {layout.header_size, layout.file_size};
  }
  // The entries layout_shard builds, assigned into the kept ones (no allocation once warm).
  size_t count = 0;
  for (size_t g : shard_groups) count += groups[g].members.size();
  if (entries_.size() < count) entries_.resize(count);
  segment_sizes_.clear();
  size_t n = 0;
  for (size_t g : shard_groups) {
    for (size_t index : groups[g].members) {
      const auto& t = tensors[index];
      auto& e = entries_[n++];
      e.key.assign(t.key);
      e.dtype = t.data.dtype;
      e.shape.assign(t.data.shape.begin(), t.data.shape.end());
      e.segment = static_cast<uint32_t>(segment_sizes_.size());
      e.dim_order.assign(t.data.dim_order.begin(), t.data.dim_order.end());
      e.opaque = t.data.opaque;
    }
    segment_sizes_.push_back(groups[g].nbytes);
  }
  // Entries past `count`, kept from a larger earlier shard, are not part of this one.
  auto end = entries_.begin() + static_cast<std::ptrdiff_t>(count);
  auto by_key = [](const auto& a, const auto& b) { return a.key < b.key; };
  if (!std::is_sorted(entries_.begin(), end, by_key)) std::sort(entries_.begin(), end, by_key);
  auto sizes = ptd_.size(std::span<const ptd::Entry>(entries_.data(), count), segment_sizes_,
                         options.alignment);
  return {sizes.header_size, sizes.file_size};
}

}  // namespace ptepack
