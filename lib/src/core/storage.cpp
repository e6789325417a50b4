// Dedup: groups identical immutable tensors by digest (and layout where the format needs it).
#include "ptepack/core/storage.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace ptepack {

std::vector<StorageGroup> group_tensors(const std::vector<StoredTensor>& tensors, DedupRule rule) {
  // Groups are found by their first member's index: hashed on its digest,
  // equal when digest, byte length (and, by the rule, dtype and shape) agree.
  auto hash = [&](size_t i) {
    size_t h = 0;
    std::memcpy(&h, tensors[i].sha256.data(), sizeof h);
    return h;
  };
  auto same = [&](size_t a, size_t b) {
    const auto& x = tensors[a];
    const auto& y = tensors[b];
    if (x.sha256 != y.sha256 || x.data.bytes.size != y.data.bytes.size) return false;
    return rule != DedupRule::dtype_shape_bytes ||
           (x.data.dtype == y.data.dtype && x.data.shape == y.data.shape);
  };
  std::unordered_map<size_t, size_t, decltype(hash), decltype(same)> group_of(
      tensors.size(), hash, same);  // first member -> group
  std::vector<StorageGroup> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (!t.is_mutable) {
      auto [it, fresh] = group_of.emplace(i, groups.size());
      if (!fresh) {
        groups[it->second].members.push_back(i);
        continue;
      }
    }
    groups.push_back(StorageGroup{{i}, t.data.bytes.size, t.is_mutable});
  }
  // Groups are created in the order of their first members; when the tensors
  // arrive sorted by key (pack's always do), that is owner-key order already.
  auto by_owner_key = [&](const StorageGroup& a, const StorageGroup& b) {
    return tensors[a.members[0]].key < tensors[b.members[0]].key;
  };
  if (!std::is_sorted(groups.begin(), groups.end(), by_owner_key)) {
    std::sort(groups.begin(), groups.end(), by_owner_key);
  }
  return groups;
}

}  // namespace ptepack
