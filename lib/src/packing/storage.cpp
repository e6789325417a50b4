// Dedup: groups identical immutable tensors by digest (and layout where the format needs it).
#include "ptepack/packing/storage.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace ptepack {

std::vector<StorageGroup> group_tensors(const std::vector<StoredTensor>& tensors, DedupRule rule) {
  using Identity = std::tuple<Digest, uint64_t, int, Shape>;
  std::map<Identity, size_t> by_identity;
  std::vector<StorageGroup> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (!t.is_mutable) {
      Identity id{t.sha256, t.data.bytes.size, -1, {}};
      if (rule == DedupRule::dtype_shape_bytes) {
        std::get<2>(id) = static_cast<int>(t.data.dtype);
        std::get<3>(id) = t.data.shape;
      }
      auto [it, fresh] = by_identity.emplace(std::move(id), groups.size());
      if (!fresh) {
        groups[it->second].members.push_back(i);
        continue;
      }
    }
    groups.push_back(StorageGroup{{i}, t.data.bytes.size, t.is_mutable});
  }
  // Tensors arrive sorted by key, so each member list is sorted and groups are
  // created in owner-key order already; sort anyway to keep the contract local.
  std::sort(groups.begin(), groups.end(), [&](const StorageGroup& a, const StorageGroup& b) {
    return tensors[a.members[0]].key < tensors[b.members[0]].key;
  });
  return groups;
}

}  // namespace ptepack
