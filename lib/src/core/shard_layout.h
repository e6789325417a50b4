// The exact layout of one shard file: its header bytes and where each stored tensor goes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "containers/flat_tensor.h"
#include "ptepack/core/shard_plan.h"

namespace ptepack {

struct ShardLayout {
  std::string head;          // bytes from offset 0 (header and its padding)
  uint64_t header_size = 0;  // head bytes before the padding
  struct Placement {
    uint64_t offset;  // absolute file offset
    size_t tensor;    // index of the tensor whose bytes go there (a group owner)
  };
  std::vector<Placement> placements;  // ascending offsets
  uint64_t file_size = 0;
  std::vector<std::string> keys;  // sorted; every key readable from the file by name
};

// Lays out the shard holding `shard_groups` (indices into `groups`, in
// placement order): .ptd gets one segment per group (in that order) and a
// NamedData for every member key; safetensors stores each group's owner, keys
// sorted. Pure: no I/O.
[[nodiscard]] ShardLayout layout_shard(const std::vector<StoredTensor>& tensors,
                                       const std::vector<StorageGroup>& groups,
                                       const std::vector<size_t>& shard_groups,
                                       const ShardingOptions& options);

// layout_shard's header_size and file_size, without its bytes: the planner sizes
// every new shard's first group and every safetensors candidate with it (.ptd
// candidates: ptd::HeaderSizeModel); a .ptd one is sized with buffers kept
// between calls.
class ShardSizer {
 public:
  struct Sizes {
    uint64_t header_size = 0;
    uint64_t file_size = 0;
  };
  [[nodiscard]] Sizes size(const std::vector<StoredTensor>& tensors,
                           const std::vector<StorageGroup>& groups,
                           const std::vector<size_t>& shard_groups, const ShardingOptions& options);

 private:
  std::vector<ptd::Entry> entries_;
  std::vector<uint64_t> segment_sizes_;
  ptd::FileSizer ptd_;
};

}  // namespace ptepack
