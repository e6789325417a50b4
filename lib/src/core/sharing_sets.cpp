// Sharing sets of storage groups, and first-fit within each set.
#include "core/sharing_sets.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace ptepack {

SharingSets sharing_sets(const std::vector<StoredTensor>& tensors,
                         const std::vector<StorageGroup>& groups,
                         const std::vector<SharingSet>& users) {
  std::map<SharingSet, size_t> index;  // set -> its first group (smallest owner key)
  std::vector<SharingSet> of_group(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    SharingSet set;
    for (size_t member : groups[g].members) {
      const auto& u = users[member];
      SharingSet merged;
      std::set_union(set.begin(), set.end(), u.begin(), u.end(), std::back_inserter(merged));
      set = std::move(merged);
    }
    index.emplace(set, g);  // groups come in owner-key order: the first one stays
    of_group[g] = std::move(set);
  }
  std::vector<const std::pair<const SharingSet, size_t>*> order;
  for (const auto& entry : index) order.push_back(&entry);
  std::sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
    if (a->first.size() != b->first.size()) return a->first.size() > b->first.size();
    const auto& ka = tensors[groups[a->second].members.front()].key;
    const auto& kb = tensors[groups[b->second].members.front()].key;
    return ka < kb;
  });
  SharingSets out;
  std::map<SharingSet, size_t> position;
  for (const auto* entry : order) {
    position.emplace(entry->first, out.sets.size());
    out.sets.push_back(entry->first);
  }
  out.set_of.reserve(groups.size());
  for (const auto& set : of_group) out.set_of.push_back(position.at(set));
  return out;
}

std::vector<PlannedShard> plan_shards_by_set(const std::vector<StoredTensor>& tensors,
                                             const std::vector<StorageGroup>& groups,
                                             const SharingSets& sets,
                                             const ShardingOptions& options) {
  std::vector<std::vector<size_t>> members(sets.sets.size());  // group indices per set
  for (size_t g = 0; g < groups.size(); ++g) members[sets.set_of[g]].push_back(g);
  std::vector<PlannedShard> out;
  for (const auto& indices : members) {
    std::vector<StorageGroup> subset;
    subset.reserve(indices.size());
    for (size_t g : indices) subset.push_back(groups[g]);
    for (auto& shard : plan_shards(tensors, subset, options)) {
      for (auto& g : shard.groups) g = indices[g];
      out.push_back(std::move(shard));
    }
  }
  return out;
}

}  // namespace ptepack
